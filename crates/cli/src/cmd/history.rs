//! `rollout history NAME [--revision N]`: the stored revisions (ControllerRevisions owned by
//! the MWRS), how many clusters carry each now and which role each plays; with
//! `--revision` one revision's template.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::api::Api;
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::work::ManifestWork;
use mwrs_engine::revision::RevisionView;
use serde::Serialize;

use crate::args::HistoryArgs;
use crate::error::{CliError, Exit, Result};
use crate::hub::{HubClient, Visible, forbidden, hidden_note, owner_params};
use crate::output::{Out, Table, age, to_yaml};

/// One line of the history.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub revision: i64,
    pub hash: String,
    pub name: String,
    pub created: Option<Timestamp>,
    /// ManifestWorks carrying it; None when the user may not list them.
    pub clusters: Option<usize>,
    pub role: String,
    pub change_cause: Option<String>,
}

/// `current`, `update` or `held` (the update revision while an abort holds it).
pub fn role(m: &ManifestWorkReplicaSet, hash: &str) -> String {
    let s = m.status.clone().unwrap_or_default();
    let current = s.current_revision.as_deref() == Some(hash);
    let update = s.update_revision.as_deref() == Some(hash);
    match (current, update) {
        (true, _) => "current".into(),
        (false, true) if s.aborted_time.is_some() => "held".into(),
        (false, true) => "update".into(),
        _ => String::new(),
    }
}

/// A revision named by number or hash, among `history`.
pub fn find<'a>(history: &'a [RevisionView], key: &str) -> Option<&'a RevisionView> {
    match key.parse::<i64>() {
        Ok(n) => history.iter().find(|r| r.revision == n),
        Err(_) => history.iter().find(|r| r.hash == key || r.name == key),
    }
}

/// "revision 3 not found: mwrs/app has revisions 1, 2, 4".
pub fn unknown(m: &ManifestWorkReplicaSet, history: &[RevisionView], key: &str) -> CliError {
    let have: Vec<String> = history.iter().map(|r| r.revision.to_string()).collect();
    CliError::not_found(format!(
        "revision {key} not found: mwrs/{} has {}",
        m.metadata.name.as_deref().unwrap_or_default(),
        if have.is_empty() {
            "no revisions yet".to_string()
        } else {
            format!("revisions {}", have.join(", "))
        }
    ))
}

/// How many owned ManifestWorks carry each revision hash (metadata only: cheap at scale);
/// the refusal instead when the user may not list ManifestWorks.
pub async fn clusters_per_revision(
    hub: &HubClient,
    m: &ManifestWorkReplicaSet,
) -> Result<Visible<BTreeMap<String, usize>>> {
    let api: Api<ManifestWork> = Api::all(hub.client.clone());
    let list = match api.list_metadata(&owner_params(m)).await {
        Ok(list) => list,
        Err(e) => return forbidden(e, "listing manifestworks").map(Visible::Forbidden),
    };
    let mut out = BTreeMap::new();
    for w in list.items {
        if let Some(h) = w
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::CONTROLLER_HASH))
        {
            *out.entry(h.clone()).or_insert(0) += 1;
        }
    }
    Ok(Visible::Yes(out))
}

/// The lines of the history of `m`, and why CLUSTERS is not counted when the user may not
/// list ManifestWorks.
pub async fn entries(
    hub: &HubClient,
    m: &ManifestWorkReplicaSet,
    history: &[RevisionView],
) -> Result<(Vec<Entry>, Option<String>)> {
    let (counts, hidden) = match clusters_per_revision(hub, m).await? {
        Visible::Yes(c) => (Some(c), None),
        Visible::Forbidden(why) => (None, Some(why)),
    };
    let entries: Vec<Entry> = history
        .iter()
        .map(|r| Entry {
            revision: r.revision,
            hash: r.hash.clone(),
            name: r.name.clone(),
            created: r.created,
            clusters: counts
                .as_ref()
                .map(|c| c.get(&r.hash).copied().unwrap_or(0)),
            role: role(m, &r.hash),
            change_cause: r.change_cause.clone(),
        })
        .collect();
    Ok((entries, hidden))
}

pub async fn run(hub: &HubClient, out: &Out, a: &HistoryArgs) -> Result<Exit> {
    let m = hub.get(&a.name).await?;
    let history = hub.history(&m).await?;
    if let Some(key) = &a.revision {
        let r = find(&history, key).ok_or_else(|| unknown(&m, &history, key))?;
        if out.structured() {
            out.print_structured(&r.template)?;
        } else {
            println!(
                "mwrs/{} revision {} ({}){}",
                a.name,
                r.revision,
                r.hash,
                r.change_cause
                    .as_deref()
                    .map(|c| format!(": {c}"))
                    .unwrap_or_default()
            );
            print!("{}", to_yaml(&r.template)?);
        }
        return Ok(Exit::Ok);
    }
    let (entries, hidden) = entries(hub, &m, &history).await?;
    if out.structured() {
        out.print_structured(&entries)?;
        return Ok(Exit::Ok);
    }
    if entries.is_empty() {
        eprintln!("mwrs/{} has no revisions yet", a.name);
        return Ok(Exit::Ok);
    }
    let now = Timestamp::now();
    let mut t = Table::new(&[
        "REVISION",
        "HASH",
        "CREATED",
        "CLUSTERS",
        "ROLE",
        "CHANGE-CAUSE",
    ]);
    for e in &entries {
        t.row(vec![
            e.revision.to_string(),
            e.hash.clone(),
            age(e.created, now),
            e.clusters.map_or_else(|| "-".into(), |n| n.to_string()),
            e.role.clone(),
            e.change_cause.clone().unwrap_or_else(|| "<none>".into()),
        ]);
    }
    print!("{}", t.render());
    if let Some(why) = hidden {
        eprintln!("{}", hidden_note("CLUSTERS is not counted", &why));
    }
    Ok(Exit::Ok)
}
