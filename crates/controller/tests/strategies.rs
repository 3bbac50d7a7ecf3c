//! Pacing of the rollout strategies on the real test hub: All starts every cluster at
//! once; Progressive never has more clusters in flight on the new revision than
//! maxConcurrency, given as an int or as a percent. In flight = the ManifestWork carries
//! the revision and its agent has not reported it done; counted after every event of a
//! ManifestWork watch, so every state the hub went through is seen.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{InFlight, Timeline, assert_works_on, start_agent_succeeding, update, wait_complete};
use mwrs_testsupport::{configmap_template, mwrs};
use serde_json::{Value, json};

const CLUSTERS: usize = 5;

/// One MWRS per strategy on the same five clusters, all rolling out together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategies_pace_the_rollout() {
    let Some((hub, _controller)) = common::started("pacing", CLUSTERS).await else {
        return;
    };
    // Long enough that a wave is still in flight when the controller could start more.
    let _agent = start_agent_succeeding(&hub, Duration::from_millis(1500));

    // (name, strategy, most clusters allowed in flight, least expected at the peak)
    let cases: [(&str, Value, usize, usize); 3] = [
        ("all", json!({"type": "All"}), CLUSTERS, CLUSTERS),
        (
            "int",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": 2}}),
            2,
            2,
        ),
        // ceil(50% of 5) = 3.
        (
            "percent",
            json!({"type": "Progressive", "progressive": {"maxConcurrency": "50%"}}),
            3,
            3,
        ),
    ];
    let mut watches = Vec::new();
    for (name, strategy, _, _) in &cases {
        let in_flight = InFlight::watch(&hub, name).await;
        let timeline = Timeline::watch(&hub, name).await;
        hub.create_mwrs(&mwrs(
            name,
            configmap_template("v1"),
            &[("p", strategy.clone())],
        ))
        .await;
        watches.push((in_flight, timeline));
    }
    for ((name, _, most, least), (in_flight, timeline)) in cases.iter().zip(&watches) {
        let m = wait_complete(&hub, name, None).await;
        let hash = update(&m).unwrap();
        assert_works_on(&hub, name, &hub.clusters, &hash).await;
        let peak = in_flight.max_on(&hash);
        eprintln!("MEASURED {name}: at most {peak} clusters in flight");
        assert!(
            peak <= *most,
            "{name}: {peak} clusters in flight, more than {most}"
        );
        assert!(
            peak >= *least,
            "{name}: only {peak} clusters in flight at once, expected {least}"
        );
        timeline
            .wait_in_order(&["NewRevisionCreated", "NewManifestWorkAvailable"])
            .await;
    }
}
