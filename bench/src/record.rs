//! A run's results as a record: the results with the command that produced them, when,
//! from which commit and on which machine. `--json FILE` writes one; `--record DIR` also
//! files it as `DIR/<UTC time>-<mode>.json`, which the book's results page is written from
//! (`bench/tests/results_page.rs`).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

/// The record of a run of `mode` (sizes, many, plugin, dashboard) with `results`.
pub fn record(mode: &str, results: &Value) -> Value {
    json!({
        "mode": mode,
        "run": {
            // bench/run.sh passes the command as the user typed it.
            "command": std::env::var("BENCH_COMMAND")
                .unwrap_or_else(|_| std::env::args().collect::<Vec<_>>().join(" ")),
            "date": utc_now(),
            "commit": commit(),
            "machine": machine(),
        },
        "results": results,
    })
}

/// Writes `record` to `json` and, with `dir`, to `dir/<date>-<mode>.json`.
pub fn write(record: &Value, json: Option<&Path>, dir: Option<&Path>) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(record)? + "\n";
    if let Some(path) = json {
        std::fs::write(path, &text)?;
    }
    if let Some(dir) = dir {
        let date = record["run"]["date"]
            .as_str()
            .unwrap_or("undated")
            .replace(':', "");
        let mode = record["mode"].as_str().unwrap_or("run");
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{date}-{mode}.json"));
        std::fs::write(&path, &text)?;
        eprintln!("recorded {}", path.display());
    }
    Ok(())
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn utc_now() -> String {
    output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_default()
}

/// HEAD's short hash, with `-dirty` when the tree has changes.
fn commit() -> String {
    let head = output("git", &["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    let dirty = output("git", &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    if dirty { format!("{head}-dirty") } else { head }
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok());
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu_model": model,
        "memory_gib": mem_kib.map(|k| (k as f64 / 1048576.0 * 10.0).round() / 10.0),
    })
}
