//! `rollout plan [NAME] [-f FILE] [--fail CLUSTER...]`: the waves the strategy takes on
//! today's decisions, from the engine's preview (the real planner run pass after pass on a
//! simulated fleet). With `-f`, the MWRS comes from a file and may not exist yet; its
//! ManifestWorks, revisions and status are taken from the hub when it does.

use std::collections::BTreeSet;

use jiff::Timestamp;
use kube::ResourceExt;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_engine::hash;
use mwrs_engine::preview::{End, Preview, PreviewConfig, WaveKind, assume_settled, preview};
use mwrs_engine::rollout::Compat;
use mwrs_engine::validate::{self, DEFAULT_MANIFEST_SIZE_LIMIT};
use serde::Serialize;

use crate::args::{Format, PlanArgs};
use crate::error::{CliError, Exit, Result};
use crate::hub::{HubClient, hidden_note};
use crate::output::{Out, Paint, Table, duration, few};

/// How many cluster names a wave line shows in the table (`-o wide`: all).
const NAMES_PER_WAVE: usize = 6;

/// One wave of the plan: when it starts after now, what it does, to which clusters.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveOut {
    pub wave: usize,
    pub at_seconds: i64,
    pub action: &'static str,
    pub revision: String,
    pub clusters: Vec<String>,
}

/// The plan as `-o json` prints it (and the dashboard shows it).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanOut {
    pub name: String,
    pub namespace: String,
    pub update_revision: Option<String>,
    pub current_revision: Option<String>,
    pub desired: usize,
    pub failing: Vec<String>,
    pub waves: Vec<WaveOut>,
    pub end: String,
    pub message: String,
    pub failed: Vec<String>,
    pub duration_seconds: i64,
    /// How it ends, in the line the table ends with.
    pub summary: String,
    /// What the preview had to assume, when the user may not read the ManifestWorks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn end_word(e: &End) -> String {
    match e {
        End::Complete => "Complete".into(),
        End::NothingToDo => "NothingToDo".into(),
        End::Stopped { reason } => format!("Stopped ({reason})"),
        End::Aborted { .. } => "Aborted".into(),
        End::AbortFailed => "AbortFailed".into(),
        End::Paused => "Paused".into(),
        End::Invalid => "Invalid".into(),
        End::Stuck => "Stuck".into(),
        End::Unfinished => "Unfinished".into(),
    }
}

/// The MWRS from `-f`: the file's spec and metadata over what the hub has of the same name
/// (status, generation), so the preview starts from the real fleet state.
fn overlay(
    mut m: ManifestWorkReplicaSet,
    on_hub: Option<ManifestWorkReplicaSet>,
    namespace: &str,
) -> ManifestWorkReplicaSet {
    m.metadata.namespace = Some(namespace.to_string());
    match on_hub {
        Some(hub) => {
            let changed = hash::digest(&hub.spec.manifest_work_template.to_value())
                != hash::digest(&m.spec.manifest_work_template.to_value())
                || hub.spec != m.spec;
            let generation = hub.metadata.generation.unwrap_or(1);
            m.metadata.generation = Some(if changed { generation + 1 } else { generation });
            m.metadata.uid = hub.metadata.uid.clone();
            m.metadata.finalizers = hub.metadata.finalizers.clone();
            m.metadata.creation_timestamp = hub.metadata.creation_timestamp.clone();
            m.status = hub.status;
        }
        None => m.metadata.generation = Some(1),
    }
    m
}

/// The MWRS in file `path`, checked as `kubectl apply` and the controller would check it:
/// the API server's own validation (unknown fields, schema: a dry run), then the
/// controller's (durations, strategies, manifests). Returns it and its namespace.
async fn read_file(
    hub: &HubClient,
    path: &std::path::Path,
    name: Option<&str>,
) -> Result<(ManifestWorkReplicaSet, String)> {
    let at = |e: CliError| CliError::new(e.code, format!("{}: {}", path.display(), e.message));
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::error(format!("cannot read {}: {e}", path.display())))?;
    let mut raw: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| CliError::error(format!("{}: not YAML or JSON: {e}", path.display())))?;
    let name = name
        .map(str::to_string)
        .or_else(|| {
            raw.pointer("/metadata/name")
                .and_then(|v| v.as_str())
                .map(str::to_string)
        })
        .ok_or_else(|| CliError::usage(format!("{}: metadata.name is missing", path.display())))?;
    let ns = raw
        .pointer("/metadata/namespace")
        .and_then(|v| v.as_str())
        .map_or_else(|| hub.namespace.clone(), str::to_string);
    // What `kubectl apply` would send: the server sets the rest of the metadata, and a
    // file saved from `kubectl get -o yaml` carries it.
    let kept = ["labels", "annotations"].map(|k| (k, raw["metadata"][k].clone()));
    raw["metadata"] = serde_json::json!({"name": name, "namespace": ns});
    for (k, v) in kept.into_iter().filter(|(_, v)| !v.is_null()) {
        raw["metadata"][k] = v;
    }
    if let Some(o) = raw.as_object_mut() {
        o.remove("status");
    }
    if let Some(why) = hub.server_objection(&ns, &raw).await.map_err(at)? {
        eprintln!(
            "note: not checked by the API server ({why}); checked as the controller checks only"
        );
    }
    let m: ManifestWorkReplicaSet = serde_json::from_value(raw).map_err(|e| {
        CliError::error(format!(
            "{}: not a ManifestWorkReplicaSet: {e}",
            path.display()
        ))
    })?;
    if let Err(invalid) = validate::validate(&m.spec, DEFAULT_MANIFEST_SIZE_LIMIT) {
        return Err(CliError::new(
            Exit::Degraded,
            format!(
                "{}: the controller would mark it Invalid: {invalid}",
                path.display()
            ),
        ));
    }
    Ok((m, ns))
}

