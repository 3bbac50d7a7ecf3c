//! The demo's session on the hub: reading a [`Frame`], printing a timeline line when
//! it changes, waiting for a step's expected state with a deadline, writing the template,
//! reading the revision history, and recording each step's outcome.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_engine::rollout::RolloutStatus;
use serde_json::{Value, json};

use crate::fleet::{Fleet, MWRS_NAME};
use crate::poll::POLL;
use crate::timeline::{self, Frame, WorkState};

/// A step of the scenario and how it went.
pub struct StepResult {
    pub name: String,
    pub outcome: String,
    pub took: Duration,
}

pub struct Demo {
    pub client: Client,
    pub namespace: String,
    pub fleet: Fleet,
    pub start: Instant,
    last_line: String,
    /// revision hash -> version label (v1, v2, ...), learnt from ManifestWorks and revisions
    pub names: BTreeMap<String, String>,
    pub results: Vec<StepResult>,
}

pub fn version_of(spec: &Value) -> Option<&str> {
    spec.pointer("/workload/manifests/0/data/version")
        .and_then(Value::as_str)
}

/// Its agent is done with the ManifestWork's generation, by the planner's own reading of
/// the conditions (Progressing False, or Available True where no Progressing is reported).
fn done(w: &ManifestWork) -> bool {
    let view = mwrs_engine::work::WorkView::from_work(w);
    mwrs_engine::work::written_status(&view).0 == RolloutStatus::Succeeded
}

impl Demo {
    pub fn new(client: Client, namespace: String, fleet: Fleet) -> Self {
        Self {
            client,
            namespace,
            fleet,
            start: Instant::now(),
            last_line: String::new(),
            names: BTreeMap::new(),
            results: Vec::new(),
        }
    }

    pub fn mwrs_api(&self) -> Api<ManifestWorkReplicaSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn elapsed(&self) -> String {
        format!("{:>6.1}s", self.start.elapsed().as_secs_f64())
    }

    pub fn say(&self, text: &str) {
        println!("[{}] {text}", self.elapsed());
    }

    pub async fn frame(&mut self) -> anyhow::Result<Frame> {
        let mwrs = self
            .mwrs_api()
            .get(MWRS_NAME)
            .await
            .with_context(|| format!("reading MWRS {}/{MWRS_NAME}", self.namespace))?;
        let owner = format!("{}.{MWRS_NAME}", self.namespace);
        let lp = ListParams::default().labels(&format!("{}={owner}", labels::MWRS_OWNER));
        let list = Api::<ManifestWork>::all(self.client.clone())
            .list(&lp)
            .await
            .context("listing ManifestWorks")?;
        let clusters = self.fleet.clusters();
        let mut works = BTreeMap::new();
        for w in list.items {
            let Some(ns) = w.namespace() else { continue };
            if !clusters.contains(&ns) || w.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let hash = w
                .labels()
                .get(labels::CONTROLLER_HASH)
                .cloned()
                .unwrap_or_default();
            let version = version_of(&w.spec.to_value()).unwrap_or("?").to_string();
            if !hash.is_empty() {
                self.names
                    .entry(hash.clone())
                    .or_insert_with(|| version.clone());
            }
            let done = done(&w);
            works.insert(
                ns,
                WorkState {
                    hash,
                    version,
                    done,
                },
            );
        }
        let spokes = self.fleet.spoke_versions().await;
        Ok(Frame {
            mwrs,
            works,
            spokes,
        })
    }

    fn name_of(&self, hash: Option<&str>) -> String {
        match hash {
            None => "-".into(),
            Some(h) => self.names.get(h).cloned().unwrap_or_else(|| h.to_string()),
        }
    }

