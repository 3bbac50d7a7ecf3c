//! `mwrs-feedback-plugin`: a rollout plugin (issue #18) that judges each cluster from its
//! ManifestWork's status feedback, read from the hub: e.g. a Deployment's `ReadyReplicas
//! == Replicas`, held for a soak. Its checks are in its config file ([`config`]); it
//! keeps no state, so every answer depends on the hub and the question alone. The binary
//! serves it ([`serve`]); the demo runs it in its own process the same way.

pub mod config;
mod expr;
mod judge;

use std::sync::Arc;

use anyhow::Context as _;
use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use mwrs_plugin::v1alpha1 as api;
use mwrs_plugin::v1alpha1::rollout_plugin_server::{RolloutPlugin, RolloutPluginServer};
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

use config::{Check, Config};
use judge::{Asked, Judged};

/// The plugin's service: answers from the hub `client` reads, judged by `checks`.
pub struct Feedback {
    works: WorkReader,
    checks: Arc<Vec<Check>>,
}

/// Reads ManifestWorks as JSON (the plugin needs their status feedback only).
#[derive(Clone)]
pub(crate) struct WorkReader {
    client: Client,
    resource: ApiResource,
}

impl WorkReader {
    fn new(client: Client) -> Self {
        let gvk = GroupVersionKind::gvk("work.open-cluster-management.io", "v1", "ManifestWork");
        Self {
            client,
            resource: ApiResource::from_gvk(&gvk),
        }
    }

    /// The ManifestWork as JSON; None when it does not exist (an answer, not an error).
    /// A read the hub refuses (403 in one cluster namespace, 429, 500) is an error about
    /// this cluster only (INTERNAL: the controller holds that cluster and counts it
    /// against the budget); a hub that does not answer at all is UNAVAILABLE (the plugin
    /// cannot judge anything).
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<serde_json::Value>, Status> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &self.resource);
        let o = api
            .get_opt(name)
            .await
            .map_err(|e| read_error(&format!("{namespace}/{name}"), e))?;
        o.map(|o| serde_json::to_value(o).map_err(|e| Status::internal(e.to_string())))
            .transpose()
    }
}

/// The answer to a question whose ManifestWork `what` could not be read: about that
/// cluster when the hub answered with an error, about the plugin when it did not answer.
fn read_error(what: &str, e: kube::Error) -> Status {
    let why = format!("reading ManifestWork {what}: {e}");
    match e {
        kube::Error::Api(_) => Status::internal(why),
        _ => Status::unavailable(why),
    }
}

fn ack() -> Result<Response<api::Ack>, Status> {
    Ok(Response::new(api::Ack {}))
}

#[tonic::async_trait]
impl RolloutPlugin for Feedback {
    async fn initialize(
        &self,
        _: Request<api::InitializeRequest>,
    ) -> Result<Response<api::InitializeResponse>, Status> {
        // Answering means the hub answers too (`/version` needs no grant).
        self.works
            .client
            .apiserver_version()
            .await
            .map_err(|e| Status::unavailable(format!("the hub does not answer: {e}")))?;
        Ok(Response::new(api::InitializeResponse {
            description: format!(
                "mwrs-feedback-plugin {}, {} check(s)",
                env!("CARGO_PKG_VERSION"),
                self.checks.len()
            ),
        }))
    }

    async fn begin_rollout(
        &self,
        _: Request<api::RolloutRequest>,
    ) -> Result<Response<api::Ack>, Status> {
        ack()
    }

    async fn progress_rollout(
        &self,
        _: Request<api::RolloutRequest>,
    ) -> Result<Response<api::Ack>, Status> {
        ack()
    }

    async fn validate_rollout_completion(
        &self,
        r: Request<api::ValidateRequest>,
    ) -> Result<Response<api::ValidateResponse>, Status> {
        let r = r.into_inner();
        let Some(work) = self.works.get(&r.cluster, &r.manifest_work).await? else {
            return Ok(Response::new(api::ValidateResponse {
                verdict: api::Verdict::InProgress.into(),
                message: format!(
                    "ManifestWork {}/{} does not exist",
                    r.cluster, r.manifest_work
                ),
            }));
        };
        let asked = Asked {
            generation: r.generation,
            since: r
                .since
                .and_then(|t| Timestamp::new(t.seconds, t.nanos).ok()),
        };
        let (verdict, message) = match judge::judge(&work, &asked, &self.checks, Timestamp::now()) {
            Judged::Succeeded(m) => (api::Verdict::Succeeded, m),
            Judged::Failed(m) => (api::Verdict::Failed, m),
            Judged::InProgress(m) => (api::Verdict::InProgress, m),
        };
        tracing::info!(cluster = %r.cluster, revision = %r.revision, verdict = verdict.as_str_name(), %message, "validated");
        Ok(Response::new(api::ValidateResponse {
            verdict: verdict.into(),
            message,
        }))
    }

    async fn mutate_manifest_work(
        &self,
        _: Request<api::MutateRequest>,
    ) -> Result<Response<api::MutateResponse>, Status> {
        // Written unchanged.
        Ok(Response::new(api::MutateResponse::default()))
    }

    async fn begin_abort(
        &self,
        _: Request<api::RolloutRequest>,
    ) -> Result<Response<api::Ack>, Status> {
        ack()
    }

    async fn validate_abort_completion(
        &self,
        r: Request<api::ValidateRequest>,
    ) -> Result<Response<api::ValidateResponse>, Status> {
        // The stable revision is judged by the same checks.
        self.validate_rollout_completion(r).await
    }
}

/// Serves the plugin of `config` on `listener` (TLS when `config.tls` says so) until
/// the server fails.
pub async fn serve(
    config: Config,
    client: Client,
    listener: tokio::net::TcpListener,
) -> anyhow::Result<()> {
    let service = Feedback {
        works: WorkReader::new(client),
        checks: Arc::new(config.checks),
    };
    let mut server = Server::builder();
    if let Some(tls) = &config.tls {
        let cert = std::fs::read(&tls.cert_file)
            .with_context(|| format!("reading {}", tls.cert_file.display()))?;
        let key = std::fs::read(&tls.key_file)
            .with_context(|| format!("reading {}", tls.key_file.display()))?;
        server =
            server.tls_config(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))?;
    }
    tracing::info!(addr = %listener.local_addr()?, tls = config.tls.is_some(), "serving");
    server
        .add_service(RolloutPluginServer::new(service))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_the_hub_refuses_is_about_that_cluster_only() {
        let refused = kube::Error::Api(
            kube::core::Status::failure("forbidden", "Forbidden")
                .with_code(403)
                .boxed(),
        );
        let s = read_error("c1/ns.app", refused);
        assert_eq!(s.code(), tonic::Code::Internal, "{s:?}");
        assert!(s.message().contains("c1/ns.app"), "{s:?}");
        let silent = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(
            read_error("c1/ns.app", silent).code(),
            tonic::Code::Unavailable
        );
    }
}
