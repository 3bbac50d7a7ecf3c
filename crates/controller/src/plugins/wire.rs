//! The requests, as the gRPC API spells them, and what an error status says.

use super::*;

pub(super) fn api_target(about: &MwrsRef, t: &CallTarget) -> (api::Target, api::Revisions) {
    let target = api::Target {
        mwrs_namespace: about.namespace.clone(),
        mwrs_name: about.name.clone(),
        mwrs_uid: about.uid.clone(),
        placement: t.placement.clone(),
        total_clusters: i32::try_from(t.total_clusters).unwrap_or(i32::MAX),
    };
    let revisions = api::Revisions {
        current: t.current.clone().unwrap_or_default(),
        update: t.update.clone(),
    };
    (target, revisions)
}

pub(super) fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    }
}

/// ValidateRolloutCompletion's (or ValidateAbortCompletion's) request for `v`.
pub(super) fn validate_request(about: &MwrsRef, v: &Validation) -> api::ValidateRequest {
    let (target, revisions) = api_target(about, &v.target);
    api::ValidateRequest {
        target: Some(target),
        revisions: Some(revisions),
        cluster: v.cluster.clone(),
        revision: v.revision.clone(),
        manifest_work: v.manifest_work.clone(),
        generation: v.generation,
        since: v.since.map(timestamp),
    }
}

/// MutateManifestWork's request after `b`, with the template's `spec_json`.
pub(super) fn mutate_request(about: &MwrsRef, b: &Begin, spec_json: Vec<u8>) -> api::MutateRequest {
    let (target, revisions) = api_target(about, &b.target);
    api::MutateRequest {
        target: Some(target),
        revisions: Some(revisions),
        cluster: b.cluster.clone(),
        revision: b.revision.clone(),
        spec_json,
        aborting: b.aborting,
    }
}

/// The request of BeginRollout, ProgressRollout or BeginAbort.
pub(super) fn rollout_request(
    about: &MwrsRef,
    t: &CallTarget,
    cluster: &str,
    clusters: &[ClusterState],
    aborting: bool,
) -> api::RolloutRequest {
    let (target, revisions) = api_target(about, t);
    api::RolloutRequest {
        target: Some(target),
        revisions: Some(revisions),
        cluster: cluster.to_string(),
        clusters: clusters.iter().map(cluster_state).collect(),
        aborting,
    }
}

pub(super) fn cluster_state(c: &ClusterState) -> api::ClusterState {
    use api::ClusterRolloutState as S;
    let state = match c.status {
        RolloutStatus::ToApply => S::ToApply,
        RolloutStatus::Progressing => S::Progressing,
        RolloutStatus::Validating => S::Validating,
        RolloutStatus::Succeeded => S::Succeeded,
        RolloutStatus::Failed => S::Failed,
        RolloutStatus::TimeOut => S::Timeout,
        RolloutStatus::Skip => S::Skip,
    };
    api::ClusterState {
        cluster: c.cluster.to_string(),
        state: state.into(),
        revision: c.revision.as_deref().unwrap_or_default().to_string(),
        since: c.since.map(timestamp),
    }
}

/// Is `s` the plugin's answer about this one call (it works, but refuses or cannot do
/// it)? Else the plugin does not work ([`mwrs_plugin::client::is_down`]).
pub(super) fn is_about_the_call(s: &tonic::Status) -> bool {
    !mwrs_plugin::client::is_down(s)
}

/// `CODE: message` of a gRPC status, in a line, cut to [`PLUGIN_TEXT_MAX`].
pub(super) fn status_line(s: &tonic::Status) -> String {
    cut(mwrs_plugin::client::status_text(s), PLUGIN_TEXT_MAX)
}