    /// Prints a timeline line when anything shown changed.
    fn show(&mut self, snap: &Frame) {
        let s = snap.status();
        let (pstatus, preason) = snap
            .condition("Progressing")
            .map(|(st, r, _)| (st, r))
            .unwrap_or_else(|| ("-".into(), "-".into()));
        let groups = self.fleet.groups();
        let spokes = if snap.spokes.is_empty() {
            String::new()
        } else {
            format!(" spokes {}", timeline::spoke_strip(groups, snap))
        };
        let line = format!(
            "{:<5} {:<26} {} {:>2}/{:<2} cur={:<3} upd={:<3}{} {} {}{spokes}",
            pstatus,
            preason,
            timeline::progress_bar(s.summary.updated, s.summary.desired_total),
            s.summary.updated,
            s.summary.desired_total,
            self.name_of(s.current_revision.as_deref()),
            self.name_of(s.update_revision.as_deref()),
            if s.aborted_time.is_some() {
                " ABORTED"
            } else {
                "        "
            },
            timeline::work_strip(groups, snap),
            timeline::version_counts(snap),
        );
        if line != self.last_line {
            println!("[{}] {line}", self.elapsed());
            self.last_line = line;
        }
    }

    /// Polls until `check` accepts a frame; fails after `timeout` with the last reason.
    pub async fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Frame) -> Result<(), String>,
    ) -> anyhow::Result<Frame> {
        let deadline = Instant::now() + timeout;
        loop {
            let snap = self.frame().await?;
            self.show(&snap);
            match check(&snap) {
                Ok(()) => return Ok(snap),
                Err(why) if Instant::now() >= deadline => {
                    bail!(
                        "{what}: not reached within {timeout:?}: {why}\n{}",
                        describe(&snap)
                    );
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    pub fn step_header(&self, n: usize, text: &str) {
        println!();
        println!("== step {n}: {text}");
    }

    pub fn record(&mut self, name: &str, outcome: String, took: Duration) {
        self.say(&format!(
            "OK  {name}: {outcome} ({:.1}s)",
            took.as_secs_f64()
        ));
        self.results.push(StepResult {
            name: name.to_string(),
            outcome,
            took,
        });
    }

    pub async fn set_template(&self, template: &Value) -> anyhow::Result<()> {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/spec/manifestWorkTemplate", "value": template}
        ]))?;
        self.mwrs_api()
            .patch(
                MWRS_NAME,
                &PatchParams::default(),
                &Patch::Json::<()>(patch),
            )
            .await
            .context("patching spec.manifestWorkTemplate")?;
        Ok(())
    }

    /// The template stored in the ControllerRevision owned by the MWRS for `hash`.
    pub async fn revision_template(&self, hash: &str) -> anyhow::Result<(String, i64, Value)> {
        let mwrs = self.mwrs_api().get(MWRS_NAME).await?;
        let uid = mwrs.metadata.uid.clone().unwrap_or_default();
        let crs: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = ListParams::default().labels(&format!("{}={hash}", labels::CONTROLLER_HASH));
        let found = crs
            .list(&lp)
            .await
            .context("listing ControllerRevisions")?
            .items
            .into_iter()
            .find(|cr| {
                cr.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid)
            });
        let Some(cr) = found else {
            bail!("no ControllerRevision owned by {MWRS_NAME} carries hash {hash}");
        };
        let Some(data) = cr.data.as_ref().map(|d| d.0.clone()) else {
            bail!("ControllerRevision {} has no data", cr.name_any());
        };
        Ok((cr.name_any(), cr.revision, data))
    }

    /// (revision, ControllerRevision name, version) of every stored revision, oldest first.
    pub async fn history(&self) -> anyhow::Result<Vec<(i64, String, String)>> {
        let crs: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut out: Vec<_> = crs
            .list(&ListParams::default())
            .await
            .context("listing ControllerRevisions")?
            .items
            .into_iter()
            .map(|cr| {
                let v = cr
                    .data
                    .as_ref()
                    .and_then(|d| version_of(&d.0).map(str::to_string))
                    .unwrap_or_else(|| "?".into());
                (cr.revision, cr.name_any(), v)
            })
            .collect();
        out.sort();
        Ok(out)
    }
}

/// The MWRS's revisions, abort, summary and conditions, for a failed step.
fn describe(snap: &Frame) -> String {
    let s = snap.status();
    let conditions: Vec<String> = s
        .conditions
        .unwrap_or_default()
        .iter()
        .map(|c| format!("{}={}/{}: {}", c.type_, c.status, c.reason, c.message))
        .collect();
    format!(
        "  status: current={:?} update={:?} aborted={:?} summary={:?}\n  conditions: {conditions:?}",
        s.current_revision,
        s.update_revision,
        s.aborted_time.map(|t| t.0.to_string()),
        s.summary,
    )
}
