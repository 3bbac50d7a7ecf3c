//! What the size run prints and records: the table of rows with the controller's RSS growth
//! per cluster, each row as JSON, and the record every run (sizes, many, plugin,
//! dashboard) writes to `--json` and `--record`.

use serde_json::{Value, json};

use super::{AbortRound, Bench, Row};
use crate::cpu::Split;
use crate::record;

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
pub(super) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        len if len % 2 == 1 => v[len / 2],
        len => (v[len / 2 - 1] + v[len / 2]) / 2.0,
    }
}

/// Each round's abort ratio, in round order, and their spread.
pub(super) fn ratios_text(rounds: &[AbortRound]) -> String {
    let ratios: Vec<f64> = rounds.iter().map(AbortRound::ratio).collect();
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    format!("{} (spread {min:.2}–{max:.2})", each.join(", "))
}

/// The abort rounds of a controller phase: their ratios, the CPU of each window (the bare
/// update, the fan-out, each round's bare update and abort), and the first abort's parts.
pub(super) fn print_aborts(row: &Row) {
    eprintln!(
        "   abort ratios of the {} rounds: {}",
        row.abort_rounds.len(),
        ratios_text(&row.abort_rounds)
    );
    eprintln!(
        "   CPU during the bare update: {}",
        row.bare_update_cpu.text(row.bare_update_s)
    );
    eprintln!(
        "   CPU during the fan-out: {}",
        row.fanout_cpu.text(row.fanout_s)
    );
    for (i, r) in row.abort_rounds.iter().enumerate() {
        eprintln!(
            "   CPU, round {}: bare update {}; abort {}",
            i + 1,
            r.bare_cpu.text(r.bare_s),
            r.abort_cpu.text(r.abort_s)
        );
        eprintln!(
            "   round {}: back to stable (breach → every agent's answer) {}; the bare update \
             answered (first write → every agent's answer) {}; ratio {:.2}",
            i + 1,
            r.back.text(),
            r.bare_answered.text(),
            r.back.whole_s / r.bare_answered.whole_s
        );
    }
    if let Some(s) = row.controller_back_to_stable_s {
        eprintln!(
            "   the controller's own mwrs_controller_abort_to_stable_seconds, round 1: {s:.2}s"
        );
    }
    eprintln!(
        "   abort: breach → first revert {:.2}s, first → last revert {:.2}s; from v3 to the \
         last revert {} passes, {} ManifestWork writes, {} conflicts, {} status writes",
        row.abort_to_first_revert_s,
        row.abort_reverts_s,
        row.abort_reconciles,
        row.abort_work_writes,
        row.abort_conflicts,
        row.abort_status_writes
    );
}

/// The rest of a controller phase: create, fan-out, abort, idle and memory, the CLI's reads
/// and the restart.
pub(super) fn print_controller(row: &Row) {
    eprintln!(
        "   create {:.2}s, fan-out {:.2}s ({:.2}x), abort {:.2}s ({:.2}x), idle {:.3} cpu-s/min, {:.1} req/min (baseline {:.1}), {:.1} reconciles/min, {:.1} writes/min, with {} silent: {:.1} reconciles/min, {:.1} writes/min, peak rss {:.1} MiB",
        row.create_s,
        row.fanout_s,
        row.fanout_ratio,
        row.abort_s,
        row.abort_ratio,
        row.idle_cpu_s_per_min,
        row.idle_requests_per_min,
        row.baseline_requests_per_min,
        row.idle_reconciles_per_min,
        row.idle_writes_per_min,
        row.silent_clusters,
        row.silent_idle_reconciles_per_min,
        row.silent_idle_writes_per_min,
        row.peak_rss_bytes as f64 / 1048576.0
    );
    eprintln!(
        "   CLI: list {:.2}s; rollout status {:.2}s ({:.2}x), rollout plan {:.2}s ({:.2}x)",
        row.list_works_s,
        row.cli_status_s,
        row.cli_status_s / row.list_works_s,
        row.cli_plan_s,
        row.cli_plan_s / row.list_works_s
    );
    eprintln!(
        "   restart: ready in {:.2}s, start-up peak rss {:.1} MiB vs steady {:.1} MiB ({:.2}x), {} writes",
        row.restart_ready_s,
        row.startup_peak_rss_bytes as f64 / 1048576.0,
        row.steady_rss_bytes as f64 / 1048576.0,
        row.startup_peak_rss_bytes as f64 / row.steady_rss_bytes.max(1) as f64,
        row.restart_writes
    );
}

fn cpu_json(c: &Split) -> Value {
    json!({"hub_s": c.hub, "controller_s": c.controller, "harness_s": c.harness})
}