pub async fn run(hub: &HubClient, out: &Out, a: &PlanArgs) -> Result<Exit> {
    let Some(path) = &a.file else {
        let Some(name) = &a.name else {
            return Err(CliError::usage(
                "name an MWRS or give a file with -f (see --help)",
            ));
        };
        return show(hub, out, &hub.get(name).await?, a).await;
    };
    let (m, ns) = read_file(hub, path, a.name.as_deref()).await?;
    // The file names its namespace: read the hub there.
    let scoped = HubClient {
        client: hub.client.clone(),
        namespace: ns.clone(),
        url: hub.url.clone(),
    };
    let name = m.name_any();
    let on_hub = scoped
        .mwrs_api()
        .get_opt(&name)
        .await
        .map_err(|e| CliError::kube(&format!("reading manifestworkreplicaset {name}"), e))?;
    show(&scoped, out, &overlay(m, on_hub, &ns), a).await
}

async fn show(
    hub: &HubClient,
    out: &Out,
    m: &ManifestWorkReplicaSet,
    a: &PlanArgs,
) -> Result<Exit> {
    let failing: BTreeSet<String> = a.fail.iter().cloned().collect();
    let (p, note) = preview_now(hub, m, &failing, Compat::with_quirks(&a.upstream_quirks)).await?;
    if out.structured() {
        out.print_structured(&PlanOut {
            note,
            ..plan_out(m, &p, &failing)
        })?;
    } else {
        print!("{}", render(out, m, &p, &failing));
        if let Some(note) = note {
            println!("{note}");
        }
    }
    Ok(Exit::Ok)
}

/// The plan of `m` as `rollout plan -o json` prints it, from the hub's state now.
pub async fn plan(hub: &HubClient, m: &ManifestWorkReplicaSet) -> Result<PlanOut> {
    let none = BTreeSet::new();
    let (p, note) = preview_now(hub, m, &none, Compat::default()).await?;
    Ok(PlanOut {
        note,
        ..plan_out(m, &p, &none)
    })
}

/// The engine's preview of `m` from the hub's state now, with `failing` failing, and what
/// it had to assume when the user may not read the ManifestWorks.
async fn preview_now(
    hub: &HubClient,
    m: &ManifestWorkReplicaSet,
    failing: &BTreeSet<String>,
    compat: Compat,
) -> Result<(Preview, Option<String>)> {
    let read = hub.snapshot(m).await?;
    let now = Timestamp::now();
    let (snap, note) = match &read.works_hidden {
        None => (read.snapshot, None),
        Some(why) => (
            assume_settled(&read.snapshot, now),
            Some(assumption(m, why)),
        ),
    };
    let desired: BTreeSet<&str> = snap
        .placements
        .iter()
        .flat_map(|p| p.groups().into_iter().flat_map(|g| g.clusters()))
        .collect();
    let strangers: Vec<String> = failing
        .iter()
        .filter(|c| !desired.contains(c.as_str()))
        .cloned()
        .collect();
    if !strangers.is_empty() {
        return Err(CliError::usage(format!(
            "--fail names clusters no placement of mwrs/{} selects: {}",
            m.name_any(),
            strangers.join(", ")
        )));
    }
    let mut cfg = PreviewConfig::default();
    cfg.plan.compat = compat;
    Ok((preview(&snap, failing, now, &cfg), note))
}

