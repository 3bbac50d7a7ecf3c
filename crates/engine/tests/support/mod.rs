//! A tiny in-memory hub for multi-step planner scenarios: it executes plans (ManifestWork
//! and revision writes, status), and a simulated work agent answers every ManifestWork
//! generation with conditions after a chosen delay. Time only moves when a test says so.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::labels;
use mwrs_api::mwrs::{
    LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec,
    ManifestWorkReplicaSetStatus,
};
use mwrs_api::rollout::RolloutStrategy;
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_engine::hash;
use mwrs_engine::placement::PlacementView;
use mwrs_engine::plan::in_memory::{Objects, Works};
use mwrs_engine::plan::{Plan, PlanConfig};
use mwrs_engine::revision::RevisionView;
use mwrs_engine::rollout::{DecisionGroups, GroupKey};
use serde_json::{Value, json};

pub const T0: &str = "2026-01-01T00:00:00Z";

/// What the agent of one cluster does with a revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Progressing until `after`, then Progressing=False (done).
    Succeed { after: SignedDuration },
    /// Progressing until `after`, then Degraded=True while still Progressing.
    Degrade { after: SignedDuration },
    /// Applied and Progressing forever.
    Hang,
    /// Never reports anything (agent stopped, cluster gone).
    Silent,
    /// Reports `Applied` False at the generation: an apply error.
    ApplyError,
}

/// The message of [`Behaviour::ApplyError`].
pub const APPLY_ERROR: &str = "configmaps \"app\" is forbidden: quota exceeded";

/// A template with one ConfigMap whose data is `version`.
pub fn template(version: &str) -> Value {
    json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "default"}, "data": {"version": version}}]}})
}

pub fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}

pub struct MemoryHub {
    pub now: Timestamp,
    pub mwrs: ManifestWorkReplicaSet,
    pub placements: Vec<PlacementView>,
    pub works: Works,
    pub revisions: Vec<RevisionView>,
    /// What each work's generation was first seen by the agent at.
    seen: BTreeMap<(String, i64), Timestamp>,
    /// Agent behaviour by (cluster, template version); default: succeed after 10s.
    pub behaviour: BTreeMap<(String, String), Behaviour>,
    pub default_behaviour: Behaviour,
    pub cfg: PlanConfig,
    pub last_plan: Option<Plan>,
    pub writes: usize,
    generation: i64,
    /// A digest of every plan of this hub, in order, for the golden check on drop.
    transcript: Vec<String>,
}

impl MemoryHub {
    /// One MWRS `app` in `default`, one placementRef `p` with `groups` (group index →
    /// clusters), template version `v1`.
    pub fn new(strategy: Value, groups: &[&[&str]]) -> Self {
        let strategy: RolloutStrategy = serde_json::from_value(strategy).expect("strategy");
        let mut mwrs = ManifestWorkReplicaSet::new(
            "app",
            ManifestWorkReplicaSetSpec {
                manifest_work_template: ManifestWorkTemplate::from_value(template("v1")).unwrap(),
                placement_refs: vec![LocalPlacementReference {
                    name: "p".into(),
                    rollout_strategy: Some(strategy),
                }],
                ..Default::default()
            },
        );
        mwrs.metadata.namespace = Some("default".into());
        mwrs.metadata.generation = Some(1);
        let mut hub = Self {
            now: T0.parse().unwrap(),
            mwrs,
            placements: Vec::new(),
            works: Works::default(),
            revisions: Vec::new(),
            seen: BTreeMap::new(),
            behaviour: BTreeMap::new(),
            default_behaviour: Behaviour::Succeed { after: secs(10) },
            cfg: PlanConfig::default(),
            last_plan: None,
            transcript: Vec::new(),
            writes: 0,
            generation: 1,
        };
        hub.set_groups("p", groups);
        hub
    }

    pub fn set_groups(&mut self, placement: &str, groups: &[&[&str]]) {
        let pairs = groups.iter().enumerate().flat_map(|(i, cs)| {
            cs.iter().map(move |c| {
                (
                    GroupKey {
                        name: String::new(),
                        index: i as i32,
                    },
                    c.to_string(),
                )
            })
        });
        let view = PlacementView::found(placement, DecisionGroups::from_pairs(pairs));
        self.placements.retain(|p| p.name != placement);
        self.placements.push(view);
    }

    pub fn set_template(&mut self, version: &str) {
        self.mwrs.spec.manifest_work_template =
            ManifestWorkTemplate::from_value(template(version)).unwrap();
        self.generation += 1;
        self.mwrs.metadata.generation = Some(self.generation);
    }

