//! The peer (upstream's controller, started as `PEER KUBECONFIG`): the same fan-out as the
//! controller's, against the same bare update, and its idle CPU and peak RSS.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use mwrs_api::work::ManifestWork;

use super::{Bench, Row};
use crate::process::Proc;

impl Bench {
    pub(super) async fn peer(
        &self,
        peer: &Path,
        n: usize,
        ns: &str,
        row: &mut Row,
    ) -> anyhow::Result<()> {
        let log = self.args.workdir.join(format!("peer-{n}.log"));
        let p = Proc::spawn(
            "peer",
            peer,
            &[self.args.kubeconfig.display().to_string()],
            &log,
        )?;
        let api = self.mwrs_api(ns);
        // The first rollout includes the peer's start-up: not timed.
        api.create(&PostParams::default(), &self.mwrs("peer", "v1", false)?)
            .await?;
        self.wait_version("v1", n)
            .await
            .with_context(|| format!("peer log: {}", log.display()))?;
        let t0 = Instant::now();
        self.set_version(ns, "peer", "v2").await?;
        let fanout = (self.wait_version("v2", n).await? - t0).as_secs_f64();
        row.peer_fanout_s = Some(fanout);
        row.peer_fanout_ratio = Some(fanout / row.bare_update_s);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (cpu, _) = self.idle(Some(&p)).await?;
        row.peer_idle_cpu_s_per_min = Some(cpu);
        row.peer_peak_rss_bytes = Some(p.peak_rss()?);
        api.delete("peer", &DeleteParams::default()).await?;
        // Upstream removes its ManifestWorks through its own finalizer; if it does not
        // within the deadline, clean up so the next size starts empty.
        if self.wait_no_works().await.is_err() {
            let lp = ListParams::default()
                .labels("work.open-cluster-management.io/manifestworkreplicaset");
            let all: Api<ManifestWork> = Api::all(self.client.clone());
            for mw in all.list_metadata(&lp).await?.items {
                let a: Api<ManifestWork> =
                    Api::namespaced(self.client.clone(), &mw.namespace().unwrap_or_default());
                let _ = a.delete(&mw.name_any(), &DeleteParams::default()).await;
            }
            self.wait_no_works().await?;
        }
        p.stop().await;
        Ok(())
    }
}
