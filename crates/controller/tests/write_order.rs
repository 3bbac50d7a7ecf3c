//! The executor's order of writes within a pass, read off the API conversation of a
//! controller on the real test hub (its client records every write it sends): the
//! finalizer before anything it guards, a revision before the ManifestWorks that name it,
//! the status after the writes it reports, and the finalizer's removal after the last
//! ManifestWork is gone.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::{WAIT, create_app_for_all, start_controller_through, update};
use mwrs_testsupport::{TestHub, configmap_template, wait_for};

const CLUSTERS: usize = 6;

/// A write the controller sent, by what it wrote.
#[derive(Clone, Debug, PartialEq)]
enum Write {
    /// A patch of the MWRS itself: its finalizer.
    Finalizer,
    Status,
    RevisionCreate,
    RevisionPatch,
    WorkCreate,
    WorkPatch,
    WorkDelete,
    /// Events and anything else, named by method and path.
    Other(String),
}

impl Write {
    fn of(method: &http::Method, path: &str) -> Self {
        let kind = |k: &str| path.contains(&format!("/{k}"));
        let item = |k: &str| path.split(&format!("/{k}/")).nth(1).is_some();
        match (
            method.as_str(),
            kind("manifestworkreplicasets"),
            kind("controllerrevisions"),
        ) {
            ("PATCH", true, _) if path.ends_with("/status") => Self::Status,
            ("PATCH", true, _) => Self::Finalizer,
            ("POST", _, true) => Self::RevisionCreate,
            ("PATCH", _, true) => Self::RevisionPatch,
            (m, false, false) if kind("manifestworks") => match (m, item("manifestworks")) {
                ("POST", false) => Self::WorkCreate,
                ("PATCH", true) => Self::WorkPatch,
                ("DELETE", true) => Self::WorkDelete,
                _ => Self::Other(format!("{m} {path}")),
            },
            (m, ..) => Self::Other(format!("{m} {path}")),
        }
    }
}

type Conversation = Arc<Mutex<Vec<Write>>>;

/// `inner`, recording every write it sends (reads, watches and dry runs pass unrecorded).
fn recording(inner: kube::Client, writes: Conversation) -> kube::Client {
    common::inspecting(inner, move |req| {
        // Dry runs (the CRD's schema probe) change nothing.
        let dry_run = req.uri().query().is_some_and(|q| q.contains("dryRun="));
        if req.method() != http::Method::GET && !dry_run {
            let w = Write::of(req.method(), req.uri().path());
            writes.lock().unwrap().push(w);
        }
    })
}

/// The writes from `from` on, less Events.
fn since(writes: &Conversation, from: usize) -> Vec<Write> {
    let all = writes.lock().unwrap();
    all[from.min(all.len())..]
        .iter()
        .filter(|w| !matches!(w, Write::Other(p) if p.contains("/events")))
        .cloned()
        .collect()
}

fn first(writes: &[Write], w: &Write) -> Option<usize> {
    writes.iter().position(|x| x == w)
}

fn last(writes: &[Write], w: &Write) -> Option<usize> {
    writes.iter().rposition(|x| x == w)
}

/// Waits until the conversation from `from` on holds `n` writes `w` and a status write
/// after them.
async fn wait_for_writes(writes: &Conversation, from: usize, w: Write, n: usize) -> Vec<Write> {
    let what = format!("{n} {w:?} then a status write");
    wait_for(&what, WAIT, || {
        let seen = since(writes, from);
        let count = seen.iter().filter(|x| **x == w).count();
        let done = count == n && last(&seen, &w) < last(&seen, &Write::Status);
        std::future::ready(done.then_some(seen.clone()).ok_or(format!("{seen:?}")))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pass_writes_finalizer_revisions_works_then_status() {
    let Some(hub) = TestHub::from_env("writeorder", CLUSTERS).await else {
        return;
    };
    let writes = Conversation::default();
    let recorded = writes.clone();
    let _controller = start_controller_through(&hub, move |c| recording(c, recorded));

    // The first pass: finalizer, the revision, every ManifestWork, then the status.
    create_app_for_all(&hub).await;
    let seen = wait_for_writes(&writes, 0, Write::WorkCreate, CLUSTERS).await;
    assert_eq!(seen.first(), Some(&Write::Finalizer), "{seen:?}");
    assert!(
        last(&seen, &Write::RevisionCreate) < first(&seen, &Write::WorkCreate),
        "the revision is stored before a ManifestWork names it: {seen:?}"
    );
    let works =
        first(&seen, &Write::WorkCreate).unwrap()..=last(&seen, &Write::WorkCreate).unwrap();
    assert!(
        !seen[works.clone()].contains(&Write::Status)
            && first(&seen, &Write::Status) > Some(*works.end()),
        "the status follows the writes it reports: {seen:?}"
    );

    // A new template: its revision, then the ManifestWorks, then the status naming it.
    let v1 = wait_for("v1 reported", WAIT, || async {
        hub.get_mwrs("app")
            .await
            .and_then(|m| update(&m))
            .ok_or_else(|| "no update revision".to_string())
    })
    .await;
    let from = writes.lock().unwrap().len();
    hub.set_template("app", configmap_template("v2")).await;
    let seen = wait_for_writes(&writes, from, Write::WorkPatch, CLUSTERS).await;
    let revision = first(&seen, &Write::RevisionCreate).expect("the new revision stored");
    let works = first(&seen, &Write::WorkPatch).unwrap()..=last(&seen, &Write::WorkPatch).unwrap();
    assert!(revision < *works.start(), "{seen:?}");
    assert!(
        !seen[revision..=*works.end()].contains(&Write::Status),
        "no status between the revision and the ManifestWorks naming it: {seen:?}"
    );
    wait_for("v2 reported", WAIT, || async {
        hub.get_mwrs("app")
            .await
            .and_then(|m| update(&m))
            .filter(|u| *u != v1)
            .ok_or_else(|| "v1 still".to_string())
    })
    .await;

    // Deletion: every ManifestWork goes before the finalizer does.
    let from = writes.lock().unwrap().len();
    hub.mwrs_api()
        .delete("app", &Default::default())
        .await
        .unwrap();
    let seen = wait_for("the finalizer removed", WAIT, || {
        let seen = since(&writes, from);
        let done = seen.contains(&Write::Finalizer).then_some(seen.clone());
        std::future::ready(done.ok_or(format!("{seen:?}")))
    })
    .await;
    let deletes = seen.iter().filter(|w| **w == Write::WorkDelete).count();
    assert_eq!(deletes, CLUSTERS, "{seen:?}");
    assert!(
        last(&seen, &Write::WorkDelete) < first(&seen, &Write::Finalizer),
        "{seen:?}"
    );
}
