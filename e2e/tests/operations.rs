//! What a user does and sees with upstream's agents, through the `mwrs` binary: an apply
//! error reported with the agent's own words and aborted at `progressDeadline`; undo to
//! revision 1; deletion that removes the objects from the spokes.
//!
//! Needs the e2e environment (`. "$(e2e/env.sh up)"`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use mwrs_e2e::{Env, WAIT, configmap_template};
use mwrs_testsupport::wait_for;
use serde_json::json;

/// A template the agent cannot apply: the ConfigMap's namespace does not exist on the
/// spokes.
fn unappliable(name: &str) -> serde_json::Value {
    json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "no-such-namespace"},
        "data": {"version": "broken"}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_error_is_shown_in_the_agents_words_and_aborted() {
    let Some(env) = Env::from_env("applyerr").await else {
        return;
    };
    env.canary_placement("p").await;
    let _controller = env.start_controller();
    let cm = env.hub.namespace.clone();
    let strategy = json!({"type": "All", "all": {"progressDeadline": "15s"},
        "failureStrategy": "AbortAll"});
    env.create_app(configmap_template(&cm, "v1"), strategy)
        .await;
    env.hub.set_template("app", unappliable(&cm)).await;

    // The manifest's own words (upstream's agent says only "Failed to apply manifest
    // work" at the top) reach `mwrs rollout status`.
    let words = "namespaces \"no-such-namespace\" not found";
    wait_for(
        "the agent's apply error in `mwrs rollout status`",
        WAIT,
        || async {
            let (code, out, err) = env.mwrs(&["rollout", "status", "app"]);
            if out.contains(words) {
                Ok(out)
            } else {
                Err(format!("exit {code}: {out}{err}"))
            }
        },
    )
    .await;
    env.wait_aborted("app").await;
    env.wait_spokes_on(&cm, "v1").await;
    env.delete_and_wait_gone("app", &cm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_to_revision_1_reaches_the_spokes_and_deletion_cleans_them() {
    let Some(env) = Env::from_env("undo").await else {
        return;
    };
    env.canary_placement("p").await;
    let _controller = env.start_controller();
    let cm = env.hub.namespace.clone();
    let strategy = json!({"type": "All"});
    let v1 = env
        .create_app(configmap_template(&cm, "v1"), strategy)
        .await;
    env.hub
        .set_template("app", configmap_template(&cm, "v2"))
        .await;
    env.wait_spokes_on(&cm, "v2").await;
    env.wait_complete("app").await;

    let (code, out, err) = env.mwrs(&["rollout", "undo", "app", "--to-revision", "1"]);
    assert_eq!(code, 0, "{out}{err}");
    env.wait_spokes_on(&cm, "v1").await;
    let back = env.wait_complete("app").await;
    assert_eq!(back, v1, "revision 1's template is revision 1 again");
    let (code, history, err) = env.mwrs(&["rollout", "history", "app"]);
    assert_eq!(code, 0, "{err}");
    assert!(history.contains(&v1), "{history}");

    env.delete_and_wait_gone("app", &cm).await;
}
