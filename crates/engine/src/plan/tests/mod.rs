//! Tests of single stages, one file per stage, on a pass built from a small hub held in
//! a [`Fixture`] (plain, synchronous, no I/O; `now` is [`t0`]).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use mwrs_api::labels;
use mwrs_api::mwrs::{
    LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec,
    ManifestWorkReplicaSetStatus,
};
use mwrs_api::work::ManifestWorkTemplate;
use mwrs_api::work::condition as work_condition;
use serde_json::{Value, json};

use crate::hash;
use crate::owner::OwnerKey;
use crate::placement::PlacementView;
use crate::revision::RevisionView;
use crate::rollout::{DecisionGroups, GroupKey, RolloutStatus};
use crate::snapshot::Snapshot;
use crate::validate;
use crate::work::WorkView;

use super::{ClusterReport, Observed, Pass, PlanConfig};

mod abort;
mod budget;
mod classify;
mod controls;
mod history;
mod outcome;
mod plugin_gate;
mod status;
mod writes;

/// The stable revision's hash in [`stable_revision`].
const STABLE: &str = "stable1";

fn t0() -> Timestamp {
    "2026-12-03T10:00:00Z".parse().unwrap()
}

fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}

/// MWRS `ns/app` at generation 2, one placementRef `p` with `strategy` (AbortAll unless
/// it says otherwise), its stable revision `current` when given.
fn mwrs_with(strategy: Value, current: Option<&str>) -> ManifestWorkReplicaSet {
    let template = json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "default"}, "data": {"v": "2"}}]}});
    let mut strategy = strategy;
    if strategy.get("failureStrategy").is_none() {
        strategy["failureStrategy"] = json!("AbortAll");
    }
    let mut m = ManifestWorkReplicaSet::new(
        "app",
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(template).unwrap(),
            placement_refs: vec![LocalPlacementReference {
                name: "p".into(),
                rollout_strategy: Some(serde_json::from_value(strategy).unwrap()),
            }],
            ..Default::default()
        },
    );
    m.metadata.namespace = Some("ns".into());
    m.metadata.generation = Some(2);
    m.status = Some(ManifestWorkReplicaSetStatus {
        current_revision: current.map(str::to_string),
        ..Default::default()
    });
    m
}

/// [`mwrs_with`] a strategy of type All.
fn mwrs(current: Option<&str>) -> ManifestWorkReplicaSet {
    mwrs_with(json!({"type": "All"}), current)
}

/// Revision 1 of `app`, hash [`STABLE`], an empty template.
fn stable_revision() -> RevisionView {
    revision(STABLE, 1, json!({"workload": {"manifests": []}}))
}

fn revision(hash: &str, number: i64, template: Value) -> RevisionView {
    RevisionView {
        marks: Default::default(),
        name: format!("app-{hash}"),
        hash: hash.into(),
        revision: number,
        digest: hash::digest(&template),
        template,
        created: Some(t0()),
        change_cause: None,
        generation: Some(1),
        resource_version: Some(format!("rv-{hash}")),
    }
}

fn report(cluster: &str, status: RolloutStatus) -> ClusterReport {
    ClusterReport {
        cluster: cluster.into(),
        placement: Arc::from("p"),
        group: None,
        revision: None,
        status,
        since: None,
        soak_until: None,
        deadline: None,
        note: None,
    }
}

/// What an agent has reported on a ManifestWork's current generation.
#[derive(Clone, Copy)]
enum Reported {
    Nothing,
    /// Applied, still progressing.
    Progressing,
    Done,
    Degraded,
}

/// Everything a pass reads (a [`Snapshot`], reached through `Deref`), owned, so a test
/// can shape it before it builds the pass.
struct Fixture {
    hub: Snapshot,
    cfg: PlanConfig,
}

impl Deref for Fixture {
    type Target = Snapshot;

    fn deref(&self) -> &Snapshot {
        &self.hub
    }
}