    /// Sets `failureStrategy: AbortAll` on the first placementRef.
    pub fn abort_all(&mut self) {
        if let Some(s) = self.mwrs.spec.placement_refs[0].rollout_strategy.as_mut() {
            s.failure_strategy = Some("AbortAll".into());
        }
    }

    pub fn annotate(&mut self, key: &str, value: &str) {
        self.mwrs
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }

    pub fn behave(&mut self, cluster: &str, version: &str, b: Behaviour) {
        self.behaviour
            .insert((cluster.to_string(), version.to_string()), b);
    }

    pub fn status(&self) -> ManifestWorkReplicaSetStatus {
        self.mwrs.status.clone().unwrap_or_default()
    }

    /// One controller pass: plan and execute.
    pub fn reconcile(&mut self) -> &Plan {
        let observed = mwrs_engine::Observed {
            mwrs: &self.mwrs,
            placements: &self.placements,
            works: self.works.as_slice(),
            revisions: &self.revisions,
            blocked: &[],
            taken_revision_names: &[],
            plugins: &mwrs_engine::plugin::NO_PLUGINS,
            sight: mwrs_engine::plan::Sight::Clear,
        };
        let plan = mwrs_engine::plan(&observed, self.now, &self.cfg);
        // Read-only views classify with the planner's own stages, nothing else.
        let seen = mwrs_engine::plan::progress(&observed, self.now, &self.cfg);
        assert_eq!(
            seen.clusters, plan.clusters,
            "plan::progress is the plan's classification"
        );
        self.transcript.push(golden::digest(&plan));
        self.execute(&plan);
        self.last_plan = Some(plan);
        self.last_plan.as_ref().unwrap()
    }

    fn execute(&mut self, plan: &Plan) {
        self.writes += plan.works.len();
        Objects {
            mwrs: &mut self.mwrs,
            revisions: &mut self.revisions,
            works: &mut self.works,
        }
        .execute(plan, self.now);
    }

    /// The template version (`data.version`) a work carries.
    pub fn version_of(&self, cluster: &str) -> Option<String> {
        let w = self.works.get(cluster)?;
        let h = w.labels.get(labels::CONTROLLER_HASH)?;
        let r = self.revisions.iter().find(|r| &r.hash == h)?;
        r.template["workload"]["manifests"][0]["data"]["version"]
            .as_str()
            .map(String::from)
    }

    pub fn versions(&self) -> BTreeMap<String, String> {
        self.works
            .clusters()
            .into_iter()
            .map(|c| (c.to_string(), self.version_of(c).unwrap_or_default()))
            .collect()
    }

    /// The agents: report on every work as its behaviour says at `now`.
    pub fn agents(&mut self) {
        let now = self.now;
        let clusters: Vec<String> = self
            .works
            .clusters()
            .into_iter()
            .map(String::from)
            .collect();
        for c in clusters {
            let version = self.version_of(&c).unwrap_or_default();
            let b = self
                .behaviour
                .get(&(c.clone(), version))
                .copied()
                .unwrap_or(self.default_behaviour);
            let w = self.works.get_mut(&c).unwrap();
            let gen_ = w.generation;
            let first_seen = *self.seen.entry((c.clone(), gen_)).or_insert(now);
            let elapsed = now.duration_since(first_seen);
            let (progressing, degraded) = match b {
                Behaviour::Silent => continue,
                Behaviour::ApplyError => {
                    w.set_condition("Applied", "False", gen_, now);
                    w.applied_note = Some(
                        format!("Applied False (AppliedManifestWorkFailed): {APPLY_ERROR}").into(),
                    );
                    w.status_seen = Some(first_seen);
                    continue;
                }
                Behaviour::Succeed { after } if elapsed >= after => ("False", "False"),
                Behaviour::Degrade { after } if elapsed >= after => ("True", "True"),
                _ => ("True", "False"),
            };
            w.applied_note = None;
            w.set_condition("Applied", "True", gen_, now);
            w.set_condition("Available", "True", gen_, now);
            w.set_condition("Progressing", progressing, gen_, now);
            w.set_condition("Degraded", degraded, gen_, now);
        }
    }

    /// Advance time, let the agents report, then reconcile.
    pub fn step(&mut self, by: SignedDuration) -> &Plan {
        self.now += by;
        self.agents();
        self.reconcile()
    }

    /// (type, status, reason) of every MWRS condition, sorted by type.
    pub fn conditions(&self) -> Vec<(String, String, String)> {
        let mut v: Vec<_> = self
            .status()
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason))
            .collect();
        v.sort();
        v
    }

    pub fn condition(&self, type_: &str) -> (String, String) {
        self.status()
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason))
            .unwrap_or_default()
    }

    pub fn message(&self, type_: &str) -> String {
        self.status()
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.message)
            .unwrap_or_default()
    }

    pub fn hash_of(&self, version: &str) -> String {
        hash::revision_hash(&template(version), 0)
    }
}

