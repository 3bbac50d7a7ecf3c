//! A front for the soak's rollout plugin: the controllers call it, and it passes every
//! call to the plugin, except while its backend is "down" ([`Front::backend_down`]):
//! then every call about a cluster answers UNAVAILABLE while Initialize still answers,
//! the commonest partial outage of a plugin (rules §12.6, security review B1).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mwrs_plugin::client::PluginClient;
use mwrs_plugin::config::WorkConfig;
use mwrs_plugin::v1alpha1 as api;
use mwrs_plugin::v1alpha1::rollout_plugin_server::{RolloutPlugin, RolloutPluginServer};
use tonic::{Request, Response, Status};

/// The switch the fault injector turns.
#[derive(Clone, Default)]
pub struct BackendDown(Arc<AtomicBool>);

impl BackendDown {
    pub fn set(&self, down: bool) {
        self.0.store(down, Ordering::Release);
    }

    fn check(&self) -> Result<(), Status> {
        match self.0.load(Ordering::Acquire) {
            true => Err(Status::unavailable(
                "the plugin's backend is down (soak fault)",
            )),
            false => Ok(()),
        }
    }
}

struct Front {
    plugin: PluginClient,
    down: BackendDown,
}

type Answer<T> = Result<Response<T>, Status>;

fn answer<T>(r: Result<T, Status>) -> Answer<T> {
    r.map(Response::new)
}

#[tonic::async_trait]
impl RolloutPlugin for Front {
    async fn initialize(
        &self,
        r: Request<api::InitializeRequest>,
    ) -> Answer<api::InitializeResponse> {
        answer(self.plugin.initialize(r.into_inner()).await)
    }
    async fn begin_rollout(&self, r: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        self.down.check()?;
        answer(self.plugin.begin_rollout(r.into_inner()).await)
    }
    async fn progress_rollout(&self, r: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        self.down.check()?;
        answer(self.plugin.progress_rollout(r.into_inner()).await)
    }
    async fn validate_rollout_completion(
        &self,
        r: Request<api::ValidateRequest>,
    ) -> Answer<api::ValidateResponse> {
        self.down.check()?;
        answer(
            self.plugin
                .validate_rollout_completion(r.into_inner())
                .await,
        )
    }
    async fn mutate_manifest_work(
        &self,
        r: Request<api::MutateRequest>,
    ) -> Answer<api::MutateResponse> {
        self.down.check()?;
        answer(self.plugin.mutate_manifest_work(r.into_inner()).await)
    }
    async fn begin_abort(&self, r: Request<api::RolloutRequest>) -> Answer<api::Ack> {
        self.down.check()?;
        answer(self.plugin.begin_abort(r.into_inner()).await)
    }
    async fn validate_abort_completion(
        &self,
        r: Request<api::ValidateRequest>,
    ) -> Answer<api::ValidateResponse> {
        self.down.check()?;
        answer(self.plugin.validate_abort_completion(r.into_inner()).await)
    }
}

/// Serves a front on `front` for the plugin on `plugin` (both loopback `host:port`);
/// returns its switch. Its calls to the plugin end a second before the controllers' own
/// bound, so that a frozen plugin reaches them as a status, as it would directly.
pub async fn serve(front: &str, plugin: &str) -> anyhow::Result<BackendDown> {
    let config = WorkConfig::parse(&format!(
        "plugins:\n  - name: inner\n    endpoint: http://{plugin}\n"
    ))?;
    let inner = config
        .plugin("inner")
        .ok_or_else(|| anyhow::anyhow!("no plugin"))?;
    let bound = mwrs_plugin::client::CALL_TIMEOUT - Duration::from_secs(1);
    let client = PluginClient::new(inner)?.with_timeout(bound);
    let down = BackendDown::default();
    let service = RolloutPluginServer::new(Front {
        plugin: client,
        down: down.clone(),
    });
    let listener = tokio::net::TcpListener::bind(front).await?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    Ok(down)
}
