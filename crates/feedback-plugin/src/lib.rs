//! `mwrs-feedback-plugin`: a rollout plugin (issue #18) that judges each cluster from its
//! ManifestWork's status feedback, read from the hub: e.g. a Deployment's `ReadyReplicas
//! == Replicas`, held for a soak. Its checks are in its config file ([`config`]); it
//! keeps no state, so every answer depends on the hub and the question alone. The binary
//! serves it ([`serve`]); the demo runs it in its own process the same way.

pub mod config;
mod expr;
mod judge;
mod works;

use std::sync::Arc;

use anyhow::Context as _;
use jiff::Timestamp;
use kube::Client;
use mwrs_plugin::v1alpha1 as api;
use mwrs_plugin::v1alpha1::rollout_plugin_server::{RolloutPlugin, RolloutPluginServer};
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

use config::{Check, Config};
use judge::{Asked, Judged};
use works::WorkReader;

/// The plugin's service: answers from the hub `client` reads, judged by `checks`.
pub struct Feedback {
    works: WorkReader,
    checks: Arc<Vec<Check>>,
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
            .hub_answers()
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
        let asked = Asked {
            generation: r.generation,
            since: r
                .since
                .and_then(|t| Timestamp::new(t.seconds, t.nanos).ok()),
        };
        let judge =
            |work: &serde_json::Value| judge::judge(work, &asked, &self.checks, Timestamp::now());
        // The watched copy answers SUCCEEDED alone; anything else is read again first.
        let watched = self.works.watched(&r.cluster, &r.manifest_work);
        let judged = match watched.as_deref().map(judge) {
            Some(success @ Judged::Succeeded(_)) => success,
            _ => match self.works.get(&r.cluster, &r.manifest_work).await? {
                Some(work) => judge(&work),
                None => Judged::InProgress(format!(
                    "ManifestWork {}/{} does not exist",
                    r.cluster, r.manifest_work
                )),
            },
        };
        let (verdict, message) = match judged {
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
        works: match config.read {
            config::Read::Watch => WorkReader::watching(client),
            config::Read::Get => WorkReader::new(client),
        },
        checks: Arc::new(config.checks),
    };
    let mut server = Server::builder();
    if let Some(tls) = &config.tls {
        let cert = std::fs::read(&tls.cert_file)
            .with_context(|| format!("reading {}", tls.cert_file.display()))?;
        let key = std::fs::read(&tls.key_file)
            .with_context(|| format!("reading {}", tls.key_file.display()))?;
        let mut tls_config = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
        if let Some(ca) = &tls.client_ca_file {
            // Only a caller with a certificate this CA signed (the controller's
            // clientCertificate) gets an answer.
            let ca = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
            tls_config = tls_config.client_ca_root(Certificate::from_pem(ca));
        }
        server = server.tls_config(tls_config)?;
    }
    tracing::info!(addr = %listener.local_addr()?, tls = config.tls.is_some(), "serving");
    server
        .add_service(RolloutPluginServer::new(service))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
        .await?;
    Ok(())
}
