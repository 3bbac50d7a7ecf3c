//! Rollout plugins at the edge (issue #18): a client per plugin `--work-config`
//! registers, whether each one answers, and the verdicts they gave, per MWRS. A pass
//! plans on a copy of what is known ([`Plugins::inputs`]) and says whom to ask
//! ([`mwrs_engine::Plan::validations`]); [`Plugins::ask_in_background`] asks in a task
//! of its own (a slow plugin holds no reconcile) and records the answers for the next
//! pass, which an answer that changes something brings at once. Nothing here decides a
//! rollout.
//!
//! Any error answer (or none within the time bound) marks the plugin unreachable: its
//! clusters are held until an `Initialize` succeeds again ([`Plugins::probe`]). Final
//! verdicts outlive a restart on the ManifestWorks (the planner writes them there); an
//! IN_PROGRESS one is asked again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use jiff::{SignedDuration, Timestamp};
use kube::runtime::reflector::ObjectRef;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::plugin::{ClusterVerdict, PluginHealth, PluginInputs, Validation, Verdict};
use mwrs_plugin::client::{PluginClient, SetupError};
use mwrs_plugin::config::WorkConfig;
use mwrs_plugin::v1alpha1 as api;

use crate::watch::GuardedMwrs;

/// Questions in flight at once within one pass.
const ASK_CONCURRENCY: usize = 16;

/// How often a cluster still Validating is asked again, and an unreachable plugin probed.
pub const DEFAULT_POLL: Duration = Duration::from_secs(10);

/// What one MWRS's plugins said.
#[derive(Default)]
struct Judged {
    verdicts: BTreeMap<Arc<str>, ClusterVerdict>,
    asked: BTreeMap<Arc<str>, Timestamp>,
}

