//! The soak's user: each round takes one action on one of its two MWRS (a good rollout,
//! a bad one that must abort, a template changed mid-rollout, a history limit, an undo,
//! a retry after a fix) and waits, within a bound, for the state the rules predict.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use mwrs_api::work::ManifestWork;
use serde_json::{Value, json};

use super::log::{Seen, now_ms};
use super::rng::Rng;
use super::watch::SharedLog;
use super::{NS, PLUGIN, PluginFaults, SoakArgs};

/// The version a template (or a ManifestWork's spec) carries in its ConfigMap.
pub fn version_of(spec: &Value) -> Option<String> {
    spec["workload"]["manifests"][0]["data"]["version"]
        .as_str()
        .map(String::from)
}

/// Does the status say every cluster is back, each revert done (a plugin's included: the
/// controller records its verdicts until then)?
fn reverted(s: &ManifestWorkReplicaSetStatus) -> bool {
    let conditions = s.conditions.as_deref().unwrap_or_default();
    let progressing = conditions
        .iter()
        .find(|c| c.type_ == mwrs_api::mwrs::condition::PROGRESSING);
    progressing.is_some_and(|c| {
        c.reason == mwrs_api::mwrs::condition::REASON_ROLLOUT_ABORTED
            && c.message.starts_with("rolled back to revision ")
    })
}

/// One of the soak's MWRS.
struct Subject {
    name: &'static str,
    /// Judged by the plugin (its rollouts may fail by the plugin's failure budget when
    /// the plugin is down).
    plugin: bool,
}

const SUBJECTS: [Subject; 2] = [
    Subject {
        name: "web",
        plugin: true,
    },
    Subject {
        name: "api",
        plugin: false,
    },
];

fn template(subject: &Subject, version: &str) -> Value {
    if subject.plugin {
        crate::plugin::judged_template(version, 0)
    } else {
        crate::fleet_view::template(version)
    }
}

fn strategy(subject: &Subject) -> Value {
    if subject.plugin {
        json!({"type": "Progressive", "failureStrategy": "AbortAll", "plugin": PLUGIN,
            "progressive": {"maxConcurrency": "25%", "progressDeadline": "120s", "maxFailures": 0}})
    } else {
        json!({"type": "ProgressivePerGroup", "failureStrategy": "AbortAll",
            "progressivePerGroup": {"progressDeadline": "120s", "maxFailures": 0}})
    }
}

#[derive(Debug)]
enum Action {
    Rollout,
    BadRollout,
    Midway,
    HistoryLimit(i32),
    /// Back to this revision (a hash).
    Undo(String),
    /// The held revision, after the fleet was fixed for its version.
    Retry(String),
}

#[derive(Debug)]
enum Expect {
    /// Every cluster on this revision, and status says so.
    Complete(String),
    /// This revision aborted and held, every cluster back on the stable one; with
    /// `after`, by an abort at or after that time (milliseconds since the epoch).
    Aborted {
        target: String,
        stable: String,
        after: Option<i64>,
    },
    /// At most this many revisions besides the ones in use.
    Pruned(i32),
}

pub struct Driver {
    client: Client,
    kubeconfig: PathBuf,
    cli: PathBuf,
    clusters: usize,
    log: SharedLog,
    fixed: Arc<Mutex<BTreeSet<String>>>,
    plugin_faults: Arc<PluginFaults>,
    timeout: Duration,
    next_version: u32,
}

impl Driver {
    pub fn new(
        client: Client,
        args: &SoakArgs,
        clusters: usize,
        log: SharedLog,
        fixed: Arc<Mutex<BTreeSet<String>>>,
        plugin_faults: Arc<PluginFaults>,
    ) -> Self {
        Self {
            client,
            kubeconfig: args.kubeconfig.clone(),
            cli: args.cli.clone(),
            clusters,
            log,
            fixed,
            plugin_faults,
            timeout: args.round_timeout,
            next_version: 2,
        }
    }

