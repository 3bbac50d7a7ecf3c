//! The many-MWRS run's report: the phases against their references, the memory, the
//! hub's cost, and each target of issue #36 as met or not, with its figure; and the
//! run's results as JSON (the record).

use serde_json::{Value, json};

use super::ManyRow;
use super::one::{OneRound, median_of};
use crate::cpu::Split;
use crate::measure::verbs_text;

const MIB: f64 = 1_048_576.0;

fn mib(b: u64) -> f64 {
    b as f64 / MIB
}

impl ManyRow {
    fn works(&self) -> usize {
        self.count * self.clusters
    }

    /// The bare client's figures are for `bare_sample` names: scaled to `names`.
    fn bare_scaled(&self, secs: f64, names: usize) -> f64 {
        secs * names as f64 / self.bare_sample.max(1) as f64
    }

    /// Bytes of steady RSS per ManifestWork, from the two halves.
    fn slope(&self) -> f64 {
        let half = (self.count / 2 * self.clusters) as f64;
        (self.steady_rss_bytes as f64 - self.half_steady_rss_bytes as f64)
            / (self.works() as f64 - half)
    }

    /// The hub's heap per ManifestWork, between half the MWRS and all of them.
    fn hub_slope(&self) -> f64 {
        let half = (self.count / 2 * self.clusters) as f64;
        (self.hub_heap_bytes as f64 - self.hub_half_heap_bytes as f64)
            / (self.works() as f64 - half)
    }

    /// The reference of the one-name phases: the bare client's update of one name beside
    /// the controller, or (a run without it) on the empty hub; and what it is.
    fn one_name_reference(&self) -> (f64, &'static str) {
        if self.bare_update_one_beside_s > 0.0 {
            (
                self.bare_update_one_beside_s,
                "bare update of one name, beside the controller",
            )
        } else {
            (self.bare_update_one_s, "bare update of one name")
        }
    }

    /// One MWRS's fan-out against the bare client: the median of the rounds' ratios (a
    /// row without rounds, as a run stopped before them leaves: its one change against
    /// its one reference).
    fn fanout_ratio(&self) -> f64 {
        if self.one_rounds.is_empty() {
            return self.one_change_s / self.one_name_reference().0;
        }
        median_of(&self.one_rounds, OneRound::ratio)
    }

    /// Every MWRS changing at once was measured over a window, not to its end.
    fn all_change_windowed(&self) -> bool {
        self.all_change_works > 0 && self.all_change_works < self.works()
    }

    /// The time every MWRS changing at once took, or (measured over a window) would take
    /// at the rate of that window; 0 when not reached.
    fn all_change_projected_s(&self) -> f64 {
        if self.all_change_works == 0 {
            return 0.0;
        }
        self.all_change_s * self.works() as f64 / self.all_change_works as f64
    }

    /// What every MWRS changing at once covered, for a phase measured over a window.
    fn all_change_span(&self) -> String {
        if self.all_change_windowed() {
            format!(" over its first {:.0} s", self.all_change_s)
        } else {
            String::new()
        }
    }

    fn ratio_to_steady(&self, peak: u64) -> f64 {
        peak as f64 / self.steady_rss_bytes.max(1) as f64
    }

    /// Each target: what, the figure, and met or not; `None` when the run stopped
    /// before the phase that measures it (its figures are still 0).
    fn targets(&self) -> Vec<(&'static str, String, Option<bool>)> {
        let fanout = self.fanout_ratio();
        let startup = self.ratio_to_steady(self.startup_peak_rss_bytes);
        let all = self.ratio_to_steady(self.all_peak_rss_bytes);
        let f = &self.failover;
        let reached = |figure: f64, met: bool| (figure > 0.0).then_some(met);
        vec![
            (
                "steady ≤ 2 KB per ManifestWork and ≤ 600 MiB",
                format!(
                    "{:.0} B, {:.1} MiB",
                    self.slope(),
                    mib(self.steady_rss_bytes)
                ),
                reached(
                    self.steady_rss_bytes as f64,
                    self.slope() <= 2048.0 && mib(self.steady_rss_bytes) <= 600.0,
                ),
            ),
            (
                "start-up peak ≤ 1.3× steady",
                format!("{startup:.2}×"),
                reached(startup, startup <= 1.3),
            ),
            (
                "peak while every MWRS changes ≤ 2× steady",
                format!("{all:.2}×{}", self.all_change_span()),
                reached(all, all <= 2.0),
            ),
            (
                "cold start < 5 min",
                format!("{:.1} s", self.cold_start_s),
                reached(self.cold_start_s, self.cold_start_s < 300.0),
            ),
            (
                "one MWRS's fan-out ≤ 1.10× the bare client",
                format!("{fanout:.2}×"),
                reached(self.one_change_s, fanout <= 1.10),
            ),
            (
                "failover < 60 s (kill → the standby's first write)",
                format!("{:.1} s", f.kill_to_first_write_s),
                reached(f.kill_to_first_write_s, f.kill_to_first_write_s < 60.0),
            ),
            (
                "the standby repeats no write",
                format!("{}", f.repeated_writes),
                reached(f.kill_to_first_write_s, f.repeated_writes == 0.0),
            ),
            (
                "Lease renewals never past half the lease (7.5 s)",
                format!("largest gap {:.2} s", self.lease_gap_max_s),
                reached(self.lease_gaps as f64, self.lease_gap_max_s <= 7.5),
            ),
        ]
    }
}