pub(crate) fn json_row(r: &Row) -> Value {
    json!({
        "clusters": r.n,
        "bare_create_s": r.bare_create_s, "bare_update_s": r.bare_update_s,
        "controller_create_s": r.create_s, "fanout_s": r.fanout_s, "abort_s": r.abort_s,
        "fanout_ratio": r.fanout_ratio, "abort_ratio": r.abort_ratio,
        "abort_rounds": r.abort_rounds.iter()
            .map(|a| json!({
                "bare_update_s": a.bare_s, "abort_s": a.abort_s,
                "bare_update_cpu": cpu_json(&a.bare_cpu), "abort_cpu": cpu_json(&a.abort_cpu),
                "back_to_stable": a.back.json(), "bare_update_answered": a.bare_answered.json(),
            }))
            .collect::<Vec<_>>(),
        "bare_update_cpu": cpu_json(&r.bare_update_cpu), "fanout_cpu": cpu_json(&r.fanout_cpu),
        "abort_to_first_revert_s": r.abort_to_first_revert_s, "abort_reverts_s": r.abort_reverts_s,
        "controller_back_to_stable_s": r.controller_back_to_stable_s,
        "abort_reconciles": r.abort_reconciles, "abort_work_writes": r.abort_work_writes,
        "abort_conflicts": r.abort_conflicts, "abort_status_writes": r.abort_status_writes,
        "idle_cpu_s_per_min": r.idle_cpu_s_per_min,
        "idle_requests_per_min": r.idle_requests_per_min,
        "baseline_requests_per_min": r.baseline_requests_per_min,
        "idle_reconciles_per_min": r.idle_reconciles_per_min,
        "idle_writes_per_min": r.idle_writes_per_min,
        "silent_clusters": r.silent_clusters,
        "silent_idle_reconciles_per_min": r.silent_idle_reconciles_per_min,
        "silent_idle_writes_per_min": r.silent_idle_writes_per_min,
        "peak_rss_bytes": r.peak_rss_bytes,
        "lease_renewal_gap_p50_s": r.lease_gap_p50_s,
        "lease_renewal_gap_max_s": r.lease_gap_max_s,
        "steady_rss_bytes": r.steady_rss_bytes,
        "restart_ready_s": r.restart_ready_s,
        "startup_peak_rss_bytes": r.startup_peak_rss_bytes,
        "restart_writes": r.restart_writes,
        "list_works_s": r.list_works_s, "cli_status_s": r.cli_status_s, "cli_plan_s": r.cli_plan_s,
        "peer_fanout_s": r.peer_fanout_s, "peer_fanout_ratio": r.peer_fanout_ratio,
        "peer_peak_rss_bytes": r.peer_peak_rss_bytes,
        "peer_idle_cpu_s_per_min": r.peer_idle_cpu_s_per_min,
    })
}

pub(crate) fn report(rows: &[Row]) {
    let mib = |b: u64| b as f64 / 1048576.0;
    println!();
    println!(
        "| N | bare update | fan-out | ratio | abort (round 1) | abort ratio (median of rounds) | idle CPU s/min | idle hub req/min (no controller) | idle reconciles/min | idle writes/min, 1% silent | peak RSS | steady RSS | restart: start-up peak (ratio), writes | peer fan-out | peer ratio | peer RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let opt =
            |v: Option<f64>, unit: &str| v.map_or("–".to_string(), |x| format!("{x:.2}{unit}"));
        println!(
            "| {} | {:.2} s | {:.2} s | {:.2} | {:.2} s | {:.2} | {:.3} | {:.1} ({:.1}) | {:.1} | {:.1} ({} silent) | {:.1} MiB | {:.1} MiB | {:.1} MiB ({:.2}), {} | {} | {} | {} |",
            r.n,
            r.bare_update_s,
            r.fanout_s,
            r.fanout_ratio,
            r.abort_s,
            r.abort_ratio,
            r.idle_cpu_s_per_min,
            r.idle_requests_per_min,
            r.baseline_requests_per_min,
            r.idle_reconciles_per_min,
            r.silent_idle_writes_per_min,
            r.silent_clusters,
            mib(r.peak_rss_bytes),
            mib(r.steady_rss_bytes),
            mib(r.startup_peak_rss_bytes),
            r.startup_peak_rss_bytes as f64 / r.steady_rss_bytes.max(1) as f64,
            r.restart_writes,
            opt(r.peer_fanout_s, " s"),
            opt(r.peer_fanout_ratio, ""),
            r.peer_peak_rss_bytes
                .map_or("–".to_string(), |b| format!("{:.1} MiB", mib(b))),
        );
    }
    if let [a, .., b] = rows
        && b.n > a.n
    {
        let slope = |x: u64, y: u64| (y as f64 - x as f64) / (b.n - a.n) as f64;
        let steady = slope(a.steady_rss_bytes, b.steady_rss_bytes);
        println!(
            "\ncontroller RSS growth per cluster (N={} → N={}): steady {:.0} bytes, peak {:.0} bytes",
            a.n,
            b.n,
            steady,
            slope(a.peak_rss_bytes, b.peak_rss_bytes)
        );
        // The fixed cost is what the line through both sizes gives at N = 0.
        let fixed = a.steady_rss_bytes as f64 - steady * a.n as f64;
        println!(
            "steady RSS projected at 300,000 ManifestWorks: {:.0} MiB (fixed {:.1} MiB)",
            (fixed + steady * 300_000.0) / 1_048_576.0,
            fixed / 1_048_576.0
        );
        if let (Some(pa), Some(pb)) = (a.peer_peak_rss_bytes, b.peer_peak_rss_bytes) {
            let pper = (pb as f64 - pa as f64) / (b.n - a.n) as f64;
            println!("peer RSS growth: {:.0} bytes per cluster", pper);
        }
    }
}

/// Writes a run's record (its results, command, date, commit and machine) to `--json` and
/// `--record`, if given.
pub(crate) fn write_json(bench: &Bench, mode: &str, results: &Value) -> anyhow::Result<()> {
    let args = &bench.args;
    record::write(
        &record::record(mode, results),
        args.json.as_deref(),
        args.record.as_deref(),
    )
}
