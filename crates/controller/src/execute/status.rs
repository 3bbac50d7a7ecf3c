//! The status: a merge patch guarded by the resourceVersion read, written whatever the
//! writes did; the abort it records counted, and the abort it finds complete timed.

use super::*;

/// Writes `new` when it differs from the status read, guarded by `version` (the version
/// it was computed from); returns the version the write produced, if any.
pub(super) async fn write_status(
    on: &On<'_>,
    new: Option<&ManifestWorkReplicaSetStatus>,
    version: Option<String>,
    tally: &mut Tally,
) -> Result<Option<String>> {
    let Some(new) = new else { return Ok(None) };
    let ser = |v: &ManifestWorkReplicaSetStatus| {
        serde_json::to_value(v).map_err(|source| Error::Serialize {
            what: "status",
            source,
        })
    };
    let old = ser(&on.mwrs.status.clone().unwrap_or_default())?;
    let Some(body) = patch::status(&old, &ser(new)?, version.as_deref()) else {
        return Ok(None);
    };
    on.ctx.may_write("patch", "status")?;
    let r = on
        .api
        .patch_status(&on.name, &patch_params(), &Patch::Merge(&body))
        .await
        .map_err(|e| Error::kube(format!("status of {}", on.key()), e));
    on.ctx.metrics.write("status", "patch", result_label(&r));
    match r {
        Ok(obj) => {
            tally.record(Ok(()));
            Ok(obj.resource_version())
        }
        Err(e) => {
            tally.record(Err(e));
            Ok(None)
        }
    }
}

/// Counts an abort when the planned status records a new one (a typed value, not an
/// event reason).
pub(super) fn count_abort(
    metrics: &Metrics,
    old: Option<&AbortRecord>,
    planned: Option<&ManifestWorkReplicaSetStatus>,
) {
    let Some(new) = planned.and_then(|s| s.last_abort.as_ref()) else {
        return;
    };
    if old == Some(new) {
        return;
    }
    let outcome = if new.reverted_to.is_some() {
        "reverted"
    } else {
        "stopped"
    };
    metrics
        .aborts
        .get_or_create(&AbortLabels {
            trigger: new.trigger.clone(),
            outcome: outcome.into(),
        })
        .inc();
}

/// Observes how long an abort took to bring its clusters back to the stable revision,
/// once the status saying it completed is written (so once per abort).
pub(super) fn time_back_to_stable(metrics: &Metrics, timed: Option<&BackToStable>) {
    let Some(t) = timed else { return };
    metrics.abort_to_stable.observe(t.whole.as_secs_f64());
    for c in &t.clusters {
        metrics.abort_cluster_to_stable.observe(c.as_secs_f64());
    }
}
