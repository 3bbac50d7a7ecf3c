//! Cluster rollout status from ManifestWork conditions (rules §3.9 to §3.15).
//!
//! The first twelve cases carry the names of upstream's `TestClusterRolloutStatusFunc`
//! (ocm `manifestworkreplicaset_deploy_test.go`) with the same inputs and results, except
//! one deliberate deviation (rules §10.16): "no progressing condition - should return
//! ToApply" returns Progressing here, because with no Progressing rule configured the
//! Available condition decides (upstream issue #1375).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use jiff::Timestamp;
use mwrs_api::labels;
use mwrs_engine::rollout::RolloutStatus;
use mwrs_engine::work::{CondView, WorkView, cluster_status};

fn t(s: &str) -> Timestamp {
    format!("2026-01-01T00:{s}Z").parse().unwrap()
}

fn cond(type_: &str, status: &str, generation: i64, at: &str) -> CondView {
    CondView {
        type_: type_.into(),
        status: status.into(),
        observed_generation: Some(generation),
        last_transition_time: t(at),
    }
}

fn work(generation: i64, conditions: Vec<CondView>) -> WorkView {
    WorkView {
        cluster: "c1".into(),
        name: "default.app".into(),
        uid: None,
        generation,
        resource_version: None,
        labels: Arc::default(),
        annotations: Arc::default(),
        spec_digest: None,
        created: None,
        deleting: false,
        conditions: Arc::new(conditions),
        status_seen: None,
        applied_note: None,
        written_generation: None,
        status_error: None,
        update_refused: false,
    }
}

fn status(w: &WorkView) -> (RolloutStatus, Option<Timestamp>) {
    cluster_status(w)
}

#[test]
fn no_progressing_condition_deviation_uses_available() {
    // Upstream: ToApply. Here: Applied but not yet Available → Progressing since Applied.
    let w = work(1, vec![cond("Applied", "True", 1, "01:00")]);
    assert_eq!(status(&w), (RolloutStatus::Progressing, Some(t("01:00"))));
    let w = work(
        1,
        vec![
            cond("Applied", "True", 1, "01:00"),
            cond("Available", "True", 1, "02:00"),
        ],
    );
    assert_eq!(status(&w), (RolloutStatus::Succeeded, Some(t("02:00"))));
    let w = work(
        1,
        vec![
            cond("Applied", "True", 1, "01:00"),
            cond("Degraded", "True", 1, "03:00"),
        ],
    );
    assert_eq!(status(&w), (RolloutStatus::Failed, Some(t("03:00"))));
}

#[test]
fn progressing_condition_with_unobserved_generation_returns_to_apply() {
    let w = work(
        2,
        vec![
            cond("Applied", "True", 2, "01:00"),
            cond("Progressing", "False", 1, "01:00"),
        ],
    );
    assert_eq!(status(&w).0, RolloutStatus::ToApply);
}

#[test]
fn no_applied_condition_with_stale_degraded_returns_to_apply() {
    let w = work(2, vec![cond("Degraded", "True", 1, "01:00")]);
    assert_eq!(status(&w).0, RolloutStatus::ToApply);
}

#[test]
fn stale_degraded_with_current_progressing_returns_to_apply() {
    let w = work(
        2,
        vec![
            cond("Applied", "True", 2, "01:00"),
            cond("Progressing", "True", 2, "01:00"),
            cond("Degraded", "True", 1, "01:00"),
        ],
    );
    assert_eq!(status(&w).0, RolloutStatus::ToApply);
}

#[test]
fn progressing_true_with_current_generation_should_return_progressing() {
    let w = work(
        1,
        vec![
            cond("Applied", "True", 1, "01:00"),
            cond("Progressing", "True", 1, "02:00"),
        ],
    );
    assert_eq!(status(&w), (RolloutStatus::Progressing, Some(t("02:00"))));
}

