//! `get [NAME]`: one line per MWRS with its counters, revisions and rollout state.

use jiff::Timestamp;
use kube::ResourceExt;
use mwrs_api::mwrs::ManifestWorkReplicaSet;

use crate::args::{Format, GetArgs, Global};
use crate::error::{Exit, Result};
use crate::hub::HubClient;
use crate::output::{Out, Table, age, paint_state};
use crate::state::abort_line;
use mwrs_engine::phase::{phase, progressing};

pub async fn run(hub: &HubClient, g: &Global, out: &Out, a: &GetArgs) -> Result<Exit> {
    let items = hub.list_mwrs(a.name.as_deref(), g.all_namespaces).await?;
    if out.structured() {
        match (&a.name, items.first()) {
            (Some(_), Some(m)) => out.print_structured(&with_kind(m))?,
            _ => out.print_structured(&serde_json::json!({
                "apiVersion": "v1",
                "kind": "List",
                "items": items.iter().map(with_kind).collect::<Vec<_>>(),
            }))?,
        }
        return Ok(Exit::Ok);
    }
    if items.is_empty() {
        if g.all_namespaces {
            eprintln!("No resources found");
        } else {
            eprintln!("No resources found in {} namespace.", hub.namespace);
        }
        return Ok(Exit::Ok);
    }
    print!("{}", table(out, &items, g.all_namespaces, Timestamp::now()));
    Ok(Exit::Ok)
}

/// The object with apiVersion and kind, as kubectl prints it.
fn with_kind(m: &ManifestWorkReplicaSet) -> serde_json::Value {
    let mut v = serde_json::to_value(m).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "apiVersion".into(),
            "work.open-cluster-management.io/v1alpha1".into(),
        );
        o.insert("kind".into(), "ManifestWorkReplicaSet".into());
    }
    v
}

pub fn table(
    out: &Out,
    items: &[ManifestWorkReplicaSet],
    namespaces: bool,
    now: Timestamp,
) -> String {
    let wide = out.format == Format::Wide;
    let mut header = vec![];
    if namespaces {
        header.push("NAMESPACE");
    }
    header.extend([
        "NAME",
        "PLACEMENTS",
        "DESIRED",
        "UPDATED",
        // Available on the target revision (rules §10.8's summary.available): the update
        // revision, or the stable one while an abort reverts to it. Not "available on
        // any revision", as a Deployment's AVAILABLE would read.
        "ON-TARGET",
        "CURRENT",
        "UPDATE",
        "STATUS",
        "AGE",
    ]);
    if wide {
        header.extend(["REASON", "MESSAGE", "LAST-ABORT"]);
    }
    let mut t = Table::new(&header);
    for m in items {
        let status = m.status.clone().unwrap_or_default();
        let s = status.summary;
        let (st, _) = phase(m);
        let mut row = vec![];
        if namespaces {
            row.push(m.namespace().unwrap_or_default());
        }
        let placements: Vec<&str> = m
            .spec
            .placement_refs
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        row.extend([
            m.name_any(),
            placements.join(","),
            s.desired_total.to_string(),
            s.updated.to_string(),
            s.available.to_string(),
            status
                .current_revision
                .clone()
                .unwrap_or_else(|| "<none>".into()),
            status
                .update_revision
                .clone()
                .unwrap_or_else(|| "<none>".into()),
            paint_state(out, st.as_str()),
            age(m.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
        ]);
        if wide {
            let (_, reason, message) = progressing(m).unwrap_or(("", "", ""));
            let last_abort = status
                .last_abort
                .as_ref()
                .map_or_else(|| "<none>".into(), |a| abort_line(a, now));
            row.extend([reason.to_string(), message.to_string(), last_abort]);
        }
        t.row(row);
    }
    t.render()
}
