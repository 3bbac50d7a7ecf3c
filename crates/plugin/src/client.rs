//! The controller's side of a plugin connection: one lazily connected channel per plugin,
//! every call bounded by [`CALL_TIMEOUT`] (retries included) and retried with backoff
//! while the plugin answers UNAVAILABLE.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Response, Status};

use crate::config::PluginConfig;
use crate::v1alpha1::rollout_plugin_client::RolloutPluginClient;
use crate::v1alpha1::{
    Ack, InitializeRequest, InitializeResponse, MutateRequest, MutateResponse, RolloutRequest,
    ValidateRequest, ValidateResponse,
};

/// The longest a call may take, retries included (the design's bound).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a call is sent again after UNAVAILABLE (a connection refused while the plugin
/// restarts). Past it the status is the answer: the plugin says it is down, and its
/// outage counts from then (SPEC §12.6) instead of hiding behind retries for the whole
/// time bound while deadlines run.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(2);

/// Why a connection to a plugin cannot even be set up (a bad URI or CA).
#[derive(Debug, thiserror::Error)]
#[error("plugin {plugin}: {reason}")]
pub struct SetupError {
    pub plugin: String,
    pub reason: String,
}

/// A registered plugin, ready to call.
#[derive(Clone, Debug)]
pub struct PluginClient {
    name: String,
    inner: RolloutPluginClient<Channel>,
    timeout: Duration,
}

impl PluginClient {
    /// The client of `cfg`'s plugin; nothing is dialled until the first call.
    pub fn new(cfg: &PluginConfig) -> Result<Self, SetupError> {
        let fail = |reason: String| SetupError {
            plugin: cfg.name.clone(),
            reason,
        };
        let mut endpoint = Endpoint::from_shared(cfg.uri.clone())
            .map_err(|e| fail(format!("endpoint {}: {e}", cfg.uri)))?
            .connect_timeout(CONNECT_TIMEOUT);
        if let (Some(domain), Some(pem)) = (&cfg.tls_domain, &cfg.ca_pem) {
            let mut tls = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(pem))
                .domain_name(domain.clone());
            if let Some(c) = &cfg.client_certificate {
                let read = |p: &std::path::Path| {
                    std::fs::read(p).map_err(|e| {
                        fail(format!("clientCertificate: reading {}: {e}", p.display()))
                    })
                };
                let identity = Identity::from_pem(read(&c.cert_file)?, read(&c.key_file)?);
                tls = tls.identity(identity);
            }
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|e| fail(format!("TLS: {e}")))?;
        }
        Ok(Self {
            name: cfg.name.clone(),
            inner: RolloutPluginClient::new(endpoint.connect_lazy()),
            timeout: CALL_TIMEOUT,
        })
    }

    /// The same client with a shorter bound on each call (tests).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.min(CALL_TIMEOUT);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub async fn initialize(&self, r: InitializeRequest) -> Result<InitializeResponse, Status> {
        self.call(r, |mut c, r| async move { c.initialize(r).await })
            .await
    }

    pub async fn begin_rollout(&self, r: RolloutRequest) -> Result<Ack, Status> {
        self.call(r, |mut c, r| async move { c.begin_rollout(r).await })
            .await
    }

    pub async fn progress_rollout(&self, r: RolloutRequest) -> Result<Ack, Status> {
        self.call(r, |mut c, r| async move { c.progress_rollout(r).await })
            .await
    }

    pub async fn validate_rollout_completion(
        &self,
        r: ValidateRequest,
    ) -> Result<ValidateResponse, Status> {
        self.call(r, |mut c, r| async move {
            c.validate_rollout_completion(r).await
        })
        .await
    }

    pub async fn mutate_manifest_work(&self, r: MutateRequest) -> Result<MutateResponse, Status> {
        self.call(r, |mut c, r| async move { c.mutate_manifest_work(r).await })
            .await
    }

    pub async fn begin_abort(&self, r: RolloutRequest) -> Result<Ack, Status> {
        self.call(r, |mut c, r| async move { c.begin_abort(r).await })
            .await
    }

    pub async fn validate_abort_completion(
        &self,
        r: ValidateRequest,
    ) -> Result<ValidateResponse, Status> {
        self.call(
            r,
            |mut c, r| async move { c.validate_abort_completion(r).await },
        )
        .await
    }

    /// One call, sent again after UNAVAILABLE for a moment ([`UNAVAILABLE_RETRY`]); the
    /// remaining time travels with each attempt as its gRPC deadline.
    async fn call<Q, A, F, Fut>(&self, request: Q, send: F) -> Result<A, Status>
    where
        Q: Clone,
        F: Fn(RolloutPluginClient<Channel>, tonic::Request<Q>) -> Fut,
        Fut: Future<Output = Result<Response<A>, Status>>,
    {
        let start = Instant::now();
        let deadline = start + self.timeout;
        let retry_until = start + UNAVAILABLE_RETRY.min(self.timeout);
        let mut backoff = FIRST_BACKOFF;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut r = tonic::Request::new(request.clone());
            r.set_timeout(left);
            let answer = tokio::time::timeout(left, send(self.inner.clone(), r)).await;
            let retry = Instant::now() + backoff < retry_until;
            match answer {
                Ok(Ok(a)) => return Ok(a.into_inner()),
                Ok(Err(s)) if s.code() == Code::Unavailable && retry => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Ok(Err(s)) => return Err(s),
                Err(_) => {
                    return Err(Status::deadline_exceeded(format!(
                        "no answer within {:?}",
                        self.timeout
                    )));
                }
            }
        }
    }
}