/// Every registered plugin and what it said.
pub struct Plugins {
    clients: BTreeMap<String, PluginClient>,
    health: RwLock<BTreeMap<String, PluginHealth>>,
    /// By MWRS (`namespace/name`).
    judged: Mutex<HashMap<String, Judged>>,
    /// Where answers that change something are announced ([`Plugins::answers_to`]).
    news: Mutex<Option<UnboundedSender<ObjectRef<GuardedMwrs>>>>,
    poll: Duration,
    controller_version: String,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("plugins", &self.clients.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Plugins {
    /// No plugin registered.
    fn default() -> Self {
        Self {
            clients: BTreeMap::new(),
            health: RwLock::default(),
            judged: Mutex::default(),
            news: Mutex::default(),
            poll: DEFAULT_POLL,
            controller_version: String::new(),
        }
    }
}

impl Plugins {
    /// The plugins `config` registers, each unreachable until its first `Initialize`.
    pub fn new(
        config: &WorkConfig,
        poll: Duration,
        controller_version: &str,
    ) -> Result<Self, SetupError> {
        let clients = config
            .plugins
            .iter()
            .map(|p| Ok((p.name.clone(), PluginClient::new(p)?)))
            .collect::<Result<BTreeMap<_, _>, SetupError>>()?;
        let health = clients
            .keys()
            .map(|n| {
                let why = "not initialized yet".to_string();
                (n.clone(), PluginHealth::Unreachable { why })
            })
            .collect();
        Ok(Self {
            clients,
            health: RwLock::new(health),
            judged: Mutex::new(HashMap::new()),
            news: Mutex::default(),
            poll,
            controller_version: controller_version.to_string(),
        })
    }

    /// Shorter time bounds on every call (tests).
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        for c in self.clients.values_mut() {
            *c = c.clone().with_timeout(timeout);
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    pub fn poll(&self) -> Duration {
        self.poll
    }

    /// What a pass over MWRS `owner` plans with.
    pub fn inputs(&self, owner: &str) -> PluginInputs {
        let health = self.health.read().map(|h| h.clone()).unwrap_or_default();
        let (verdicts, asked) = match self.judged.lock() {
            Ok(j) => j
                .get(owner)
                .map(|j| (j.verdicts.clone(), j.asked.clone()))
                .unwrap_or_default(),
            Err(_) => Default::default(),
        };
        PluginInputs {
            health,
            verdicts,
            asked,
            poll: SignedDuration::try_from(self.poll).unwrap_or(SignedDuration::from_secs(10)),
        }
    }

    /// Forgets what was said about a deleted MWRS.
    pub fn forget(&self, owner: &str) {
        if let Ok(mut j) = self.judged.lock() {
            j.remove(owner);
        }
    }

    /// `Initialize` on every plugin, to learn which answer; true when any plugin's health
    /// changed.
    pub async fn probe(&self) -> bool {
        let mut changed = false;
        for (name, client) in &self.clients {
            let request = api::InitializeRequest {
                plugin: name.clone(),
                controller_version: self.controller_version.clone(),
            };
            let health = match client.initialize(request).await {
                Ok(r) => PluginHealth::Available {
                    description: r.description,
                    since: Timestamp::now(),
                },
                Err(s) => PluginHealth::Unreachable {
                    why: format!("Initialize: {}", status_line(&s)),
                },
            };
            changed |= self.set_health(name, health);
        }
        changed
    }

    /// Records `health`; false when it says what was known (a plugin that keeps
    /// answering keeps the time it started to).
    fn set_health(&self, name: &str, health: PluginHealth) -> bool {
        let Ok(mut h) = self.health.write() else {
            return false;
        };
        let same = match (h.get(name), &health) {
            (
                Some(PluginHealth::Available {
                    description: old, ..
                }),
                PluginHealth::Available { description, .. },
            ) => old == description,
            (old, new) => old == Some(new),
        };
        if same {
            return false;
        }
        match &health {
            PluginHealth::Available { description, .. } => {
                tracing::info!(plugin = name, %description, "rollout plugin available")
            }
            PluginHealth::Unreachable { why } => {
                tracing::warn!(plugin = name, %why, "rollout plugin unreachable")
            }
        }
        h.insert(name.to_string(), health);
        true
    }

    /// Where to say which MWRS has news from its plugins (the controller's trigger).
    pub fn answers_to(&self, news: UnboundedSender<ObjectRef<GuardedMwrs>>) {
        if let Ok(mut n) = self.news.lock() {
            *n = Some(news);
        }
    }

    /// Puts `validations` to their plugins in a task of their own, so that a slow plugin
    /// holds no reconcile (nor another MWRS); when an answer differs from what was known,
    /// `mwrs` is reconciled again. Each question counts as asked from now: the passes
    /// meanwhile do not send it again.
    pub fn ask_in_background(
        self: &Arc<Self>,
        mwrs: &ManifestWorkReplicaSet,
        validations: Vec<Validation>,
    ) {
        let namespace = mwrs.metadata.namespace.clone().unwrap_or_default();
        let name = mwrs.metadata.name.clone().unwrap_or_default();
        let key = ObjectRef::<GuardedMwrs>::new(&name).within(&namespace);
        let owner = OwnerKey::new(namespace, name).slashed();
        self.mark_asked(&owner, &validations, Timestamp::now());
        let requests: Vec<api::ValidateRequest> =
            validations.iter().map(|v| request(mwrs, v)).collect();
        let plugins = self.clone();
        tokio::spawn(async move {
            if plugins.ask(&owner, validations, requests).await {
                let news = plugins.news.lock().ok().and_then(|n| n.clone());
                if let Some(news) = news {
                    let _ = news.unbounded_send(key);
                }
            }
        });
    }

    fn mark_asked(&self, owner: &str, validations: &[Validation], now: Timestamp) {
        if let Ok(mut judged) = self.judged.lock() {
            let j = judged.entry(owner.to_string()).or_default();
            for v in validations {
                j.asked.insert(Arc::from(v.cluster.as_str()), now);
            }
        }
    }

    /// Puts `validations` (as `requests`) to their plugins, at most [`ASK_CONCURRENCY`]
    /// at once, and records the answers; true when any answer differs from what was
    /// known.
    async fn ask(
        &self,
        owner: &str,
        validations: Vec<Validation>,
        requests: Vec<api::ValidateRequest>,
    ) -> bool {
        // Owned jobs: the calls borrow nothing across their awaits.
        let jobs: Vec<_> = validations
            .into_iter()
            .zip(requests)
            .map(|(v, r)| {
                let client = self.clients.get(&v.plugin).cloned();
                (v, client, r)
            })
            .collect();
        let answers: Vec<(Validation, Result<api::ValidateResponse, tonic::Status>)> =
            futures::stream::iter(jobs)
                .map(|(v, client, r)| async move {
                    let answer = match client {
                        Some(c) => c.validate_rollout_completion(r).await,
                        None => Err(tonic::Status::not_found("not registered")),
                    };
                    (v, answer)
                })
                .buffer_unordered(ASK_CONCURRENCY)
                .collect()
                .await;
        let now = Timestamp::now();
        let mut changed = false;
        for (v, answer) in answers {
            match answer {
                Ok(r) => changed |= self.record(owner, &v, r, now),
                Err(s) => {
                    let why = format!("ValidateRolloutCompletion: {}", status_line(&s));
                    changed |= self.set_health(&v.plugin, PluginHealth::Unreachable { why });
                }
            }
        }
        changed
    }

    /// Records one answer; true when it differs from the last one.
    fn record(
        &self,
        owner: &str,
        v: &Validation,
        r: api::ValidateResponse,
        now: Timestamp,
    ) -> bool {
        let verdict = match api::Verdict::try_from(r.verdict) {
            Ok(api::Verdict::Succeeded) => Verdict::Succeeded,
            Ok(api::Verdict::Failed) => Verdict::Failed,
            // An unspecified or unknown verdict says nothing final.
            _ => Verdict::InProgress,
        };
        let Ok(mut judged) = self.judged.lock() else {
            return false;
        };
        let j = judged.entry(owner.to_string()).or_default();
        let cluster: Arc<str> = Arc::from(v.cluster.as_str());
        let new = ClusterVerdict {
            plugin: v.plugin.clone(),
            revision: v.revision.clone(),
            generation: v.generation,
            verdict,
            message: r.message,
            at: now,
        };
        let same = j.verdicts.get(&cluster).is_some_and(|old| {
            (
                &old.plugin,
                &old.revision,
                old.generation,
                old.verdict,
                &old.message,
            ) == (
                &new.plugin,
                &new.revision,
                new.generation,
                new.verdict,
                &new.message,
            )
        });
        if !same {
            j.verdicts.insert(cluster, new);
        }
        !same
    }
}

/// The request for `v`, about MWRS `mwrs`.
fn request(mwrs: &ManifestWorkReplicaSet, v: &Validation) -> api::ValidateRequest {
    let meta = &mwrs.metadata;
    let status = mwrs.status.as_ref();
    api::ValidateRequest {
        target: Some(api::Target {
            mwrs_namespace: meta.namespace.clone().unwrap_or_default(),
            mwrs_name: meta.name.clone().unwrap_or_default(),
            mwrs_uid: meta.uid.clone().unwrap_or_default(),
            placement: v.placement.clone(),
            total_clusters: i32::try_from(v.total_clusters).unwrap_or(i32::MAX),
        }),
        revisions: Some(api::Revisions {
            current: status
                .and_then(|s| s.current_revision.clone())
                .unwrap_or_default(),
            update: v.revision.clone(),
        }),
        cluster: v.cluster.clone(),
        revision: v.revision.clone(),
        manifest_work: v.manifest_work.clone(),
        generation: v.generation,
        since: v.since.map(|t| prost_types::Timestamp {
            seconds: t.as_second(),
            nanos: t.subsec_nanosecond(),
        }),
    }
}

/// `CODE: message` of a gRPC status, in a line.
fn status_line(s: &tonic::Status) -> String {
    let message = s.message().lines().next().unwrap_or_default();
    match message {
        "" => format!("{:?}", s.code()),
        m => format!("{:?}: {m}", s.code()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn validation(cluster: &str) -> Validation {
        Validation {
            plugin: "judge".into(),
            placement: "p".into(),
            total_clusters: 1,
            cluster: cluster.into(),
            manifest_work: "ns.app".into(),
            revision: "abc".into(),
            generation: 2,
            since: None,
        }
    }

    fn answer(v: api::Verdict, message: &str) -> api::ValidateResponse {
        api::ValidateResponse {
            verdict: v.into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_plugin_that_keeps_answering_keeps_the_time_it_started_to() {
        let p = Plugins::default();
        let at = |s| Timestamp::from_second(s).unwrap();
        let available = |since| PluginHealth::Available {
            description: "judge 1.0".into(),
            since,
        };
        assert!(p.set_health("judge", available(at(10))));
        assert!(!p.set_health("judge", available(at(20))), "the same answer");
        assert_eq!(p.inputs("ns/app").health["judge"], available(at(10)));
        let down = PluginHealth::Unreachable { why: "gone".into() };
        assert!(p.set_health("judge", down.clone()));
        assert!(!p.set_health("judge", down));
        assert!(p.set_health("judge", available(at(30))));
        assert_eq!(p.inputs("ns/app").health["judge"], available(at(30)));
    }

    #[test]
    fn an_answer_is_news_only_when_it_differs() {
        let p = Plugins::default();
        let now = Timestamp::from_second(100).unwrap();
        let v = validation("c1");
        let r = |verdict, message| answer(verdict, message);
        assert!(p.record(
            "ns/app",
            &v,
            r(api::Verdict::InProgress, "1 of 3 checks"),
            now
        ));
        assert!(!p.record(
            "ns/app",
            &v,
            r(api::Verdict::InProgress, "1 of 3 checks"),
            now
        ));
        assert!(p.record(
            "ns/app",
            &v,
            r(api::Verdict::InProgress, "2 of 3 checks"),
            now
        ));
        assert!(p.record(
            "ns/app",
            &v,
            r(api::Verdict::Succeeded, "3 of 3 checks"),
            now
        ));
        // An unknown verdict number says nothing final.
        let odd = api::ValidateResponse {
            verdict: 42,
            message: String::new(),
        };
        assert!(p.record("ns/app", &validation("c2"), odd, now));
        let inputs = p.inputs("ns/app");
        assert_eq!(inputs.verdicts["c1"].verdict, Verdict::Succeeded);
        assert_eq!(inputs.verdicts["c2"].verdict, Verdict::InProgress);
        assert!(
            inputs.asked.is_empty(),
            "asked counts from the question, not the answer"
        );
        p.mark_asked("ns/app", std::slice::from_ref(&v), now);
        assert_eq!(p.inputs("ns/app").asked["c1"], now);
        assert!(p.inputs("ns/other").verdicts.is_empty(), "per MWRS");
        p.forget("ns/app");
        assert!(p.inputs("ns/app").verdicts.is_empty());
    }
}