    fn api(&self) -> Api<ManifestWorkReplicaSet> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates both MWRS on v1 and waits until they are complete (round 0).
    pub async fn create(&mut self) -> anyhow::Result<()> {
        for s in &SUBJECTS {
            let mwrs: ManifestWorkReplicaSet = serde_json::from_value(json!({
                "apiVersion": "work.open-cluster-management.io/v1alpha1",
                "kind": "ManifestWorkReplicaSet",
                "metadata": {"name": s.name, "namespace": NS},
                "spec": {
                    "manifestWorkTemplate": template(s, "v1"),
                    "revisionHistoryLimit": 5,
                    "placementRefs": [{"name": super::PLACEMENT, "rolloutStrategy": strategy(s)}],
                },
            }))?;
            self.api().create(&PostParams::default(), &mwrs).await?;
        }
        for s in &SUBJECTS {
            let target = self.update_revision(s.name).await?;
            let outcome = self.settle(s, &Expect::Complete(target), None).await?;
            anyhow::ensure!(outcome.is_none(), "{} did not start: {outcome:?}", s.name);
        }
        Ok(())
    }

    /// Round `n`: one action on one MWRS, then its settling, both filed in the log.
    pub async fn round(&mut self, n: u32, rng: &mut Rng) -> anyhow::Result<()> {
        let subject = rng.pick(&SUBJECTS);
        let status = self.status(subject.name).await?;
        let action = self.choose(subject, &status, rng).await?;
        self.file(Seen::Action {
            round: n,
            mwrs: subject.name.into(),
            what: format!("{action:?}"),
        });
        let started = Instant::now();
        let since = now_ms();
        let plugin_mark = self.plugin_faults.mark();
        let expect = self.act(subject, &status, &action).await?;
        // A plugin fault may turn a good rollout of the judged MWRS into an abort (its
        // failure budget, rules §12.3); the next rounds go on from there.
        let plugin_abort = match &expect {
            // A new abort: a retry starts from the held revision's own abort, which would
            // count the round settled before the controller acted on the retry (seed 918195:
            // a Retry "settled in 0 s", and its writes fell into the idle window).
            Expect::Complete(target) if subject.plugin => Some(Expect::Aborted {
                target: target.clone(),
                stable: status.current_revision.clone().unwrap_or_default(),
                after: Some(since),
            }),
            _ => None,
        };
        let alternative = plugin_abort.as_ref().map(|e| (e, plugin_mark));
        let outcome = self.settle(subject, &expect, alternative).await?;
        let after = self.status(subject.name).await?;
        let aborted = after
            .last_abort
            .as_ref()
            .is_some_and(|a| a.time.0.as_millisecond() >= since - 1_000);
        eprintln!(
            "soak: round {n}: {} {action:?} → {} in {:.0}s",
            subject.name,
            outcome
                .as_deref()
                .unwrap_or(if aborted { "aborted" } else { "settled" }),
            started.elapsed().as_secs_f64()
        );
        self.file(Seen::Settled {
            round: n,
            mwrs: subject.name.into(),
            aborted,
            outcome,
        });
        Ok(())
    }