fn plan_out(m: &ManifestWorkReplicaSet, p: &Preview, failing: &BTreeSet<String>) -> PlanOut {
    PlanOut {
        name: m.name_any(),
        namespace: m.namespace().unwrap_or_default(),
        update_revision: p.update_revision.clone(),
        current_revision: p.current_revision.clone(),
        desired: p.desired,
        failing: failing.iter().cloned().collect(),
        waves: p
            .waves
            .iter()
            .map(|w| WaveOut {
                wave: w.number,
                at_seconds: w.at.as_secs(),
                action: match w.kind {
                    WaveKind::Rollout => "rollout",
                    WaveKind::Revert => "revert",
                },
                revision: w.revision.clone(),
                clusters: w.clusters.iter().map(|(c, _)| c.clone()).collect(),
            })
            .collect(),
        end: end_word(&p.end),
        message: p.message.clone(),
        failed: p.failed.clone(),
        duration_seconds: p.duration.as_secs(),
        summary: end_line(p).1,
        note: None,
    }
}

/// What a preview without the ManifestWorks takes for the fleet's state.
fn assumption(m: &ManifestWorkReplicaSet, why: &str) -> String {
    let status = m.status.clone().unwrap_or_default();
    let what = match (&status.current_revision, &status.update_revision) {
        (None, _) => "this plan assumes no cluster runs any revision yet".to_string(),
        (Some(c), u) if u.as_ref() == Some(c) => {
            format!("this plan assumes every cluster runs revision {c} and has settled")
        }
        (Some(c), _) => format!(
            "this plan assumes every cluster runs the stable revision {c}; the rollout in \
             progress may have moved some already"
        ),
    };
    hidden_note(&what, why)
}

fn render(
    out: &Out,
    m: &ManifestWorkReplicaSet,
    p: &Preview,
    failing: &BTreeSet<String>,
) -> String {
    let mut s = String::new();
    let strategies: Vec<String> = m
        .spec
        .placement_refs
        .iter()
        .map(|r| {
            let kind = r
                .rollout_strategy
                .as_ref()
                .and_then(|s| s.type_.clone())
                .unwrap_or_else(|| "All".into());
            format!("{} ({kind})", r.name)
        })
        .collect();
    s.push_str(&format!(
        "{}: revision {} over {} clusters; placements {}\n",
        out.paint(Paint::Bold, &format!("Plan for mwrs/{}", m.name_any())),
        p.update_revision.as_deref().unwrap_or("<none>"),
        p.desired,
        strategies.join(", ")
    ));
    if !failing.is_empty() {
        let names: Vec<String> = failing.iter().cloned().collect();
        s.push_str(&format!(
            "assuming these clusters fail: {}\n",
            few(&names, 10)
        ));
    }
    s.push('\n');
    if p.waves.is_empty() {
        s.push_str("no cluster gets a new revision\n");
    } else {
        let mut t = Table::new(&["WAVE", "AT", "ACTION", "REVISION", "COUNT", "CLUSTERS"]);
        let n = if out.format == Format::Wide {
            usize::MAX
        } else {
            NAMES_PER_WAVE
        };
        for w in &p.waves {
            let names: Vec<String> = w.clusters.iter().map(|(c, _)| c.clone()).collect();
            t.row(vec![
                w.number.to_string(),
                format!("+{}", duration(w.at)),
                match w.kind {
                    WaveKind::Rollout => "rollout".into(),
                    WaveKind::Revert => out.paint(Paint::Red, "revert"),
                },
                w.revision.clone(),
                names.len().to_string(),
                few(&names, n),
            ]);
        }
        s.push_str(&t.render());
    }
    s.push('\n');
    let (paint, line) = end_line(p);
    let line = match paint {
        Some(colour) => out.paint(colour, &line),
        None => line,
    };
    s.push_str(&line);
    s.push('\n');
    s
}

/// How the plan ends, in a line, with the colour the table gives it.
fn end_line(p: &Preview) -> (Option<Paint>, String) {
    let after = duration(p.duration);
    let m = &p.message;
    match &p.end {
        End::Complete => (
            Some(Paint::Green),
            format!("Complete after +{after}: every cluster runs the update revision"),
        ),
        End::NothingToDo => (
            None,
            "Nothing to roll out: the update revision is already complete".into(),
        ),
        End::Stopped { reason } => (
            Some(Paint::Red),
            format!("Stops at +{after} ({reason}): {m}; no new cluster starts"),
        ),
        End::Aborted { to } => (
            Some(Paint::Red),
            format!("Aborts at +{after}: every cluster reverted to revision {to}; {m}"),
        ),
        End::AbortFailed => (Some(Paint::Red), format!("Abort fails at +{after}: {m}")),
        End::Paused => (Some(Paint::Yellow), format!("Paused: {m}")),
        End::Invalid => (Some(Paint::Red), format!("Invalid spec: {m}")),
        End::Stuck => (None, format!("Waits at +{after}: {m}")),
        End::Unfinished => (
            None,
            format!("Still going after +{after} (preview step limit): {m}"),
        ),
    }
}
