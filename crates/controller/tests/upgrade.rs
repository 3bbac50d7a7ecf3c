//! Upgrade from a controller without revision history, on the real test hub:
//! ManifestWorks written the old way (generateName names, owner and placement labels, no
//! `controller-hash`) whose spec equals the template are adopted as the first revision:
//! labelled, kept under their names, their spec never rewritten.
//!
//! Needs `MWRS_TEST_KUBECONFIG` (see `scripts/hub.sh`); skipped without it unless CI=true.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{
    QUICK, hash_label, revisions_of, start_agent, start_controller, update, wait_complete,
    work_done, works_by_cluster,
};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use mwrs_api::labels;
use mwrs_api::work::{ManifestWork, ManifestWorkTemplate};
use mwrs_testsupport::{TestHub, configmap_template, mwrs, wait_for};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_of_an_old_controller_are_adopted_without_a_rollout() {
    let Some(hub) = TestHub::from_env("upgrade", 3).await else {
        return;
    };
    let _agent = start_agent(&hub, |_| QUICK);
    hub.publish_all("p").await;
    let template = configmap_template("v1");

    // What upstream's controller leaves behind.
    let mut old: BTreeMap<String, (String, String)> = BTreeMap::new();
    for c in &hub.clusters {
        let mut mw = ManifestWork::new(
            "",
            ManifestWorkTemplate::from_value(template.clone()).unwrap(),
        );
        mw.metadata = ObjectMeta {
            generate_name: Some("app-".into()),
            namespace: Some(c.clone()),
            labels: Some(BTreeMap::from([
                (labels::MWRS_OWNER.into(), format!("{}.app", hub.namespace)),
                (labels::PLACEMENT_NAME.into(), "p".into()),
            ])),
            ..Default::default()
        };
        let api: Api<ManifestWork> = Api::namespaced(hub.client.clone(), c);
        let made = api.create(&PostParams::default(), &mw).await.unwrap();
        old.insert(c.clone(), (made.name_any(), made.uid().unwrap()));
    }
    wait_for("the old ManifestWorks to be done", common::WAIT, || async {
        let works = works_by_cluster(&hub, "app").await;
        if works.len() == 3 && works.values().all(work_done) {
            Ok(())
        } else {
            Err(format!("{} works", works.len()))
        }
    })
    .await;

    hub.create_mwrs(&mwrs(
        "app",
        template.clone(),
        &[("p", json!({"type": "All"}))],
    ))
    .await;
    let _controller = start_controller(&hub);
    let m = wait_complete(&hub, "app", None).await;
    let hash = update(&m).unwrap();
    wait_for("every old ManifestWork labelled", common::WAIT, || async {
        let works = works_by_cluster(&hub, "app").await;
        if works
            .values()
            .all(|w| hash_label(w).as_deref() == Some(hash.as_str()))
        {
            Ok(())
        } else {
            Err(format!(
                "{:?}",
                works.values().map(hash_label).collect::<Vec<_>>()
            ))
        }
    })
    .await;

    let works = works_by_cluster(&hub, "app").await;
    assert_eq!(works.len(), 3);
    for (c, w) in &works {
        let (name, uid) = &old[c];
        assert_eq!(&w.name_any(), name, "{c}: adopted under its old name");
        assert_eq!(
            w.uid().as_ref(),
            Some(uid),
            "{c}: the same object, not re-created"
        );
        assert_eq!(w.metadata.generation, Some(1), "{c}: spec never rewritten");
        assert_eq!(w.spec.to_value(), template, "{c}: spec as it was");
        assert_eq!(
            w.annotations().get(labels::MWRS_OWNER_ANNOTATION),
            Some(&format!("{}/app", hub.namespace))
        );
    }
    let revs = revisions_of(&hub, "app").await;
    assert_eq!(revs.len(), 1, "one revision for the adopted template");
    assert_eq!(hash_label(&revs[0]).as_deref(), Some(hash.as_str()));
    let s = m.status.clone().unwrap().summary;
    assert_eq!((s.total, s.updated, s.desired_total), (3, 3, 3));
}
