//! Shared pieces of the hub integration tests: an in-process controller scoped to the
//! test's namespace, and status readers.

#![allow(dead_code)]

use std::time::Duration;

use kube::ResourceExt;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_controller::{Config, Shared};
use mwrs_fleet::{Agent, AgentConfig, AgentHandle, Behaviour};
use mwrs_testsupport::{TaskGuard, TestHub, conditions};

/// Default deadline of a wait in these tests.
pub const WAIT: Duration = Duration::from_secs(60);

/// Runs a work agent for every cluster of the test that finishes each revision `after`
/// it sees it.
pub fn start_agent_succeeding(hub: &TestHub, after: Duration) -> AgentHandle {
    Agent::start(
        hub.client.clone(),
        AgentConfig::new(hub.clusters.clone()).behaviour(move |_| Behaviour::Succeed { after }),
    )
}

/// Runs the controller in this process for the test's namespace (tests run in parallel
/// on one hub; each controller only handles its own test's MWRS).
pub fn start_controller(hub: &TestHub) -> TaskGuard {
    let config = Config {
        namespace: Some(hub.namespace.clone()),
        ..Config::default()
    };
    let client = hub.client.clone();
    TaskGuard::spawn(async move {
        mwrs_controller::run(client, config, Shared::default(), std::future::pending()).await
    })
}

pub fn status_field(
    m: &ManifestWorkReplicaSet,
    f: impl Fn(&mwrs_api::mwrs::ManifestWorkReplicaSetStatus) -> Option<String>,
) -> Option<String> {
    m.status.as_ref().and_then(f)
}

pub fn current(m: &ManifestWorkReplicaSet) -> Option<String> {
    status_field(m, |s| s.current_revision.clone())
}

pub fn update(m: &ManifestWorkReplicaSet) -> Option<String> {
    status_field(m, |s| s.update_revision.clone())
}

/// One line describing the MWRS status, for timeout messages.
pub fn describe(m: &ManifestWorkReplicaSet) -> String {
    let s = m.status.clone().unwrap_or_default();
    format!(
        "{}: current={:?} update={:?} aborted={:?} summary={:?} conditions={:?}",
        m.name_any(),
        s.current_revision,
        s.update_revision,
        s.aborted_time.map(|t| t.0.to_string()),
        s.summary,
        conditions(m)
    )
}

/// Progressing reason, if any.
pub fn progressing(m: &ManifestWorkReplicaSet) -> Option<(String, String)> {
    conditions(m)
        .get("Progressing")
        .map(|(s, r, _)| (s.clone(), r.clone()))
}
