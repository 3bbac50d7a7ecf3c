//! What the bench derives from samples: quantiles of a list, quantiles of a Prometheus
//! histogram between two scrapes, requests per verb between two scrapes, and the memory
//! fields of a process tree (and the reset of its peak, so a phase has a peak of its own).

use crate::cpu;

/// The `q` quantile (0..=1) of `values`, nearest rank; None when there are none.
pub(crate) fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// The cumulative buckets `(le, count)` of histogram `name` in Prometheus text.
fn buckets(text: &str, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{le=\"");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (le, count) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, count.trim().parse().ok()?))
        })
        .collect()
}

/// The `q` quantile of what histogram `name` observed between the scrapes `before` and
/// `after`, interpolated linearly inside its bucket (as PromQL's `histogram_quantile`);
/// in the last bucket, its lower bound. With the count observed.
pub(crate) fn histogram_quantile(before: &str, after: &str, name: &str, q: f64) -> (f64, f64) {
    let old = buckets(before, name);
    let new = buckets(after, name);
    let delta: Vec<(f64, f64)> = new
        .iter()
        .map(|&(le, c)| {
            let was = old.iter().find(|(l, _)| *l == le).map_or(0.0, |(_, c)| *c);
            (le, c - was)
        })
        .collect();
    let total = delta.last().map_or(0.0, |(_, c)| *c);
    if total <= 0.0 {
        return (f64::NAN, 0.0);
    }
    let want = q * total;
    let mut below = (0.0, 0.0);
    for &(le, c) in &delta {
        if c >= want {
            if le.is_infinite() {
                return (below.0, total);
            }
            let inside = (c - below.1).max(f64::MIN_POSITIVE);
            return (below.0 + (le - below.0) * (want - below.1) / inside, total);
        }
        below = (le, c);
    }
    (below.0, total)
}

/// Per verb, the requests counter `name` (labelled `verb`) grew between two scrapes,
/// divided by `secs`; the verbs in order, those that did not grow left out.
pub(crate) fn per_verb(before: &str, after: &str, name: &str, secs: f64) -> Vec<(String, f64)> {
    let counts = |text: &str| -> Vec<(String, f64)> {
        let prefix = format!("{name}{{verb=\"");
        text.lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .filter_map(|rest| {
                let (verb, v) = rest.split_once("\"} ")?;
                Some((verb.to_string(), v.trim().parse().ok()?))
            })
            .collect()
    };
    let old = counts(before);
    let mut grown: Vec<(String, f64)> = counts(after)
        .into_iter()
        .map(|(verb, c)| {
            let was = old
                .iter()
                .find(|(v, _)| *v == verb)
                .map_or(0.0, |(_, c)| *c);
            (verb, (c - was) / secs.max(f64::MIN_POSITIVE))
        })
        .filter(|(_, rate)| *rate > 0.0)
        .collect();
    grown.sort_by(|a, b| a.0.cmp(&b.0));
    grown
}

/// `verb 12.3/s, …` for a report line.
pub(crate) fn verbs_text(rates: &[(String, f64)]) -> String {
    if rates.is_empty() {
        return "none".into();
    }
    rates
        .iter()
        .map(|(verb, r)| format!("{verb} {r:.1}/s"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A kB field of `/proc/PID/status` (`VmRSS:`, `VmHWM:`, `RssAnon:`, `RssFile:`), in
/// bytes, summed over the process and its children.
pub(crate) fn tree_status_bytes(pid: u32, field: &str) -> u64 {
    cpu::tree(pid)
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

/// Resets the peak RSS (`VmHWM`) of the process and its children to their RSS now, so
/// that the next read of the peak is the peak since this moment.
pub(crate) fn reset_peak(pid: u32) {
    for p in cpu::tree(pid) {
        // Writing 5 to clear_refs resets the peak resident set size (proc(5)).
        let _ = std::fs::write(format!("/proc/{p}/clear_refs"), "5");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
x_seconds_bucket{le=\"0.1\"} 10
x_seconds_bucket{le=\"0.2\"} 10
x_seconds_bucket{le=\"0.4\"} 10
x_seconds_bucket{le=\"+Inf\"} 10
r_total{verb=\"get\"} 5
";
    const AFTER: &str = "\
x_seconds_bucket{le=\"0.1\"} 60
x_seconds_bucket{le=\"0.2\"} 100
x_seconds_bucket{le=\"0.4\"} 109
x_seconds_bucket{le=\"+Inf\"} 110
r_total{verb=\"get\"} 25
r_total{verb=\"patch\"} 100
";

    #[test]
    fn quantiles_by_nearest_rank() {
        assert_eq!(quantile(&[], 0.5), None);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&v, 1.0), Some(100.0));
        assert_eq!(quantile(&[3.0], 0.99), Some(3.0));
    }

    #[test]
    fn a_histograms_quantile_between_two_scrapes() {
        let name = "x_seconds";
        // 100 observed: 50 up to 0.1, 40 in (0.1, 0.2], 9 in (0.2, 0.4], 1 above.
        let (p50, n) = histogram_quantile(BEFORE, AFTER, name, 0.5);
        assert_eq!(n, 100.0);
        assert!((p50 - 0.1).abs() < 1e-9, "{p50}");
        let (p90, _) = histogram_quantile(BEFORE, AFTER, name, 0.9);
        assert!((p90 - 0.2).abs() < 1e-9, "{p90}");
        let (p95, _) = histogram_quantile(BEFORE, AFTER, name, 0.95);
        assert!((p95 - (0.2 + 0.2 * 5.0 / 9.0)).abs() < 1e-9, "{p95}");
        // In the +Inf bucket: its lower bound.
        assert_eq!(histogram_quantile(BEFORE, AFTER, name, 1.0).0, 0.4);
        assert!(histogram_quantile(AFTER, AFTER, name, 0.5).0.is_nan());
    }

    #[test]
    fn requests_per_verb_between_two_scrapes() {
        let rates = per_verb(BEFORE, AFTER, "r_total", 10.0);
        assert_eq!(rates, vec![("get".into(), 2.0), ("patch".into(), 10.0)]);
        assert_eq!(verbs_text(&rates), "get 2.0/s, patch 10.0/s");
        assert_eq!(verbs_text(&[]), "none");
    }
}