/// The row as the bench prints it: the phases against their references, what they cost,
/// failover and the hub, and the targets.
pub fn print(r: &ManyRow) {
    print_phases(r);
    print_costs(r);
    print_failover_and_hub(r);
    print_targets(r);
}

/// The title and the table of phases, each beside its reference of the same run.
fn print_phases(r: &ManyRow) {
    let works = r.works();
    println!(
        "\n{} MWRS × {} clusters = {works} ManifestWorks",
        r.count, r.clusters
    );
    if r.bare_sample < r.count {
        println!(
            "(the bare client wrote the ManifestWorks of {} names; its figures for more are scaled from them)",
            r.bare_sample
        );
    }
    println!("| phase | controller | reference (same run) | ratio |");
    println!("|---|---|---|---|");
    // A phase a stopped run did not reach has no figure (0), and no ratio either.
    let line = |what: &str, ours: f64, reference: f64, what_ref: &str| {
        if ours > 0.0 {
            println!(
                "| {what} | {ours:.2} s | {reference:.2} s ({what_ref}) | {:.2} |",
                ours / reference
            );
        } else {
            println!("| {what} | not reached | {reference:.2} s ({what_ref}) | – |");
        }
    };
    line(
        "create every MWRS",
        r.create_s,
        r.bare_scaled(r.bare_create_s, r.count),
        "bare create of all",
    );
    line(
        "bare update of one name, beside the controller",
        r.bare_update_one_beside_s,
        r.bare_update_one_s,
        "the same on the empty hub, before the controller",
    );
    let (one, one_what) = r.one_name_reference();
    if r.one_rounds.is_empty() {
        line("one MWRS changes", r.one_change_s, one, one_what);
    } else {
        println!(
            "| one MWRS changes (median of {} rounds, each beside a bare update) | {:.2} s | {one:.2} s ({one_what}, median) | {:.2} (median of the rounds' ratios) |",
            r.one_rounds.len(),
            r.one_change_s,
            r.fanout_ratio()
        );
    }
    line("one MWRS aborts", r.one_abort_s, one, one_what);
    line(
        &format!("{} MWRS change at once", r.ten),
        r.ten_change_s,
        r.bare_scaled(r.bare_update_all_s, r.ten),
        "bare update of as many names",
    );
    let all_what = if r.all_change_windowed() {
        format!(
            "every MWRS changes at once (measured over its first {:.0} s, {} of {works} ManifestWorks changed; time at that rate)",
            r.all_change_s, r.all_change_works
        )
    } else {
        "every MWRS changes at once".to_string()
    };
    line(
        &all_what,
        r.all_change_projected_s(),
        r.bare_scaled(r.bare_update_all_s, r.count),
        "bare update of all",
    );
    line(
        "cold start to every first pass",
        r.cold_start_s,
        r.list_works_s,
        "bench client lists them",
    );
}