/// `[(type, status, reason)]` literal helper.
pub fn c(type_: &str, status: &str, reason: &str) -> (String, String, String) {
    (type_.into(), status.into(), reason.into())
}

impl Drop for MemoryHub {
    /// Every scenario's plans must stay what they were (see [`golden`]).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            golden::check(std::mem::take(&mut self.transcript));
        }
    }
}

/// Golden plans: every plan a scenario's hub makes, in order, as a digest of a rendering
/// that names no internal type, compared with `tests/golden/<binary>/<test>.txt`. A
/// refactor of the planner must leave every file unchanged; a change of behaviour updates
/// them on purpose (`MWRS_PLAN_GOLDEN=record`, then review the scenarios it touched). A
/// missing file is written, except under CI=true.
pub mod golden {
    use std::cell::Cell;
    use std::path::PathBuf;

    use mwrs_engine::plan::{Plan, WorkChange};
    use sha2::{Digest, Sha256};

    thread_local! {
        /// Hubs this test thread has dropped, so a test with two hubs has two files.
        static HUBS: Cell<usize> = const { Cell::new(0) };
    }

    /// The plan in a canonical text: every field by name (a new field fails to compile
    /// here until it is rendered), serde JSON for API types.
    pub fn render(plan: &Plan) -> String {
        let Plan {
            finalizer,
            works,
            revisions,
            status,
            events,
            recheck,
            invalid,
            clusters,
            plugin_calls,
            back_to_stable,
        } = plan;
        // Only where a plugin is asked, so the plans of scenarios without one keep
        // their digests.
        let plugin_calls = match plugin_calls.is_empty() {
            true => String::new(),
            false => format!("plugin_calls={plugin_calls:?}\n"),
        };
        // Only where an abort completes, likewise.
        let back_to_stable = match back_to_stable {
            None => String::new(),
            Some(b) => format!("back_to_stable={b:?}\n"),
        };
        let events: Vec<String> = events
            .iter()
            .map(|e| format!("{}|{}|{}", e.reason, e.message, e.warning))
            .collect();
        format!(
            "finalizer={finalizer:?}\nworks={works:?}\nrevisions={revisions:?}\n\
             templates={}\nstatus={}\nevents={events:?}\nrecheck={recheck:?}\n\
             invalid={}\nclusters={clusters:?}\n{plugin_calls}{back_to_stable}",
            serde_json::to_string(&written_templates(works)).unwrap_or_default(),
            serde_json::to_string(status).unwrap_or_default(),
            invalid
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        )
    }

    /// The template each revision written by `works` carries.
    fn written_templates(
        works: &[WorkChange],
    ) -> std::collections::BTreeMap<&str, &serde_json::Value> {
        works
            .iter()
            .filter_map(|w| match w {
                WorkChange::Apply(a) => Some((a.revision.as_str(), &*a.template)),
                _ => None,
            })
            .collect()
    }

    pub fn digest(plan: &Plan) -> String {
        let d = Sha256::digest(render(plan).as_bytes());
        d.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }

    fn file() -> Option<PathBuf> {
        let thread = std::thread::current();
        let test = thread.name()?.replace("::", "__");
        let n = HUBS.with(|h| {
            h.set(h.get() + 1);
            h.get()
        });
        let binary = module_path!().split("::").next().unwrap_or("engine");
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        Some(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/golden")
                .join(binary)
                .join(format!("{test}{suffix}.txt")),
        )
    }

    /// Compares `transcript` with the test's golden file (or writes it).
    pub fn check(transcript: Vec<String>) {
        let Some(path) = file() else { return };
        let now = transcript.join("\n") + "\n";
        let record = std::env::var("MWRS_PLAN_GOLDEN").as_deref() == Ok("record");
        match std::fs::read_to_string(&path) {
            Ok(want) if !record => {
                if want != now {
                    let step = want
                        .lines()
                        .zip(now.lines())
                        .position(|(a, b)| a != b)
                        .unwrap_or_else(|| want.lines().count().min(now.lines().count()));
                    panic!(
                        "the plans differ from {} from pass {} on ({} passes then, {} now); \
                         MWRS_PLAN_GOLDEN=record rewrites it if the change is meant",
                        path.display(),
                        step + 1,
                        want.lines().count(),
                        now.lines().count()
                    );
                }
            }
            _ => {
                assert!(
                    record || std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true and no golden plans at {}",
                    path.display()
                );
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).unwrap();
                }
                std::fs::write(&path, now).unwrap();
            }
        }
    }
}
