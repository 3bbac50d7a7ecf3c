//! Black-box tests of the `mwrs` binary on the real test hub, with the controller running
//! in this process and the simulated agent answering for the clusters: the output of
//! every command (parsed, ages and hashes read from the hub rather than hard-coded), exit
//! codes, and the error cases (unknown MWRS, unknown or foreign revision, a concurrent
//! edit during undo, no hub).
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`) except the tests marked offline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{
    WAIT, carried, describe, mwrs, rows, run_with, section, start_controller, status, watch,
};
use kube::api::{Patch, PatchParams};
use mwrs_api::labels;
use mwrs_cli::cmd::undo::{Guard, write_template};
use mwrs_cli::error::Exit;
use mwrs_fleet::agent::APPLY_ERROR;
use mwrs_fleet::{Agent, AgentConfig, Behaviour};
use mwrs_testsupport::{TestHub, configmap_template, mwrs as mwrs_object, wait_for};
use serde_json::json;

/// Sets the change-cause annotation and the template in one patch (as `kubectl apply`
/// of an edited file would).
async fn set_template(hub: &TestHub, name: &str, version: &str, cause: &str) {
    let body = json!({
        "metadata": {"annotations": {labels::CHANGE_CAUSE: cause}},
        "spec": {"manifestWorkTemplate": configmap_template(version)},
    });
    hub.mwrs_api()
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .expect("patch the MWRS");
}

/// Offline: usage errors, help texts and an unreachable hub.
/// Runs `kubectl_complete-mwrs` as kubectl does: the words, the last being completed.
async fn complete(words: &[&str]) -> common::Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl_complete-mwrs"))
        .args(words)
        .output()
        .await
        .expect("run kubectl_complete-mwrs");
    common::Run {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn usage_help_and_unreachable_hub() {
    let dir = std::env::temp_dir().join(format!("mwrs-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: ns\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();

    let r = run_with(&kubeconfig, None, &["get"]).await;
    assert_eq!(r.code, 8, "no hub: exit 8; {r:?}");
    assert!(r.err.contains("cannot reach the hub"), "{r:?}");
    let r = run_with(&kubeconfig, None, &["rollout", "status", "app", "-w"]).await;
    assert_eq!(r.code, 8, "{r:?}");

    // Completion without a hub still offers what the parser knows, and never fails.
    let kc = kubeconfig.to_str().unwrap();
    let r = complete(&["--kubeconfig", kc, "rollout", "un"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.starts_with("undo\t"), "{r:?}");
    let r = complete(&["--kubeconfig", kc, "rollout", "undo", ""]).await;
    assert_eq!((r.code, r.out.as_str()), (0, ":4\n"), "{r:?}");

    let r = run_with(&kubeconfig, None, &["rollout", "frobnicate", "app"]).await;
    assert_eq!(r.code, 2, "usage error: exit 2; {r:?}");
    let r = run_with(&kubeconfig, None, &["rollout", "undo"]).await;
    assert_eq!(r.code, 2, "missing NAME; {r:?}");

    let r = run_with(&kubeconfig, None, &["--help"]).await;
    assert_eq!(r.code, 0);
    assert!(r.out.contains("Exit codes:"), "{}", r.out);
    for cmd in [
        vec!["get"],
        vec!["rollout", "status"],
        vec!["rollout", "history"],
        vec!["rollout", "diff"],
        vec!["rollout", "undo"],
        vec!["rollout", "abort"],
        vec!["rollout", "retry"],
        vec!["rollout", "pause"],
        vec!["rollout", "resume"],
        vec!["rollout", "plan"],
        vec!["completion"],
    ] {
        let mut args = cmd.clone();
        args.push("--help");
        let r = run_with(&kubeconfig, None, &args).await;
        assert_eq!(r.code, 0, "{cmd:?} --help: {r:?}");
        assert!(
            r.out.contains("Examples:"),
            "{cmd:?} --help has examples: {}",
            r.out
        );
    }
    let r = run_with(&kubeconfig, None, &["completion", "bash"]).await;
    assert_eq!(r.code, 0);
    assert!(
        r.out.contains("complete") && r.out.contains("rollout"),
        "bash completion"
    );

    // As a kubectl plugin the program calls itself `kubectl mwrs`.
    let plugin = std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-mwrs"));
    let out = std::process::Command::new(plugin)
        .arg("--help")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: kubectl mwrs"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The walkthrough: rollout, status -w, get, history, diff, undo (dry run, conflict,
/// unknown revision, real), plan, and the errors along the way.
/// The test's slice of the hub with the controller and a fleet (every cluster done after
/// 300 ms), and MWRS `app` (Progressive, two at a time, AbortAll) rolled out on v1
/// ("first release") and, with `to_v2`, on v2 ("bump to v2").
struct Fixture {
    hub: TestHub,
    v1: String,
    v2: String,
    /// What `rollout status -w` printed while v1 rolled out.
    first_watch: common::Run,
}

/// The controller and the fleet of a [`Fixture`], running while this lives (their guards
/// stop them on drop).
#[allow(dead_code)]
struct Running(mwrs_testsupport::TaskGuard, mwrs_fleet::AgentHandle);

async fn fixture(test: &str, to_v2: bool) -> Option<(Fixture, Running)> {
    let hub = TestHub::from_env(test, 4).await?;
    let controller = start_controller(&hub);
    let agent = common::agent_succeeding(&hub, Duration::from_millis(300));
    hub.publish_all("p").await;
    hub.create_mwrs(&app()).await;
    let first_watch = watch(&hub, "app").await;
    assert_eq!(first_watch.code, 0, "{first_watch:?}");
    let v1 = status(&hub.get_mwrs("app").await.unwrap())
        .current_revision
        .expect("v1 promoted");
    let mut v2 = String::new();
    if to_v2 {
        set_template(&hub, "app", "v2", "bump to v2").await;
        let r = watch(&hub, "app").await;
        assert_eq!(r.code, 0, "{r:?}");
        v2 = status(&hub.get_mwrs("app").await.unwrap())
            .current_revision
            .expect("v2 promoted");
        assert_ne!(v1, v2);
    }
    Some((
        Fixture {
            hub,
            v1,
            v2,
            first_watch,
        },
        Running(controller, agent),
    ))
}

/// MWRS `app` on v1 with its change cause.
fn app() -> mwrs_api::mwrs::ManifestWorkReplicaSet {
    let strategy = json!({"type": "Progressive",
        "progressive": {"maxConcurrency": 2, "progressDeadline": "30s"},
        "failureStrategy": "AbortAll"});
    let mut app = mwrs_object("app", configmap_template("v1"), &[("p", strategy)]);
    app.metadata.annotations = Some(
        [(
            labels::CHANGE_CAUSE.to_string(),
            "first release".to_string(),
        )]
        .into(),
    );
    app
}

#[tokio::test]
async fn an_unknown_mwrs_is_exit_6_from_every_command() {
    let Some(hub) = TestHub::from_env("cli-unknown", 0).await else {
        return;
    };
    // Unknown MWRS: a clear message and exit 6, from every command that names one.
    for args in [
        vec!["get", "app"],
        vec!["rollout", "status", "app"],
        vec!["rollout", "history", "app"],
        vec!["rollout", "undo", "app"],
        vec!["rollout", "abort", "app"],
        vec!["rollout", "plan", "app"],
    ] {
        let r = mwrs(&hub, &args).await;
        assert_eq!(r.code, 6, "{args:?}: {r:?}");
        assert!(
            r.err
                .contains("manifestworkreplicaset \"app\" not found in namespace"),
            "{args:?}: {r:?}"
        );
    }
    let r = mwrs(&hub, &["get"]).await;
    assert_eq!(r.code, 0);
    assert!(r.err.contains("No resources found"), "{r:?}");
}

#[tokio::test]
async fn completion_lists_the_mwrs_of_the_namespace() {
    let Some(hub) = TestHub::from_env("cli-complete", 0).await else {
        return;
    };
    hub.create_mwrs(&app()).await;
    // kubectl's plugin completion lists the MWRS of the namespace the line names.
    let r = complete(&[
        "--kubeconfig",
        hub.kubeconfig.to_str().unwrap(),
        "-n",
        &hub.namespace,
        "rollout",
        "status",
        "",
    ])
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.out, "app\n:4\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_follows_the_rollout_to_complete() {
    let Some((
        Fixture {
            hub,
            first_watch: r,
            ..
        },
        _running,
    )) = fixture("cli-watch", false).await
    else {
        return;
    };
    // status -w: follows to Complete, exit 0, one plain line per change (not a terminal).
    assert_eq!(r.code, 0, "{r:?}");
    let last = r
        .out
        .lines()
        .rev()
        .find(|l| l.starts_with("mwrs/app:"))
        .unwrap();
    assert!(last.starts_with("mwrs/app: Complete:"), "{}", r.out);
    for c in &hub.clusters {
        assert!(
            r.out.contains(&format!("cluster {c}: Succeeded on ")),
            "{c} reported Succeeded: {}",
            r.out
        );
    }
    assert!(r.out.contains("placement p: 4/4 done"), "{}", r.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shows_counters_revisions_and_state() {
    let Some((Fixture { hub, v1, .. }, _running)) = fixture("cli-get", false).await else {
        return;
    };
    // get: one row with the counters, revisions and state.
    let r = mwrs(&hub, &["get"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let t = rows(&r.out);
    assert_eq!(t.len(), 1, "{}", r.out);
    let row = &t[0];
    assert_eq!(row["NAME"], "app");
    assert_eq!(row["PLACEMENTS"], "p");
    assert_eq!(
        (
            row["DESIRED"].as_str(),
            row["UPDATED"].as_str(),
            row["ON-TARGET"].as_str()
        ),
        ("4", "4", "4")
    );
    assert_eq!(
        (row["CURRENT"].as_str(), row["UPDATE"].as_str()),
        (v1.as_str(), v1.as_str())
    );
    assert_eq!(row["STATUS"], "Complete");
    assert!(
        row["AGE"].ends_with('s') || row["AGE"].ends_with('m'),
        "{}",
        row["AGE"]
    );
    let r = mwrs(&hub, &["get", "-A", "-o", "wide"]).await;
    let t = rows(&r.out);
    let mine = t
        .iter()
        .find(|r| r["NAMESPACE"] == hub.namespace)
        .expect("row");
    assert_eq!(mine["REASON"], "NewManifestWorkAvailable");
    let r = mwrs(&hub, &["get", "app", "-o", "json"]).await;
    let j = r.json();
    assert_eq!(j["kind"], "ManifestWorkReplicaSet");
    assert_eq!(j["status"]["currentRevision"], v1.as_str());
    let r = mwrs(&hub, &["get", "app", "-o", "yaml"]).await;
    assert!(r.out.contains("kind: ManifestWorkReplicaSet"), "{}", r.out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_placements_and_clusters() {
    let Some((Fixture { hub, v2, .. }, _running)) = fixture("cli-status", true).await else {
        return;
    };
    // status without -w: placement bar and cluster table.
    let r = mwrs(&hub, &["rollout", "status", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.starts_with("mwrs/app  Complete  "), "{}", r.out);
    let p = rows(section(&r.out, "PLACEMENT"));
    assert_eq!(p[0]["PROGRESS"], format!("[{}]", "#".repeat(20)));
    assert_eq!(p[0]["DONE"], "4/4");
    let c = rows(section(&r.out, "CLUSTER"));
    assert_eq!(c.len(), 4);
    assert!(
        c.iter()
            .all(|c| c["STATE"] == "Succeeded" && c["REVISION"] == v2)
    );
    let r = mwrs(&hub, &["rollout", "status", "app", "--clusters", "1"]).await;
    assert!(r.out.contains("... 3 more clusters"), "{}", r.out);
    let r = mwrs(&hub, &["rollout", "status", "app", "-o", "json"]).await;
    let j = r.json();
    assert_eq!(j["state"], "Complete");
    assert_eq!(j["clusters"].as_array().unwrap().len(), 4);
    assert_eq!(j["placements"][0]["done"], 4);
    assert!(
        j["judgedWith"]
            .as_str()
            .unwrap()
            .starts_with("judged with the default settings"),
        "no controller Deployment where --controller looks by default: {}",
        j["judgedWith"]
    );

    // Judged with the settings of the controller's Deployment, as its arguments set them.
    let controller = format!("{}/mwrs-controller", hub.namespace);
    controller_deployment(&hub, &["--leader-elect", "--settle-time=7s"]).await;
    let r = mwrs(
        &hub,
        &["rollout", "status", "app", "--controller", &controller],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let said = format!(
        "judged with the settings of deployment {controller} (settle time 7s, no upstream quirk)"
    );
    assert!(r.out.contains(&said), "{}", r.out);
    controller_deployment(&hub, &["--upstream-quirk=sideways"]).await;
    let r = mwrs(
        &hub,
        &["rollout", "status", "app", "--controller", &controller],
    )
    .await;
    assert!(
        r.out.contains("judged with the default settings") && r.out.contains("sideways"),
        "{}",
        r.out
    );
}

/// A Deployment `mwrs-controller` in the test's namespace whose controller container has
/// `args` (no kubelet runs it: only its arguments are read).
async fn controller_deployment(hub: &TestHub, args: &[&str]) {
    let labels = json!({"app": "mwrs-controller"});
    let body = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "mwrs-controller", "namespace": hub.namespace},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "controller", "image": "mwrs-controller:test", "args": args}]}}}});
    kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
        hub.client.clone(),
        &hub.namespace,
    )
    .patch(
        "mwrs-controller",
        &kube::api::PatchParams::apply("mwrs-tests").force(),
        &kube::api::Patch::Apply(&body),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_revisions_carriers_roles_and_causes() {
    let Some((Fixture { hub, v1, v2, .. }, _running)) = fixture("cli-history", true).await else {
        return;
    };
    // history: two revisions, who carries them, roles and change causes.
    let r = mwrs(&hub, &["rollout", "history", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let h = rows(&r.out);
    assert_eq!(h.len(), 2, "{}", r.out);
    assert_eq!(
        (
            h[0]["REVISION"].as_str(),
            h[0]["HASH"].as_str(),
            h[0]["CLUSTERS"].as_str()
        ),
        ("1", v1.as_str(), "0")
    );
    assert_eq!(h[0]["ROLE"], "");
    assert_eq!(h[0]["CHANGE-CAUSE"], "first release");
    assert_eq!(
        (
            h[1]["REVISION"].as_str(),
            h[1]["HASH"].as_str(),
            h[1]["CLUSTERS"].as_str()
        ),
        ("2", v2.as_str(), "4")
    );
    assert_eq!(h[1]["ROLE"], "current");
    assert_eq!(h[1]["CHANGE-CAUSE"], "bump to v2");
    let r = mwrs(&hub, &["rollout", "history", "app", "--revision", "1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.contains(&format!("revision 1 ({v1}): first release")),
        "{}",
        r.out
    );
    assert!(r.out.contains("version: v1"), "{}", r.out);
    let r = mwrs(&hub, &["rollout", "history", "app", "--revision", "7"]).await;
    assert_eq!(r.code, 6, "{r:?}");
    assert!(
        r.err
            .contains("revision 7 not found: mwrs/app has revisions 1, 2"),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_compares_two_revisions() {
    let Some((Fixture { hub, v1, v2, .. }, _running)) = fixture("cli-diff", true).await else {
        return;
    };
    // diff: default is current against update (the same now); 1 against 2 differs.
    let r = mwrs(&hub, &["rollout", "diff", "app"]).await;
    assert_eq!(r.code, 0);
    assert!(r.out.contains("have the same template"), "{}", r.out);
    let r = mwrs(&hub, &["rollout", "diff", "app", "1", "2"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.contains(&format!("--- revision 1 ({v1})")),
        "{}",
        r.out
    );
    assert!(
        r.out.contains(&format!("+++ revision 2 ({v2})")),
        "{}",
        r.out
    );
    let minus: Vec<&str> = r
        .out
        .lines()
        .filter(|l| l.starts_with('-') && !l.starts_with("---"))
        .collect();
    let plus: Vec<&str> = r
        .out
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .collect();
    assert_eq!(minus.len(), 1, "{}", r.out);
    assert!(
        minus[0].ends_with("version: v1") && plus[0].ends_with("version: v2"),
        "{}",
        r.out
    );
    let r = mwrs(&hub, &["rollout", "diff", "app", "1", "9"]).await;
    assert_eq!(r.code, 6, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_previews_refuses_stale_and_foreign_and_rolls_back() {
    let Some((Fixture { hub, v1, v2, .. }, _running)) = fixture("cli-undo", true).await else {
        return;
    };
    // undo --dry-run: the diff, nothing written.
    let before = hub.get_mwrs("app").await.unwrap();
    let r = mwrs(&hub, &["rollout", "undo", "app", "--dry-run"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out
            .lines()
            .any(|l| l.starts_with('-') && !l.starts_with("---") && l.ends_with("version: v2")),
        "{}",
        r.out
    );
    assert!(r.out.contains("nothing written"), "{}", r.out);
    let after = hub.get_mwrs("app").await.unwrap();
    assert_eq!(before.metadata.generation, after.metadata.generation);
    // With -o json (or yaml): the template undo would write, to commit to Git (#32 item 7).
    let r = mwrs(&hub, &["rollout", "undo", "app", "--dry-run", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let template = r.json();
    assert_eq!(
        template["workload"]["manifests"][0]["data"]["version"], "v1",
        "{template}"
    );
    let r = mwrs(&hub, &["rollout", "undo", "app", "--dry-run", "-o", "yaml"]).await;
    assert!(r.out.starts_with("workload:"), "{}", r.out);

    // undo to a revision that does not exist.
    let r = mwrs(&hub, &["rollout", "undo", "app", "--to-revision", "42"]).await;
    assert_eq!(r.code, 6, "{r:?}");
    assert!(r.err.contains("revision 42 not found"), "{r:?}");

    // A concurrent edit between the read and the write: refused whole.
    let stale = before.metadata.resource_version.clone().unwrap();
    let touch = json!({"metadata": {"labels": {"touched": "yes"}}});
    hub.mwrs_api()
        .patch("app", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    let r = mwrs(
        &hub,
        &["rollout", "undo", "app", "--resource-version", &stale],
    )
    .await;
    assert_eq!(r.code, 7, "{r:?}");
    assert!(
        r.err.contains("changed since it was read") && r.err.contains("nothing was written"),
        "{r:?}"
    );
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(
        m.metadata.generation, before.metadata.generation,
        "no partial write"
    );
    assert_eq!(
        common::version_of(&m.spec.manifest_work_template.to_value()),
        Some("v2")
    );

    // Without --resource-version the guard is the spec's generation: an edit of the spec
    // since the read is a conflict (exit 7), a template the schema refuses is not.
    let client = mwrs_cli::hub::HubClient {
        client: hub.client.clone(),
        namespace: hub.namespace.clone(),
        url: String::new(),
    };
    let stale = Guard::Spec(m.metadata.generation.unwrap() - 1);
    let e = write_template(&client, "app", &stale, &configmap_template("v1"), None)
        .await
        .unwrap_err();
    assert_eq!(e.code, Exit::Conflict, "{}", e.message);
    assert!(e.message.contains("its spec changed"), "{}", e.message);
    let current = Guard::Spec(m.metadata.generation.unwrap());
    let e = write_template(
        &client,
        "app",
        &current,
        &json!({"workload": "no list"}),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, Exit::Error, "{}", e.message);
    assert!(!e.message.contains("changed since"), "{}", e.message);
    let after = hub.get_mwrs("app").await.unwrap();
    assert_eq!(after.metadata.generation, m.metadata.generation);

    // A revision of another MWRS is refused.
    let other = mwrs_object(
        "other",
        configmap_template("other"),
        &[("p", json!({"type": "All"}))],
    );
    hub.create_mwrs(&other).await;
    let theirs = wait_for("the other MWRS's revision", WAIT, || async {
        let m = hub.get_mwrs("other").await.ok_or("no MWRS")?;
        status(&m).update_revision.ok_or_else(|| describe(&m))
    })
    .await;
    let r = mwrs(&hub, &["rollout", "undo", "app", "--to-revision", &theirs]).await;
    assert_eq!(r.code, 6, "{r:?}");
    assert!(r.err.contains("is not owned by mwrs/app"), "{r:?}");
    hub.mwrs_api()
        .delete("other", &Default::default())
        .await
        .unwrap();

    // The real undo: back to revision 1, which is renumbered 3 and rolls out again.
    let r = mwrs(&hub, &["rollout", "undo", "app"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.out.trim(),
        format!("mwrs/app rolled back to revision 1 ({v1})")
    );
    let r = watch(&hub, "app").await;
    assert_eq!(r.code, 0, "{r:?}");
    let on = carried(&hub, "app").await;
    assert!(on.values().all(|h| *h == v1), "{on:?}");
    let h = rows(&mwrs(&hub, &["rollout", "history", "app"]).await.out);
    let numbers: Vec<(&str, &str, &str)> = h
        .iter()
        .map(|r| {
            (
                r["REVISION"].as_str(),
                r["HASH"].as_str(),
                r["ROLE"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        numbers,
        vec![("2", v2.as_str(), ""), ("3", v1.as_str(), "current")]
    );
    let r = mwrs(&hub, &["rollout", "undo", "app", "--to-revision", "3"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.contains("is already at revision 3"), "{}", r.out);
}

/// Status writes between undo's read and its write (the controller reports progress all
/// through a rollout, which is when an undo is wanted) change the resourceVersion but not
/// the spec: undo goes through. Found in CI: an undo during an abort's revert exited 7.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_goes_through_status_writes_made_while_it_runs() {
    let Some((Fixture { hub, .. }, running)) = fixture("cli-undo-busy", true).await else {
        return;
    };
    // The controller stops so that only this test writes the status, as fast as it can.
    drop(running);
    let api = hub.mwrs_api();
    let writes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = writes.clone();
    let writer = mwrs_testsupport::TaskGuard::spawn(async move {
        for n in 0u64.. {
            let op = json!([{"op": "replace", "path": "/status/conditions/0/message",
                "value": format!("status write {n}")}]);
            let patch: json_patch::Patch = serde_json::from_value(op).unwrap();
            let pp = PatchParams::default();
            if api
                .patch_status("app", &pp, &Patch::Json::<()>(patch))
                .await
                .is_ok()
            {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let mut generations = Vec::new();
    for to in ["1", "2", "1", "2", "1", "2"] {
        let r = mwrs(&hub, &["rollout", "undo", "app", "--to-revision", to]).await;
        assert_eq!(r.code, 0, "undo to {to}: {r:?}");
        assert!(r.out.contains("rolled back to revision"), "{}", r.out);
        generations.push(hub.get_mwrs("app").await.unwrap().metadata.generation);
    }
    drop(writer);
    let during = writes.load(std::sync::atomic::Ordering::Relaxed);
    assert!(during > 20, "the writer made only {during} status writes");
    // Each undo wrote the spec once: one generation each.
    let steps: Vec<i64> = generations
        .windows(2)
        .map(|w| w[1].unwrap() - w[0].unwrap())
        .collect();
    assert_eq!(steps, vec![1; 5], "{generations:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_previews_a_file_not_applied_yet() {
    let Some((Fixture { hub, v1, .. }, _running)) = fixture("cli-plan", false).await else {
        return;
    };
    // plan on a file not applied yet: a new template, two waves of two; with a failing
    // cluster the AbortAll strategy reverts everything to the stable revision.
    let mut next = hub.get_mwrs("app").await.unwrap();
    next.spec.manifest_work_template =
        mwrs_api::work::ManifestWorkTemplate::from_value(configmap_template("v3")).unwrap();
    next.status = None;
    next.metadata.managed_fields = None;
    let file = std::env::temp_dir().join(format!("{}-app.json", hub.namespace));
    std::fs::write(&file, serde_json::to_string(&next).unwrap()).unwrap();
    let f = file.to_str().unwrap();
    let r = mwrs(&hub, &["rollout", "plan", "-f", f, "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    let waves: Vec<Vec<String>> = j["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| serde_json::from_value(w["clusters"].clone()).unwrap())
        .collect();
    let cs = &hub.clusters;
    assert_eq!(
        waves,
        vec![
            vec![cs[0].clone(), cs[1].clone()],
            vec![cs[2].clone(), cs[3].clone()]
        ]
    );
    assert_eq!(j["end"], "Complete");
    let r = mwrs(&hub, &["rollout", "plan", "-f", f, "--fail", &cs[2]]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let w = rows(section(&r.out, "WAVE"));
    let actions: Vec<(&str, &str)> = w
        .iter()
        .map(|r| (r["ACTION"].as_str(), r["COUNT"].as_str()))
        .collect();
    assert_eq!(
        actions,
        vec![("rollout", "2"), ("rollout", "2"), ("revert", "4")],
        "{}",
        r.out
    );
    assert!(
        r.out.contains(&format!(
            "Aborts at +0s: every cluster reverted to revision {v1}"
        )),
        "{}",
        r.out
    );
    // The plan wrote nothing.
    let m = hub.get_mwrs("app").await.unwrap();
    assert_eq!(
        common::version_of(&m.spec.manifest_work_template.to_value()),
        Some("v1")
    );
    let r = mwrs(&hub, &["rollout", "plan", "app"]).await;
    assert!(r.out.contains("Nothing to roll out"), "{}", r.out);
    let r = mwrs(&hub, &["rollout", "plan", "-f", f, "--fail", "nowhere"]).await;
    assert_eq!(r.code, 2, "{r:?}");
    // Upstream's behaviours can be simulated by name; an unknown name is a usage error
    // that lists the known ones.
    let r = mwrs(
        &hub,
        &[
            "rollout",
            "plan",
            "-f",
            f,
            "--upstream-quirk",
            "mandatory-leak",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["end"], "Complete");
    let r = mwrs(
        &hub,
        &["rollout", "plan", "-f", f, "--upstream-quirk", "leak"],
    )
    .await;
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.err.contains("group-walk-arithmetic"), "{}", r.err);
    let _ = std::fs::remove_file(&file);
}

/// `rollout plan -f` checks a file as `kubectl apply` (the API server's strict field
/// validation) and the controller (durations, strategies) would, and `undo` refuses to
/// leave a spec Invalid: each exits 3 naming the field, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_and_undo_refuse_invalid_input() {
    let Some(hub) = TestHub::from_env("cli-invalid", 2).await else {
        return;
    };
    let _controller = start_controller(&hub);
    let _agent = Agent::start(hub.client.clone(), AgentConfig::new(hub.clusters.clone()));
    hub.publish_all("p").await;
    let progressive = json!({"type": "Progressive", "progressive": {"maxConcurrency": 1}});
    common::create_v1(&hub, "app", progressive).await;
    assert_eq!(watch(&hub, "app").await.code, 0);
    // The file as a user writes it (typed structs would drop an unknown field).
    let file_with = |strategy: serde_json::Value| {
        let mut m =
            serde_json::to_value(mwrs_object("app", configmap_template("v2"), &[])).unwrap();
        m["spec"]["placementRefs"] = json!([{"name": "p", "rolloutStrategy": strategy}]);
        let path = std::env::temp_dir().join(format!("{}-{}.json", hub.namespace, rand_suffix()));
        std::fs::write(&path, serde_json::to_string(&m).unwrap()).unwrap();
        path
    };

    let typo = file_with(json!({"type": "Progressive", "progressive": {"maxConcurency": 1}}));
    let r = mwrs(&hub, &["rollout", "plan", "-f", typo.to_str().unwrap()]).await;
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.err.contains("unknown field") && r.err.contains("maxConcurency"),
        "{r:?}"
    );

    let duration = json!({"type": "Progressive",
        "progressive": {"maxConcurrency": 1, "progressDeadline": "20sec"}});
    let bad = file_with(duration.clone());
    let r = mwrs(&hub, &["rollout", "plan", "-f", bad.to_str().unwrap()]).await;
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.err.contains("Invalid") && r.err.contains("progressDeadline"),
        "{r:?}"
    );

    // The API server takes the bad duration; the controller marks the MWRS Invalid, and
    // an undo (which rewrites only the template) would leave it so.
    hub.set_template("app", configmap_template("v2")).await;
    let body = json!({"spec": {"placementRefs": [{"name": "p", "rolloutStrategy": duration}]}});
    hub.mwrs_api()
        .patch("app", &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap();
    let before = hub.get_mwrs("app").await.unwrap();
    let r = mwrs(&hub, &["rollout", "undo", "app", "--to-revision", "1"]).await;
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.err.contains("would stay Invalid") && r.err.contains("progressDeadline"),
        "{r:?}"
    );
    // The controller's own status writes move the resourceVersion meanwhile: compare
    // what an undo writes (the spec, and so the generation).
    let after = hub.get_mwrs("app").await.unwrap();
    assert_eq!(
        (
            after.metadata.generation,
            serde_json::to_value(&after.spec).unwrap()
        ),
        (
            before.metadata.generation,
            serde_json::to_value(&before.spec).unwrap()
        ),
        "nothing written"
    );
    for f in [typo, bad] {
        let _ = std::fs::remove_file(f);
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Clusters whose agent refuses to apply or never answers: `rollout status` says why in a
/// NOTE column, and `-o json` in each cluster's `note` (rules §11.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_status_says_why_a_cluster_is_not_done() {
    let Some(hub) = TestHub::from_env("cli-notes", 3).await else {
        return;
    };
    let c = hub.clusters.clone();
    let _controller = start_controller(&hub);
    let (refusing, silent) = (c[0].clone(), c[1].clone());
    let _agent = Agent::start(
        hub.client.clone(),
        AgentConfig::new(hub.clusters.clone()).behaviour(move |w| {
            if w.cluster == refusing {
                Behaviour::Refuse
            } else if w.cluster == silent {
                Behaviour::Silent
            } else {
                Behaviour::succeed_now()
            }
        }),
    );
    hub.publish_all("p").await;
    hub.create_mwrs(&mwrs_object(
        "app",
        configmap_template("v1"),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    let table = wait_for("both notes in rollout status", WAIT, || async {
        let r = mwrs(&hub, &["rollout", "status", "app", "--clusters", "all"]).await;
        let t = section(&r.out, "CLUSTER").to_string();
        if t.contains(APPLY_ERROR) && t.contains("no report from the agent since") {
            Ok(t)
        } else {
            Err(format!("{r:?}"))
        }
    })
    .await;
    let by_cluster: std::collections::BTreeMap<String, String> = rows(&table)
        .into_iter()
        .map(|r| {
            (
                r["CLUSTER"].clone(),
                r.get("NOTE").cloned().unwrap_or_default(),
            )
        })
        .collect();
    assert!(by_cluster[&c[0]].contains(APPLY_ERROR), "{table}");
    assert!(
        by_cluster[&c[1]].starts_with("no report from the agent since"),
        "{table}"
    );
    assert_eq!(by_cluster[&c[2]], "", "{table}");
    let j = mwrs(&hub, &["rollout", "status", "app", "-o", "json"])
        .await
        .json();
    let note = |cluster: &str| {
        j["clusters"]
            .as_array()
            .and_then(|cs| cs.iter().find(|x| x["cluster"] == cluster))
            .and_then(|x| x["note"].as_str())
            .map(str::to_string)
    };
    assert!(note(&c[0]).is_some_and(|n| n.contains(APPLY_ERROR)), "{j}");
    assert_eq!(note(&c[2]), None, "{j}");
}

/// `rollout status -w` on an MWRS whose status no controller catches up with (none runs,
/// as after a handover to upstream's controller, which writes no observedGeneration):
/// after a while it says why the wait can last, once, and goes on waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_watch_says_why_a_status_may_never_catch_up() {
    let Some(hub) = TestHub::from_env("cli-unobserved", 1).await else {
        return;
    };
    hub.create_mwrs(&app()).await;
    let status = json!({"status": {"observedGeneration": 1, "currentRevision": "a",
        "updateRevision": "a"}});
    hub.mwrs_api()
        .patch_status("app", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    set_template(&hub, "app", "v2", "after the handover").await;
    let r = mwrs(
        &hub,
        &["rollout", "status", "app", "-w", "--timeout", "30s"],
    )
    .await;
    assert_eq!(r.code, 5, "{r:?}");
    let hint = "no controller has written the status of mwrs/app for generation 2";
    assert_eq!(r.err.matches(hint).count(), 1, "{}", r.err);
    assert!(r.err.contains("kubectl mwrs handover"), "{}", r.err);
}