impl DerefMut for Fixture {
    fn deref_mut(&mut self) -> &mut Snapshot {
        &mut self.hub
    }
}

impl Fixture {
    /// `m` with placement `p` selecting `clusters` in one decision group, and the stable
    /// revision stored.
    fn new(m: ManifestWorkReplicaSet, clusters: &[&str]) -> Self {
        let groups = DecisionGroups::from_pairs(clusters.iter().map(|c| {
            (
                GroupKey {
                    name: String::new(),
                    index: 0,
                },
                c.to_string(),
            )
        }));
        Self {
            hub: Snapshot {
                mwrs: m,
                placements: vec![PlacementView::found("p", groups)],
                works: Vec::new(),
                revisions: vec![stable_revision()],
                blocked: Vec::new(),
            },
            cfg: PlanConfig::default(),
        }
    }

    /// The pass that plans `observed` (this fixture's) at [`t0`].
    fn pass<'a>(&'a self, observed: &'a Observed<'a>) -> Pass<'a> {
        let validated = validate::validate(&self.mwrs.spec, self.cfg.manifest_size_limit)
            .expect("a valid spec");
        let old = self.mwrs.status.clone().unwrap_or_default();
        Pass::new(
            observed,
            OwnerKey::new("ns", "app"),
            old,
            validated,
            t0(),
            &self.cfg,
        )
    }

    /// The hash of the spec's template: the update revision.
    fn update(&self) -> String {
        let o = self.observed();
        self.pass(&o).resolution.hash().to_string()
    }

    fn annotate(&mut self, key: &str, value: &str) {
        self.mwrs
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }

    fn status(&mut self) -> &mut ManifestWorkReplicaSetStatus {
        self.mwrs.status.get_or_insert_with(Default::default)
    }

    /// Adds this MWRS's ManifestWork in `cluster`, carrying revision `hash` (with the
    /// spec of that revision when it is stored), written `written` ago, with `reported`
    /// on its generation since then.
    fn work(&mut self, cluster: &str, hash: &str, written: SignedDuration, reported: Reported) {
        let owner = OwnerKey::new("ns", "app");
        let at = t0() - written;
        let mut w = WorkView::created(cluster, &owner.work_name(), at);
        w.generation = 1;
        let (key, value) = owner.selector();
        w.labels = Arc::new(BTreeMap::from([
            (key.to_string(), value),
            (labels::PLACEMENT_NAME.into(), "p".into()),
            (labels::CONTROLLER_HASH.into(), hash.into()),
        ]));
        w.annotations = Arc::new(BTreeMap::from([
            (labels::MWRS_OWNER_ANNOTATION.into(), owner.slashed()),
            (labels::REVISION_APPLIED_AT.into(), at.to_string()),
        ]));
        w.spec_digest = self
            .revisions
            .iter()
            .find(|r| r.hash == hash)
            .map(|r| r.digest);
        let (progressing, degraded) = match reported {
            Reported::Nothing => ("", ""),
            Reported::Progressing => ("True", "False"),
            Reported::Done => ("False", "False"),
            Reported::Degraded => ("True", "True"),
        };
        if !progressing.is_empty() {
            w.set_condition(work_condition::APPLIED, "True", 1, at);
            w.set_condition(work_condition::AVAILABLE, "True", 1, at);
            w.set_condition(work_condition::PROGRESSING, progressing, 1, at);
            w.set_condition(work_condition::DEGRADED, degraded, 1, at);
            w.status_seen = Some(at);
        }
        self.works.push(w);
    }

    /// Stores the spec's template as the newest revision, so the update revision is in history.
    fn store_update(&mut self) -> String {
        let update = self.update();
        let template = self.mwrs.spec.manifest_work_template.to_value();
        let next = self.revisions.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
        let mut r = revision(&update, next, template);
        r.generation = self.mwrs.metadata.generation;
        self.revisions.push(r);
        self.status().update_revision = Some(update.clone());
        update
    }
}
