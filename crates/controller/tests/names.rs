//! Owner names that upstream's label scheme cannot carry, on the real test hub: an
//! owner `namespace.name` longer than 63 characters (hashed owner label plus the owner
//! annotation) and an MWRS name containing a dot. Both roll out, through one watch of
//! ManifestWorks, and the long one is deleted with everything it owns.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use common::{
    QUICK, assert_works_on, delete_and_wait_gone, hash_label, revisions_of, start_agent, update,
    wait_complete, works_by_cluster,
};
use kube::ResourceExt;
use mwrs_api::labels;
use mwrs_engine::owner::OwnerKey;
use mwrs_testsupport::{TestHub, configmap_template, mwrs};
use serde_json::json;

const LONG: &str = "a-manifestworkreplicaset-with-a-name-long-enough-to-overflow-labels";

/// The label selectors of the lists and watches of ManifestWorks a client sent.
type Selectors = Arc<Mutex<BTreeSet<String>>>;

/// `inner`, recording the label selector of every list or watch of ManifestWorks.
fn recording_work_reads(inner: kube::Client, seen: Selectors) -> kube::Client {
    common::inspecting(inner, move |req| {
        let uri = req.uri();
        if req.method() == http::Method::GET && uri.path().ends_with("/manifestworks") {
            let selector = uri
                .query()
                .unwrap_or("")
                .split('&')
                .find_map(|pair| pair.strip_prefix("labelSelector="))
                .unwrap_or("")
                .replace("%2F", "/")
                .replace("%2C", ",")
                .replace("%21", "!");
            seen.lock().unwrap().insert(selector);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_owner_and_dotted_name_roll_out() {
    let Some(hub) = TestHub::from_env("names", 2).await else {
        return;
    };
    let selectors = Selectors::default();
    let seen = selectors.clone();
    let _controller =
        common::start_controller_through(&hub, move |c| recording_work_reads(c, seen));
    hub.publish_all("p").await;
    let _agent = start_agent(&hub, |_| QUICK);
    let long = OwnerKey::new(hub.namespace.clone(), LONG);
    assert!(long.dotted().len() > 63 && !long.fits_label());
    for name in [LONG, "my.app"] {
        hub.create_mwrs(&mwrs(
            name,
            configmap_template("v1"),
            &[("p", json!({"type": "All"}))],
        ))
        .await;
    }

    for name in [LONG, "my.app"] {
        let m = wait_complete(&hub, name, None).await;
        let hash = update(&m).unwrap();
        assert_works_on(&hub, name, &hub.clusters, &hash).await;
        let owner = OwnerKey::new(hub.namespace.clone(), name);
        for (c, w) in works_by_cluster(&hub, name).await {
            assert_eq!(w.name_any(), owner.work_name(), "{c}");
            assert_eq!(
                w.annotations().get(labels::MWRS_OWNER_ANNOTATION),
                Some(&owner.slashed()),
                "{c}"
            );
            let (k, v) = owner.selector();
            assert_eq!(w.labels().get(k), Some(&v), "{c}");
        }
        let revs = revisions_of(&hub, name).await;
        assert_eq!(revs.len(), 1, "{name}");
        assert_eq!(hash_label(&revs[0]).as_deref(), Some(hash.as_str()));
        assert_eq!(revs[0].name_any(), format!("{name}-{hash}"));
    }
    for (_, w) in works_by_cluster(&hub, LONG).await {
        assert_eq!(w.labels().get(labels::OWNER_KEY_HASH), Some(&long.hashed()));
        // Upstream's key, for its hub garbage collector, with a valid value that names no
        // dotted owner (#32 item 4).
        assert_eq!(
            w.labels().get(labels::MWRS_OWNER),
            Some(&long.hashed()),
            "the garbage collector's mark"
        );
    }
    for (_, w) in works_by_cluster(&hub, "my.app").await {
        assert_eq!(
            w.labels().get(labels::MWRS_OWNER),
            Some(&format!("{}.my.app", hub.namespace))
        );
    }
    // One watch of upstream's key saw both owners' ManifestWorks. Without a watch cache
    // for ManifestWorks, the API server reads every one from etcd for each list by label,
    // and a watch of the hashed key alone did so at every start and expiry (issue #36).
    assert_eq!(
        *selectors.lock().unwrap(),
        BTreeSet::from([labels::MWRS_OWNER.to_string()]),
        "the controller's lists and watches of ManifestWorks"
    );

    // Deleting the long-named MWRS finds its ManifestWorks and revisions by the hashed
    // label and removes them; the dotted one keeps its own.
    delete_and_wait_gone(&hub, LONG, |_, _| {}).await;
    assert_eq!(works_by_cluster(&hub, "my.app").await.len(), 2);
}