    /// Has every revert of an abort been done, its plugin's validations included? Until
    /// then the controller still records the plugin's verdicts: no window is idle yet.
    pub async fn reverts_done(&self) -> anyhow::Result<bool> {
        for s in &SUBJECTS {
            let status = self.status(s.name).await?;
            if status.update_aborted() && !reverted(&status) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn file(&self, seen: Seen) {
        if let Ok(mut l) = self.log.lock() {
            l.push(now_ms(), seen);
        }
    }

    async fn choose(
        &mut self,
        subject: &Subject,
        status: &ManifestWorkReplicaSetStatus,
        rng: &mut Rng,
    ) -> anyhow::Result<Action> {
        if status.update_aborted()
            && let Some(held) = status.update_revision.clone()
            && rng.below(2) == 0
        {
            return Ok(Action::Retry(held));
        }
        let undo_to = self.undo_candidates(subject.name, status).await?;
        Ok(match rng.below(10) {
            0..=3 => Action::Rollout,
            4..=5 => Action::BadRollout,
            6 => Action::Midway,
            7 => Action::HistoryLimit(rng.below(5) as i32),
            _ if !undo_to.is_empty() => Action::Undo(rng.pick(&undo_to).clone()),
            _ => Action::Rollout,
        })
    }

    /// Revisions of good templates other than the ones in use.
    async fn undo_candidates(
        &self,
        name: &str,
        status: &ManifestWorkReplicaSetStatus,
    ) -> anyhow::Result<Vec<String>> {
        let in_use = [&status.current_revision, &status.update_revision];
        Ok(self
            .revisions(name)
            .await?
            .into_iter()
            .filter(|(hash, version)| {
                !in_use.iter().any(|r| r.as_deref() == Some(hash.as_str())) && !self.is_bad(version)
            })
            .map(|(hash, _)| hash)
            .collect())
    }

    fn is_bad(&self, version: &str) -> bool {
        version.contains("-bad") && !self.fixed.lock().is_ok_and(|f| f.contains(version))
    }

    /// The MWRS's revisions as (hash, version).
    async fn revisions(&self, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), NS);
        Ok(api
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|r| r.owner_references().iter().any(|o| o.name == name))
            .filter_map(|r| {
                let hash = r.labels().get(labels::CONTROLLER_HASH)?.clone();
                let version = version_of(&r.data.as_ref()?.0)?;
                Some((hash, version))
            })
            .collect())
    }

    fn version(&mut self, bad: bool) -> String {
        let v = self.next_version;
        self.next_version += 1;
        if bad {
            format!("v{v}-bad")
        } else {
            format!("v{v}")
        }
    }

    async fn act(
        &mut self,
        subject: &Subject,
        status: &ManifestWorkReplicaSetStatus,
        action: &Action,
    ) -> anyhow::Result<Expect> {
        let name = subject.name;
        let stable = status.current_revision.clone().unwrap_or_default();
        Ok(match action {
            Action::Rollout => {
                let v = self.version(false);
                Expect::Complete(self.set_template(subject, &v).await?)
            }
            Action::BadRollout => {
                let v = self.version(true);
                let target = self.set_template(subject, &v).await?;
                Expect::Aborted {
                    target,
                    stable,
                    after: None,
                }
            }
            Action::Midway => {
                let v = self.version(false);
                let first = self.set_template(subject, &v).await?;
                self.wait_some_on(name, &first).await?;
                let v = self.version(false);
                Expect::Complete(self.set_template(subject, &v).await?)
            }
            Action::HistoryLimit(k) => {
                let body = json!({"spec": {"revisionHistoryLimit": k}});
                self.api()
                    .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                    .await?;
                Expect::Pruned(*k)
            }
            Action::Undo(hash) => {
                self.cli(&["rollout", "undo", name, "--to-revision", hash.as_str()])?;
                Expect::Complete(hash.clone())
            }
            Action::Retry(hash) => {
                let fixed = self
                    .revisions(name)
                    .await?
                    .into_iter()
                    .find(|(h, _)| h == hash)
                    .map(|(_, v)| v);
                if let (Some(v), Ok(mut f)) = (fixed, self.fixed.lock()) {
                    f.insert(v);
                }
                self.cli(&["rollout", "retry", name])?;
                Expect::Complete(hash.clone())
            }
        })
    }

    fn cli(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = std::process::Command::new(&self.cli)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", NS])
            .args(args)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "mwrs {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }

    /// Sets the template to `version`; the revision it makes.
    async fn set_template(&self, subject: &Subject, version: &str) -> anyhow::Result<String> {
        let body = json!({"spec": {"manifestWorkTemplate": template(subject, version)}});
        self.api()
            .patch(subject.name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
        self.update_revision(subject.name).await
    }

    /// The update revision once status has caught up with the spec.
    async fn update_revision(&self, name: &str) -> anyhow::Result<String> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let m = self.api().get(name).await;
            if let Ok(m) = m
                && let Some(s) = &m.status
                && s.observed_generation == m.metadata.generation
                && let Some(update) = &s.update_revision
            {
                return Ok(update.clone());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{name}: status never caught up with its spec"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn status(&self, name: &str) -> anyhow::Result<ManifestWorkReplicaSetStatus> {
        Ok(self.api().get(name).await?.status.unwrap_or_default())
    }

    /// The revisions of `name`'s ManifestWorks, one per cluster.
    async fn work_revisions(&self, name: &str) -> anyhow::Result<Vec<Option<String>>> {
        let api: Api<ManifestWork> = Api::all(self.client.clone());
        let selector = format!("{}={NS}.{name}", labels::MWRS_OWNER);
        Ok(api
            .list_metadata(&ListParams::default().labels(&selector))
            .await?
            .into_iter()
            .map(|w| w.labels().get(labels::CONTROLLER_HASH).cloned())
            .collect())
    }

    async fn wait_some_on(&self, name: &str, hash: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let on = self.work_revisions(name).await.unwrap_or_default();
            if on.iter().any(|r| r.as_deref() == Some(hash)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(())
    }

    /// Waits for `expect`, or for `alternative` once a plugin fault has been injected since
    /// its mark; None when one holds within the bound, else what was seen.
    async fn settle(
        &self,
        subject: &Subject,
        expect: &Expect,
        alternative: Option<(&Expect, u64)>,
    ) -> anyhow::Result<Option<String>> {
        let deadline = Instant::now() + self.timeout;
        let mut seen = String::new();
        while Instant::now() < deadline {
            match self.holds(subject.name, expect).await {
                Ok(None) => return Ok(None),
                Ok(Some(why)) => seen = why,
                // The hub may be stalled or restarting: ask again.
                Err(e) => seen = format!("{e:#}"),
            }
            if let Some((alt, mark)) = alternative
                && self.plugin_faults.since(mark)
                && let Ok(None) = self.holds(subject.name, alt).await
            {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        Ok(Some(format!(
            "not {expect:?} after {}s: {seen}",
            self.timeout.as_secs()
        )))
    }

    /// None when `expect` holds, else what differs.
    async fn holds(&self, name: &str, expect: &Expect) -> anyhow::Result<Option<String>> {
        let s = self.status(name).await?;
        let works = self.work_revisions(name).await?;
        let all_on = |hash: &str| {
            works.len() == self.clusters && works.iter().all(|r| r.as_deref() == Some(hash))
        };
        let on = |hash: &str| works.iter().filter(|r| r.as_deref() == Some(hash)).count();
        Ok(match expect {
            Expect::Complete(h) => {
                let done = s.current_revision.as_ref() == Some(h)
                    && s.update_revision.as_ref() == Some(h)
                    && all_on(h);
                (!done).then(|| {
                    format!(
                        "current {:?}, update {:?}, {} of {} ManifestWorks on {h}",
                        s.current_revision,
                        s.update_revision,
                        on(h),
                        works.len()
                    )
                })
            }
            Expect::Aborted {
                target,
                stable,
                after,
            } => {
                // Condition times are whole seconds.
                let new = |t: i64| after.is_none_or(|after| t >= after - 1_000);
                let done = s.update_aborted()
                    && (s.last_abort.as_ref())
                        .is_some_and(|a| &a.revision == target && new(a.time.0.as_millisecond()))
                    && s.current_revision.as_ref() == Some(stable)
                    && all_on(stable);
                (!done).then(|| {
                    format!(
                        "aborted {}, last abort {:?}, current {:?}, {} of {} ManifestWorks on {stable}",
                        s.update_aborted(),
                        s.last_abort.as_ref().map(|a| &a.revision),
                        s.current_revision,
                        on(stable),
                        works.len()
                    )
                })
            }
            Expect::Pruned(k) => {
                let n = self.revisions(name).await?.len();
                let in_use: BTreeSet<&String> = [&s.current_revision, &s.update_revision]
                    .into_iter()
                    .flatten()
                    .collect();
                let most = *k as usize + in_use.len();
                (n > most).then(|| format!("{n} revisions, at most {most} expected"))
            }
        })
    }
}