/// Idle work, memory, CPU per ManifestWork, queue delay and Lease renewals.
fn print_costs(r: &ManyRow) {
    println!(
        "idle: {:.1} reconciles/min, {:.1} writes/min; one change wrote {} ManifestWorks of other MWRS",
        r.idle_reconciles_per_min, r.idle_writes_per_min, r.one_change_other_writes
    );
    println!(
        "RSS: steady {:.1} MiB ({:.1} MiB at half), {:.0} B per ManifestWork; peaks: create {:.1} MiB, {} at once {:.1} MiB, all at once {:.1} MiB ({:.2}× steady), start-up {:.1} MiB ({:.2}×, ready in {:.1} s, {} writes)",
        mib(r.steady_rss_bytes),
        mib(r.half_steady_rss_bytes),
        r.slope(),
        mib(r.create_peak_rss_bytes),
        r.ten,
        mib(r.ten_peak_rss_bytes),
        mib(r.all_peak_rss_bytes),
        r.ratio_to_steady(r.all_peak_rss_bytes),
        mib(r.startup_peak_rss_bytes),
        r.ratio_to_steady(r.startup_peak_rss_bytes),
        r.restart_ready_s,
        r.restart_writes,
    );
    let per_work = |cpu: &Split, works: usize| {
        let ms = |secs: f64| 1000.0 * secs / works.max(1) as f64;
        format!(
            "hub {:.1} ms, controller {:.2} ms, harness {:.2} ms",
            ms(cpu.hub),
            ms(cpu.controller),
            ms(cpu.harness)
        )
    };
    println!(
        "CPU per ManifestWork changed: bare update of all, {}; {} MWRS at once, {}; every MWRS at once{}, {}",
        per_work(&r.bare_update_all_cpu, r.bare_sample * r.clusters),
        r.ten,
        per_work(&r.ten_cpu, r.ten * r.clusters),
        r.all_change_span(),
        per_work(&r.all_cpu, r.all_change_works)
    );
    println!(
        "queue delay while every MWRS changed{}: p50 {:.2} s, p99 {:.2} s over {} passes",
        r.all_change_span(),
        r.queue_delay_p50_s,
        r.queue_delay_p99_s,
        r.queue_delay_passes
    );
    println!(
        "Lease: {} renewal gaps, p50 {:.2} s, p99 {:.2} s, largest {:.2} s (due every 2 s; the lease lasts 15 s)",
        r.lease_gaps, r.lease_gap_p50_s, r.lease_gap_p99_s, r.lease_gap_max_s
    );
}

/// The failover, the hub's own memory and the controller's requests.
fn print_failover_and_hub(r: &ManyRow) {
    let f = &r.failover;
    println!(
        "failover: leader killed with {} ManifestWorks left; the standby's first write {:.1} s after, the last {:.1} s after; it wrote {} ({} repeated); its peak {:.1} MiB",
        f.left_at_kill,
        f.kill_to_first_write_s,
        f.kill_to_done_s,
        f.standby_writes,
        f.repeated_writes,
        mib(f.standby_peak_rss_bytes)
    );
    println!(
        "hub (kube-apiserver + etcd, one process): {:.0} MiB with every MWRS ({:.0} anonymous, {:.0} file-backed), peak {:.0} MiB",
        mib(r.hub_rss_bytes),
        mib(r.hub_rss_anon_bytes),
        mib(r.hub_rss_file_bytes),
        mib(r.hub_peak_rss_bytes)
    );
    println!(
        "hub's live Go heap: {:.0} MiB with half the MWRS, {:.0} MiB with all: {:.0} B per ManifestWork",
        mib(r.hub_half_heap_bytes),
        mib(r.hub_heap_bytes),
        r.hub_slope()
    );
    println!(
        "controller's requests: creating {} ({} creates refused as existing); every MWRS changing{} {} ({} updates refused by their resourceVersion guard)",
        verbs_text(&r.create_requests),
        r.create_refused,
        r.all_change_span(),
        verbs_text(&r.all_change_requests),
        r.all_change_conflicts
    );
}

/// The targets and whether each was met.
fn print_targets(r: &ManyRow) {
    println!("\n| target | figure | met |\n|---|---|---|");
    for (what, figure, met) in r.targets() {
        println!(
            "| {what} | {figure} | {} |",
            match met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "not reached",
            }
        );
    }
}

