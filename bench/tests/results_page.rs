//! The book's benchmark results (`docs/src/benchmark-results.md`) are written from the
//! records `bench/run.sh --record` files in `bench/results/` (each with its command, date,
//! commit and machine): the test fails when the checked-in page is stale, and
//! `MWRS_BLESS=1` rewrites it. Figures elsewhere in the book link here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

fn records() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "json"));
    files.sort();
    files.reverse(); // newest first: the names start with the UTC time
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("–".into(), |x| format!("{x:.digits$}"))
}

fn mib(v: &Value) -> String {
    v.as_f64()
        .map_or("–".into(), |b| format!("{:.1} MiB", b / 1_048_576.0))
}

/// The rows of a `sizes` run.
fn sizes(results: &Value, out: &mut String) {
    out.push_str(
        "| N | bare update | fan-out (ratio) | abort: ratio, median of rounds | steady RSS | \
         start-up peak (ratio) | fan-out peak RSS | idle reconciles / writes a minute | \
         upstream's fan-out (ratio) | upstream's peak RSS | Lease renewal gaps in the fan-out, \
         median / largest |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in results.as_array().into_iter().flatten() {
        let steady = r["steady_rss_bytes"].as_f64().unwrap_or(0.0);
        let startup = r["startup_peak_rss_bytes"].as_f64().unwrap_or(0.0);
        let _ = writeln!(
            out,
            "| {} | {} s | {} s ({}) | {} | {} | {} ({}) | {} | {} / {} | {} | {} | {} |",
            r["clusters"],
            num(&r["bare_update_s"], 2),
            num(&r["fanout_s"], 2),
            num(&r["fanout_ratio"], 2),
            num(&r["abort_ratio"], 2),
            mib(&r["steady_rss_bytes"]),
            mib(&r["startup_peak_rss_bytes"]),
            if steady > 0.0 {
                format!("{:.2}", startup / steady)
            } else {
                "–".into()
            },
            mib(&r["peak_rss_bytes"]),
            num(&r["idle_reconciles_per_min"], 1),
            num(&r["idle_writes_per_min"], 1),
            match r["peer_fanout_s"].as_f64() {
                Some(_) => format!(
                    "{} s ({})",
                    num(&r["peer_fanout_s"], 2),
                    num(&r["peer_fanout_ratio"], 2)
                ),
                None => "–".into(),
            },
            mib(&r["peer_peak_rss_bytes"]),
            match r["lease_renewal_gap_max_s"].as_f64() {
                Some(_) => format!(
                    "{} s / {} s",
                    num(&r["lease_renewal_gap_p50_s"], 2),
                    num(&r["lease_renewal_gap_max_s"], 2)
                ),
                None => "–".into(),
            },
        );
    }
}

/// The time back to stable of a `sizes` run's abort rounds, where it was measured: from
/// the breach to every agent's answer on the stable revision, beside the bare client's
/// update from its first write to every agent's answer.
fn back_to_stable(results: &Value, out: &mut String) {
    let rows = results.as_array().into_iter().flatten();
    let timed = |r: &&Value| r["abort_rounds"][0]["back_to_stable"].is_object();
    if !results.as_array().into_iter().flatten().any(|r| timed(&r)) {
        return;
    }
    out.push_str(
        "\nTime back to stable, each abort round: breach → every agent's answer on the \
         stable revision (the last; the median and 99th percentile per ManifestWork), beside \
         the bare client's update of the same ManifestWorks, first write → every agent's \
         answer; the controller's own `mwrs_controller_abort_to_stable_seconds` for round 1 \
         (from its abort, not the breach).\n\n\
         | N | round | back to stable (p50 / p99) | bare update answered (p50 / p99) | ratio | \
         the controller's figure |\n|---|---|---|---|---|---|\n",
    );
    let answered = |a: &Value| {
        format!(
            "{} s ({} / {} s)",
            num(&a["whole_s"], 2),
            num(&a["p50_s"], 2),
            num(&a["p99_s"], 2)
        )
    };
    for r in rows.filter(timed) {
        for (i, round) in r["abort_rounds"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let (back, bare) = (&round["back_to_stable"], &round["bare_update_answered"]);
            let ratio = match (back["whole_s"].as_f64(), bare["whole_s"].as_f64()) {
                (Some(b), Some(u)) if u > 0.0 => format!("{:.2}", b / u),
                _ => "–".into(),
            };
            let own = match i {
                0 => num(&r["controller_back_to_stable_s"], 2) + " s",
                _ => "–".into(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {ratio} | {own} |",
                r["clusters"],
                i + 1,
                answered(back),
                answered(bare),
            );
        }
    }
}

/// A fault soak's run: what was injected and what was found (bench/src/soak/).
fn soak(results: &Value, out: &mut String) {
    let _ = writeln!(
        out,
        "Seed {}: {} rounds in {} s over {} clusters in {} decision groups; {} replica \
         restarts; {} writes by the replicas audited.\n",
        results["seed"],
        results["rounds"],
        num(&results["seconds"], 0),
        results["clusters"],
        results["groups"],
        results["replica_restarts"],
        results["writes_audited"],
    );
    for (title, key) in [("fault injected", "faults"), ("violation", "violations")] {
        let _ = writeln!(out, "| {title} | count |\n|---|---|");
        if let Some(o) = results[key].as_object() {
            for (k, v) in o {
                let _ = writeln!(out, "| {k} | {v} |");
            }
        }
        out.push('\n');
    }
}

/// The numbers of any other run, one per line.
fn fields(results: &Value, out: &mut String) {
    out.push_str("| measure | value |\n|---|---|\n");
    if let Some(o) = results.as_object() {
        for (k, v) in o {
            if v.is_number() {
                let _ = writeln!(out, "| `{k}` | {} |", num(v, 3));
            }
        }
    }
}

fn page() -> String {
    let mut out = String::from(
        "# Benchmark results\n\n<!-- Generated from bench/results/*.json \
         (bench/tests/results_page.rs); `MWRS_BLESS=1 cargo test -p mwrs-bench --test \
         results_page` rewrites it. -->\n\nEvery run `bench/run.sh --record` filed, newest \
         first, with its command, commit and machine. What each run measures is on \
         [the benchmarks page](benchmarks.md); earlier runs, before records were kept, are in \
         the lab notebook `bench/README.md`.\n",
    );
    let records = records();
    if records.is_empty() {
        out.push_str("\nNo run has been recorded yet.\n");
    }
    for r in records {
        let run = &r["run"];
        let m = &run["machine"];
        let _ = write!(
            out,
            "\n## {} · {}\n\n`{}` at commit `{}`, on {} CPUs ({}) with {} GiB.\n\n",
            run["date"].as_str().unwrap_or("?"),
            r["mode"].as_str().unwrap_or("?"),
            run["command"].as_str().unwrap_or("?"),
            run["commit"].as_str().unwrap_or("?"),
            m["cpus"],
            m["cpu_model"].as_str().unwrap_or("?"),
            m["memory_gib"],
        );
        match r["mode"].as_str() {
            Some("sizes") => {
                sizes(&r["results"], &mut out);
                back_to_stable(&r["results"], &mut out);
            }
            Some("soak") => soak(&r["results"], &mut out),
            _ => fields(&r["results"], &mut out),
        }
    }
    out
}

#[test]
fn the_results_page_is_written_from_the_records() {
    mwrs_testsupport::check_generated(
        "docs/src/benchmark-results.md",
        &page(),
        "cargo test -p mwrs-bench --test results_page",
    );
}
