//! The bare client: a plain client creating, updating and deleting N ManifestWorks (the
//! controller's size, [`mirror`]) with the write concurrency the controller is given, the
//! hub's own limit that the fan-out and every abort round are measured against.

use std::time::Instant;

use kube::api::{DeleteParams, Patch};
use mwrs_api::work::ManifestWork;
use serde_json::Value;

use super::abort::Answered;
use super::{Bench, Window};
use crate::mirror;

/// The bare client's ManifestWork on `version` ([`mirror::work`]).
fn bare_object(version: &str) -> Value {
    mirror::work("bench", "app", "bare-client", version)
}

impl Bench {
    /// The hub's limit: the same writes from a plain client.
    pub(super) async fn bare(&self, n: usize) -> anyhow::Result<(f64, Window)> {
        let (create_s, update, _) = self.bare_versions(n, "v1", "v2").await?;
        Ok((create_s, update))
    }

    /// A plain client creates `n` ManifestWorks on version `created`, updates them to
    /// `updated` and deletes them: the time of the creates, when the updates ran, and how
    /// long after they began every agent had answered them.
    pub(super) async fn bare_versions(
        &self,
        n: usize,
        created: &str,
        updated: &str,
    ) -> anyhow::Result<(f64, Window, Answered)> {
        let pp = mirror::post_params();
        let t0 = Instant::now();
        self.each_cluster(n, |api| {
            let pp = pp.clone();
            async move {
                let mw: ManifestWork = serde_json::from_value(bare_object(created))
                    .map_err(kube::Error::SerdeError)?;
                api.create(&pp, &mw).await.map(|_| ())
            }
        })
        .await?;
        let create = self.wait_version(created, n).await? - t0;
        let t0 = Instant::now();
        let pp = mirror::patch_params();
        self.each_cluster(n, |api| {
            let (pp, body) = (pp.clone(), bare_object(updated));
            async move {
                api.patch("bare-client", &pp, &Patch::Merge(&body))
                    .await
                    .map(|_| ())
            }
        })
        .await?;
        let update = Window {
            from: t0,
            to: self.wait_version(updated, n).await?,
        };
        let answered = self.answered(updated, n, t0).await?;
        self.each_cluster(n, |api| async move {
            api.delete("bare-client", &DeleteParams::default())
                .await
                .map(|_| ())
        })
        .await?;
        self.tracker
            .until(
                "the bare client's ManifestWorks gone",
                self.timeout(),
                |s| s.count(updated) == 0,
            )
            .await?;
        Ok((create.as_secs_f64(), update, answered))
    }
}