pub fn json(r: &ManyRow) -> Value {
    let verbs = |v: &[(String, f64)]| -> Value {
        v.iter()
            .map(|(verb, rate)| (verb.clone(), json!(rate)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let f = &r.failover;
    let mut out = json!({
        "mwrs": r.count, "clusters": r.clusters, "manifestworks": r.works(),
        "bare_sample_names": r.bare_sample,
        "bare_create_s": r.bare_create_s, "bare_update_all_s": r.bare_update_all_s,
        "bare_update_one_s": r.bare_update_one_s,
        "bare_update_one_beside_s": r.bare_update_one_beside_s, "create_s": r.create_s,
        "half_steady_rss_bytes": r.half_steady_rss_bytes, "steady_rss_bytes": r.steady_rss_bytes,
        "rss_bytes_per_manifestwork": r.slope(),
        "create_peak_rss_bytes": r.create_peak_rss_bytes,
        "idle_reconciles_per_min": r.idle_reconciles_per_min,
        "idle_writes_per_min": r.idle_writes_per_min,
        "one_change_s": r.one_change_s, "one_change_other_writes": r.one_change_other_writes,
        "one_change_ratio": r.fanout_ratio(),
        "one_change_rounds": r.one_rounds.iter().map(round_json).collect::<Vec<_>>(),
        "one_abort_s": r.one_abort_s,
        "ten": r.ten, "ten_change_s": r.ten_change_s, "ten_peak_rss_bytes": r.ten_peak_rss_bytes,
        "all_change_s": r.all_change_s, "all_change_works": r.all_change_works,
        "all_change_projected_s": r.all_change_projected_s(),
        "all_peak_rss_bytes": r.all_peak_rss_bytes,
        "queue_delay_p50_s": r.queue_delay_p50_s, "queue_delay_p99_s": r.queue_delay_p99_s,
        "queue_delay_passes": r.queue_delay_passes,
        "create_requests_per_s": verbs(&r.create_requests),
        "create_refused": r.create_refused, "all_change_conflicts": r.all_change_conflicts,
        "all_change_requests_per_s": verbs(&r.all_change_requests),
        "cold_start_s": r.cold_start_s, "restart_ready_s": r.restart_ready_s,
        "list_works_s": r.list_works_s, "startup_peak_rss_bytes": r.startup_peak_rss_bytes,
        "restart_writes": r.restart_writes,
    });
    let more = json!({
        "failover_left_at_kill": f.left_at_kill,
        "failover_kill_to_first_write_s": f.kill_to_first_write_s,
        "failover_kill_to_done_s": f.kill_to_done_s,
        "failover_standby_writes": f.standby_writes,
        "failover_repeated_writes": f.repeated_writes,
        "failover_standby_peak_rss_bytes": f.standby_peak_rss_bytes,
        "lease_gaps": r.lease_gaps, "lease_gap_p50_s": r.lease_gap_p50_s,
        "lease_gap_p99_s": r.lease_gap_p99_s, "lease_gap_max_s": r.lease_gap_max_s,
        "hub_rss_bytes": r.hub_rss_bytes, "hub_rss_anon_bytes": r.hub_rss_anon_bytes,
        "hub_rss_file_bytes": r.hub_rss_file_bytes, "hub_peak_rss_bytes": r.hub_peak_rss_bytes,
        "hub_half_heap_bytes": r.hub_half_heap_bytes, "hub_heap_bytes": r.hub_heap_bytes,
        "hub_heap_bytes_per_manifestwork": r.hub_slope(),
        "bare_update_all_cpu_s": cpu_json(&r.bare_update_all_cpu),
        "ten_cpu_s": cpu_json(&r.ten_cpu), "all_cpu_s": cpu_json(&r.all_cpu),
        "targets": r.targets().into_iter().map(|(what, figure, met)| {
            json!({"target": what, "figure": figure, "met": met})
        }).collect::<Vec<_>>(),
    });
    // Two objects: one would pass serde_json's macro recursion limit.
    if let (Some(o), Value::Object(m)) = (out.as_object_mut(), more) {
        o.extend(m);
    }
    out
}

fn cpu_json(cpu: &Split) -> Value {
    json!({"hub": cpu.hub, "controller": cpu.controller, "harness": cpu.harness})
}

fn round_json(r: &OneRound) -> Value {
    let side = |m: &super::one::Moved| {
        let h = &m.hub;
        json!({
            "s": m.s, "first_s": m.first_s, "cpu_s": cpu_json(&m.cpu),
            "hub": {
                "work_writes": h.work_writes, "work_status_writes": h.work_status_writes,
                "mwrs_writes": h.mwrs_writes, "work_watch_events": h.work_watch_events,
                "work_watch_bytes": h.work_watch_bytes,
            },
        })
    };
    json!({"bare": side(&r.bare), "change": side(&r.change), "ratio": r.ratio()})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run stopped after the one change: what it measured is judged, the phases after
    /// it are "not reached", not met on a figure of 0.
    #[test]
    fn a_stopped_run_judges_only_what_it_reached() {
        let row = ManyRow {
            count: 10,
            clusters: 3_000,
            half_steady_rss_bytes: 30 << 20,
            steady_rss_bytes: 57 << 20,
            bare_update_one_s: 15.0,
            one_change_s: 21.0,
            ..ManyRow::default()
        };
        let verdicts: Vec<_> = row
            .targets()
            .into_iter()
            .map(|(what, _, met)| (what, met))
            .collect();
        let verdict = |prefix: &str| {
            verdicts
                .iter()
                .find(|(what, _)| what.starts_with(prefix))
                .map(|(_, met)| *met)
        };
        assert_eq!(verdict("steady"), Some(Some(true)));
        assert_eq!(verdict("one MWRS's fan-out"), Some(Some(false)));
        // Judged against the bare update beside the controller when the run made one.
        let beside = ManyRow {
            bare_update_one_beside_s: 20.0,
            ..row.clone()
        };
        let fanout = beside
            .targets()
            .into_iter()
            .find(|(what, _, _)| what.starts_with("one MWRS's fan-out"))
            .map(|(_, figure, met)| (figure, met));
        assert_eq!(fanout, Some(("1.05×".to_string(), Some(true))));
        for unreached in [
            "start-up",
            "peak while",
            "cold start",
            "failover",
            "the standby",
            "Lease",
        ] {
            assert_eq!(verdict(unreached), Some(None), "{unreached}");
        }
        let record = json(&row);
        assert_eq!(record["all_change_projected_s"], 0.0);
        let cold = record["targets"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["target"] == "cold start < 5 min"));
        assert_eq!(cold.map(|t| t["met"].is_null()), Some(true));
    }

    /// With rounds, the fan-out is judged on the median of their ratios, not on one pair
    /// (a round slowed by the hub alone must not decide it either way).
    #[test]
    fn the_fanout_is_the_median_of_the_rounds_ratios() {
        let round = |bare: f64, change: f64| OneRound {
            bare: super::super::one::Moved {
                s: bare,
                ..Default::default()
            },
            change: super::super::one::Moved {
                s: change,
                ..Default::default()
            },
        };
        let row = ManyRow {
            // The medians of each side alone would give 60 / 50 = 1.20×.
            one_rounds: vec![round(50.0, 53.0), round(60.0, 63.0), round(40.0, 60.0)],
            one_change_s: 60.0,
            bare_update_one_beside_s: 50.0,
            ..ManyRow::default()
        };
        let fanout = row
            .targets()
            .into_iter()
            .find(|(what, _, _)| what.starts_with("one MWRS's fan-out"))
            .map(|(_, figure, met)| (figure, met));
        assert_eq!(fanout, Some(("1.06×".to_string(), Some(true))));
        let rounds = &json(&row)["one_change_rounds"];
        assert_eq!(rounds.as_array().map(Vec::len), Some(3));
        assert_eq!(rounds[1]["ratio"], 1.05);
    }

    /// Every MWRS changing at once, measured over a window: its time is projected from
    /// the window's rate, and its peak is judged with the window named.
    #[test]
    fn a_windowed_change_of_every_mwrs_is_projected_at_its_rate() {
        let mut row = ManyRow {
            count: 100,
            clusters: 3_000,
            steady_rss_bytes: 300 << 20,
            all_peak_rss_bytes: 450 << 20,
            all_change_s: 600.0,
            all_change_works: 60_000,
            ..ManyRow::default()
        };
        assert!(row.all_change_windowed());
        assert_eq!(row.all_change_projected_s(), 3_000.0);
        let peak = row
            .targets()
            .into_iter()
            .find(|(what, _, _)| what.starts_with("peak while"));
        assert_eq!(
            peak,
            Some((
                "peak while every MWRS changes ≤ 2× steady",
                "1.50× over its first 600 s".to_string(),
                Some(true)
            ))
        );
        row.all_change_works = 300_000;
        assert!(!row.all_change_windowed());
        assert_eq!(row.all_change_projected_s(), 600.0);
    }
}
