//! The leader's Lease renewals as the hub saw them: a watch records every `renewTime` the
//! controller writes, so that a phase can report the gaps between renewals while it ran
//! (issue #34: a fan-out must not starve the renewals; the Lease expires 15 s after the
//! last one, and a renewal is due every 2 s).

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::watcher;
use kube::{Api, Client};
use mwrs_testsupport::{TaskGuard, watch_objects};

/// The controller's Lease name.
const LEASE: &str = "mwrs-controller";

/// A renewal: the Lease's holder and its renewTime.
type Renewal = (Option<String>, Timestamp);

/// Every renewal seen (its holder and time), in order, while the watch (dropped with it)
/// runs.
pub struct Renewals {
    seen: Arc<Mutex<Vec<Renewal>>>,
    _watch: TaskGuard,
}

impl Renewals {
    /// Watches the Lease in `namespace` until dropped.
    pub async fn watch(client: &Client, namespace: &str) -> Self {
        let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
        let seen: Arc<Mutex<Vec<Renewal>>> = Arc::default();
        let s = seen.clone();
        let config = watcher::Config::default().fields(&format!("metadata.name={LEASE}"));
        let watch = watch_objects(api, config, move |l: Lease, _| {
            let Some(spec) = l.spec else { return };
            let Some(t) = spec.renew_time.map(|t| t.0) else {
                return;
            };
            if let Ok(mut v) = s.lock()
                && v.last().map(|(_, last)| last) != Some(&t)
            {
                v.push((spec.holder_identity, t));
            }
        })
        .await;
        Self {
            seen,
            _watch: watch,
        }
    }

    /// The gaps, in seconds, between consecutive renewals by the same holder that bound
    /// a moment of `from..to` (the one before `from` to the first after it, and so on to
    /// the first after `to`). A change of holder is a takeover, not a late renewal.
    pub fn gaps(&self, from: Timestamp, to: Timestamp) -> Vec<f64> {
        let seen = self.seen.lock().map(|v| v.clone()).unwrap_or_default();
        seen.windows(2)
            .filter(|w| w[0].0 == w[1].0 && w[1].1 >= from && w[0].1 <= to)
            .map(|w| (w[1].1 - w[0].1).total(jiff::Unit::Second).unwrap_or(0.0))
            .collect()
    }
}

/// The median and the largest of `gaps` (None when there are none).
pub fn summary(gaps: &[f64]) -> Option<(f64, f64)> {
    if gaps.is_empty() {
        return None;
    }
    let mut v = gaps.to_vec();
    v.sort_by(f64::total_cmp);
    Some((v[v.len() / 2], v[v.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_and_the_largest_gap() {
        assert_eq!(summary(&[]), None);
        assert_eq!(summary(&[5.0, 9.5, 5.1]), Some((5.1, 9.5)));
    }
}
