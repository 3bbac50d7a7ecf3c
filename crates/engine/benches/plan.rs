//! One planner pass at 1,000, 10,000 and 100,000 clusters (100 clusters per
//! PlacementDecision, ten decision groups, a realistic three-manifest template, a
//! Progressive rollout half done). Prints the median time per pass and the ratio between
//! sizes: the cost should grow linearly (a ratio near 10 per 10× clusters).
//!
//! Run: `cargo bench -p mwrs-engine --bench plan` (set `PLAN_BENCH_MAX=10000` to skip the
//! largest size).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use mwrs_engine::plan::{Observed, PlanConfig, plan};

use fixture::{Fixture, fixture};

mod fixture;

/// Median pass time of each fixture. The sizes are measured in interleaved rounds (one
/// pass of each per round) so that background load on a shared machine weighs on every
/// size alike and the ratios between sizes compare like with like.
fn median_passes(fixtures: &[Fixture], cfg: &PlanConfig) -> Vec<(Duration, usize)> {
    let observed: Vec<Observed<'_>> = fixtures.iter().map(Fixture::observed).collect();
    // Also the warm-up pass.
    let writes: Vec<usize> = observed
        .iter()
        .zip(fixtures)
        .map(|(o, f)| plan(o, f.now, cfg).works.len())
        .collect();
    let budget = Duration::from_secs(10);
    let started = Instant::now();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); fixtures.len()];
    while samples[0].len() < 5 || (started.elapsed() < budget && samples[0].len() < 500) {
        for ((o, f), s) in observed.iter().zip(fixtures).zip(&mut samples) {
            let t = Instant::now();
            black_box(plan(black_box(o), f.now, cfg));
            s.push(t.elapsed());
        }
    }
    samples
        .into_iter()
        .zip(writes)
        .map(|(mut s, w)| {
            s.sort();
            (s[s.len() / 2], w)
        })
        .collect()
}

fn main() {
    // `cargo bench` passes --bench; under `cargo test --all-targets` this runs as a quick
    // smoke test of the fixture instead of a measurement.
    let measuring = std::env::args().any(|a| a == "--bench");
    let max: usize = std::env::var("PLAN_BENCH_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 100_000 } else { 1_000 });
    let cfg = PlanConfig::default();
    let sizes: Vec<usize> = [1_000usize, 10_000, 100_000]
        .into_iter()
        .filter(|n| *n <= max)
        .collect();
    let fixtures: Vec<Fixture> = sizes.iter().map(|n| fixture(*n)).collect();
    let passes = median_passes(&fixtures, &cfg);
    println!(
        "{:>9} {:>12} {:>12} {:>8} {:>14}",
        "clusters", "per pass", "per cluster", "writes", "ratio vs prev"
    );
    let mut previous: Option<Duration> = None;
    for (n, (t, writes)) in sizes.into_iter().zip(passes) {
        let ratio = previous.map(|p| t.as_secs_f64() / p.as_secs_f64());
        println!(
            "{n:>9} {:>10.2}ms {:>10.2}µs {writes:>8} {:>14}",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e6 / n as f64,
            ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
        );
        previous = Some(t);
    }
}