#[test]
fn progressing_true_and_degraded_true_should_return_failed() {
    let w = work(
        1,
        vec![
            cond("Applied", "True", 1, "01:00"),
            cond("Progressing", "True", 1, "02:00"),
            cond("Degraded", "True", 1, "03:00"),
        ],
    );
    assert_eq!(status(&w), (RolloutStatus::Failed, Some(t("03:00"))));
}

#[test]
fn progressing_false_should_return_succeeded() {
    let w = work(
        1,
        vec![
            cond("Applied", "True", 1, "01:00"),
            cond("Progressing", "False", 1, "04:00"),
        ],
    );
    assert_eq!(status(&w), (RolloutStatus::Succeeded, Some(t("04:00"))));
}

#[test]
fn progressing_false_with_degraded_true_should_return_succeeded() {
    let w = work(
        1,
        vec![
            cond("Applied", "True", 1, "01:00"),
            cond("Progressing", "False", 1, "04:00"),
            cond("Degraded", "True", 1, "03:00"),
        ],
    );
    assert_eq!(status(&w), (RolloutStatus::Succeeded, Some(t("04:00"))));
}

#[test]
fn progressing_unknown_status_should_return_progressing() {
    let w = work(
        1,
        vec![
            cond("Applied", "True", 1, "01:00"),
            cond("Progressing", "Unknown", 1, "05:00"),
        ],
    );
    assert_eq!(status(&w), (RolloutStatus::Progressing, Some(t("05:00"))));
}

#[test]
fn work_applied_status_false_returns_to_apply() {
    let w = work(
        1,
        vec![
            cond("Applied", "False", 1, "01:00"),
            cond("Progressing", "False", 1, "01:00"),
        ],
    );
    assert_eq!(status(&w).0, RolloutStatus::ToApply);
}

#[test]
fn work_applied_status_unknown_returns_to_apply() {
    let w = work(
        1,
        vec![
            cond("Applied", "Unknown", 1, "01:00"),
            cond("Progressing", "False", 1, "01:00"),
        ],
    );
    assert_eq!(status(&w).0, RolloutStatus::ToApply);
}

#[test]
fn work_applied_with_stale_observed_generation_returns_to_apply() {
    let w = work(
        3,
        vec![
            cond("Applied", "True", 2, "01:00"),
            cond("Progressing", "False", 3, "01:00"),
        ],
    );
    assert_eq!(status(&w).0, RolloutStatus::ToApply);
}

#[test]
fn progressing_with_old_observed_generation_but_newer_work_applied_returns_to_apply() {
    let w = work(
        3,
        vec![
            cond("Applied", "True", 3, "01:00"),
            cond("Progressing", "True", 2, "01:00"),
        ],
    );
    assert_eq!(status(&w).0, RolloutStatus::ToApply);
}

#[test]
fn condition_without_observed_generation_is_stale() {
    let mut applied = cond("Applied", "True", 1, "01:00");
    applied.observed_generation = None;
    assert_eq!(status(&work(1, vec![applied])).0, RolloutStatus::ToApply);
}

#[test]
fn time_is_never_before_the_revision_was_written() {
    // Progressing stayed False across the generation bump and kept its old transition
    // time: the soak must start when the controller wrote the revision (issue #1237).
    let mut w = work(
        2,
        vec![
            cond("Applied", "True", 2, "01:00"),
            cond("Progressing", "False", 2, "01:00"),
        ],
    );
    Arc::make_mut(&mut w.annotations).insert(
        labels::REVISION_APPLIED_AT.into(),
        "2026-01-01T00:30:00Z".into(),
    );
    assert_eq!(status(&w), (RolloutStatus::Succeeded, Some(t("30:00"))));
    // A later transition wins over the write time.
    Arc::make_mut(&mut w.conditions)[1].last_transition_time = t("45:00");
    assert_eq!(status(&w), (RolloutStatus::Succeeded, Some(t("45:00"))));
}
