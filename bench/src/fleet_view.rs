//! The bench's one watch over every ManifestWork on the hub, and what it tells. A
//! ManifestWork carries version v when its first manifest's `data.version` is v (as
//! [`template`] writes it), so the same check serves the controller, the peer and the bare
//! client. [`Tracker`] keeps, for every ManifestWork, the version it carries, the count per
//! version and how many of those their agent has answered (done at their generation:
//! Available and not Progressing), and when each answer came,
//! when a ManifestWork on a version first reported Degraded at its generation, and when one
//! was first seen moving to a version; [`Tracker::until`] waits on those.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch_fn};
use kube::{Client, ResourceExt};
use mwrs_api::work::ManifestWork;
use serde_json::{Value, json};

/// A realistic template: a ConfigMap carrying the version, a Deployment and a Service.
pub(crate) fn template(version: &str) -> Value {
    json!({"workload": {"manifests": [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "web-config", "namespace": "web"},
         "data": {"version": version, "settings.yaml": "replicas: 3\nlogLevel: info\nfeatures:\n  - a\n  - b\n"}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "web", "namespace": "web", "labels": {"app": "web"}},
         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
             "name": "web", "image": format!("registry.example.com/web:{version}"),
             "ports": [{"containerPort": 8080}],
             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": "web"},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    ]}})
}

fn version_of(mw: &ManifestWork) -> Option<String> {
    mw.spec
        .to_value()
        .pointer("/workload/manifests/0/data/version")
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) works: HashMap<(String, String), Option<String>>,
    counts: HashMap<String, usize>,
    /// First time a ManifestWork on this version reported Degraded at its generation.
    pub(crate) first_degraded: HashMap<String, Instant>,
    /// First time a ManifestWork was seen moving to this version (since last cleared).
    pub(crate) first_moved_to: HashMap<String, Instant>,
    /// ManifestWorks whose agent reported them Available at their generation, by the
    /// version they carry; and which those are.
    answered: HashMap<String, usize>,
    answered_keys: HashSet<(String, String)>,
    /// When each answered ManifestWork's answer was first seen.
    answered_at: HashMap<(String, String), Instant>,
}

impl Seen {
    fn set(&mut self, key: (String, String), version: Option<String>, done: bool, now: Instant) {
        // An answer seen again on the same version keeps the time it was first seen.
        let first_answer = self
            .answered_at
            .get(&key)
            .copied()
            .filter(|_| self.works.get(&key) == Some(&version));
        self.unanswer(&key);
        if let Some(Some(old)) = self.works.get(&key)
            && let Some(c) = self.counts.get_mut(old)
        {
            *c -= 1;
            if let Some(v) = version.as_ref().filter(|v| *v != old) {
                self.first_moved_to.entry(v.clone()).or_insert(now);
            }
        }
        if let Some(v) = &version {
            *self.counts.entry(v.clone()).or_default() += 1;
            if done {
                *self.answered.entry(v.clone()).or_default() += 1;
                self.answered_keys.insert(key.clone());
                self.answered_at
                    .insert(key.clone(), first_answer.unwrap_or(now));
            }
        }
        self.works.insert(key, version);
    }

    /// Forgets that `key` was answered (before it changes or goes).
    fn unanswer(&mut self, key: &(String, String)) {
        self.answered_at.remove(key);
        if self.answered_keys.remove(key)
            && let Some(Some(v)) = self.works.get(key)
            && let Some(c) = self.answered.get_mut(v)
        {
            *c -= 1;
        }
    }

    fn remove(&mut self, key: &(String, String)) {
        self.unanswer(key);
        if let Some(Some(old)) = self.works.remove(key)
            && let Some(c) = self.counts.get_mut(&old)
        {
            *c -= 1;
        }
    }

    pub(crate) fn count(&self, version: &str) -> usize {
        self.counts.get(version).copied().unwrap_or(0)
    }

    /// ManifestWorks on `version` their agent reported Available at their generation.
    pub(crate) fn answered(&self, version: &str) -> usize {
        self.answered.get(version).copied().unwrap_or(0)
    }

    /// For each ManifestWork answered on `version`, how long after `from` its answer was
    /// seen (0 for one seen before), in seconds.
    pub(crate) fn answer_delays(&self, version: &str, from: Instant) -> Vec<f64> {
        self.answered_keys
            .iter()
            .filter(|k| {
                self.works
                    .get(*k)
                    .is_some_and(|v| v.as_deref() == Some(version))
            })
            .filter_map(|k| self.answered_at.get(k))
            .map(|at| at.saturating_duration_since(from).as_secs_f64())
            .collect()
    }
}

#[derive(Clone)]
pub(crate) struct Tracker {
    pub(crate) seen: Arc<Mutex<Seen>>,
    changed: tokio::sync::watch::Receiver<u64>,
}

fn degraded(mw: &ManifestWork) -> bool {
    mw.reports("Degraded", "True")
}

/// Has its agent reported it done at its generation: Available, and no longer
/// Progressing (an agent with condition rules reports Available while it progresses)?
fn done(mw: &ManifestWork) -> bool {
    mw.reports("Available", "True") && !mw.reports("Progressing", "True")
}

impl Tracker {
    /// ManifestWorks seen carrying `version` now (0 once the tracker has panicked).
    pub(crate) fn count(&self, version: &str) -> usize {
        self.seen.lock().map_or(0, |s| s.count(version))
    }

    pub(crate) async fn start(client: Client) -> anyhow::Result<Self> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        let api: Api<ManifestWork> = Api::all(client);
        let s = seen.clone();
        let (synced_tx, synced) = tokio::sync::oneshot::channel::<()>();
        let mut ready_tx = Some(synced_tx);
        tokio::spawn(async move {
            let mut events = watch_fn(api, watcher::Config::default().any_semantic())
                .default_backoff()
                .boxed();
            let mut seq = 0u64;
            while let Some(ev) = events.next().await {
                let Ok(ev) = ev else { continue };
                let now = Instant::now();
                {
                    let Ok(mut st) = s.lock() else { return };
                    match ev {
                        Event::Apply(mw) | Event::InitApply(mw) => {
                            let key = (mw.namespace().unwrap_or_default(), mw.name_any());
                            let v = version_of(&mw);
                            if degraded(&mw)
                                && let Some(v) = &v
                            {
                                st.first_degraded.entry(v.clone()).or_insert(now);
                            }
                            st.set(key, v, done(&mw), now);
                        }
                        Event::Delete(mw) => {
                            st.remove(&(mw.namespace().unwrap_or_default(), mw.name_any()));
                        }
                        Event::InitDone => {
                            if let Some(t) = ready_tx.take() {
                                let _ = t.send(());
                            }
                        }
                        Event::Init => {}
                    }
                }
                seq += 1;
                let _ = tx.send(seq);
            }
        });
        tokio::time::timeout(Duration::from_secs(120), synced)
            .await
            .context("ManifestWork watch did not sync")??;
        Ok(Tracker { seen, changed: rx })
    }

    /// Waits until `pred` holds; returns when it was first seen to hold.
    pub(crate) async fn until(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Seen) -> bool,
    ) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + timeout;
        let mut rx = self.changed.clone();
        loop {
            {
                let st = self.seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                if pred(&st) {
                    return Ok(Instant::now());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let st = self.seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                bail!(
                    "timed out waiting for {what}; works {} by version {:?}",
                    st.works.len(),
                    st.counts
                );
            }
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), rx.changed()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cluster: &str) -> (String, String) {
        (cluster.to_string(), "app".to_string())
    }

    /// A ManifestWork counts as answered on the version it carries, until it moves on.
    #[test]
    fn answers_are_counted_per_version_until_the_work_moves_on() {
        let mut seen = Seen::default();
        let now = Instant::now();
        let v = |s: &str| Some(s.to_string());
        seen.set(key("c1"), v("v1"), true, now);
        seen.set(key("c2"), v("v1"), false, now);
        assert_eq!((seen.count("v1"), seen.answered("v1")), (2, 1));
        seen.set(key("c2"), v("v1"), true, now);
        seen.set(key("c2"), v("v1"), true, now);
        assert_eq!(seen.answered("v1"), 2, "an answer seen again counts once");
        seen.set(key("c1"), v("v2"), false, now);
        assert_eq!((seen.answered("v1"), seen.answered("v2")), (1, 0));
        seen.set(key("c1"), v("v2"), true, now);
        seen.remove(&key("c2"));
        assert_eq!((seen.answered("v1"), seen.answered("v2")), (0, 1));
        assert_eq!((seen.count("v1"), seen.count("v2")), (0, 1));
    }

    #[test]
    fn an_answer_is_timed_when_first_seen_on_its_version() {
        let mut seen = Seen::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let v = |s: &str| Some(s.to_string());
        seen.set(key("c1"), v("v1"), false, at(1));
        seen.set(key("c1"), v("v1"), true, at(3));
        seen.set(key("c1"), v("v1"), true, at(9));
        seen.set(key("c2"), v("v1"), true, at(5));
        seen.set(key("c3"), v("v2"), true, at(6));
        let mut delays = seen.answer_delays("v1", at(2));
        delays.sort_by(f64::total_cmp);
        assert_eq!(delays, [1.0, 3.0]);
        seen.set(key("c1"), v("v2"), true, at(10));
        assert_eq!(seen.answer_delays("v1", at(2)), [3.0]);
        let mut v2 = seen.answer_delays("v2", at(0));
        v2.sort_by(f64::total_cmp);
        assert_eq!(v2, [6.0, 10.0]);
    }
}
