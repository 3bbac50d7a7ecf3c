//! The controller's side of a plugin connection: one lazily connected channel per plugin,
//! every call bounded by [`CALL_TIMEOUT`] (retries included) and retried with backoff
//! while the plugin answers UNAVAILABLE. A client certificate is read again when its
//! files change (a renewal by cert-manager or any other rotation), so that the process
//! never presents one past its expiry while a renewed one sits on disk.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tonic::Response;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
pub use tonic::{Code, Status};

use crate::config::{ClientCertificate, PluginConfig};
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
/// outage counts from then (rules §12.6) instead of hiding behind retries for the whole
/// time bound while deadlines run.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(2);

/// Why a connection to a plugin cannot even be set up (a bad URI or CA).
#[derive(Debug, thiserror::Error)]
#[error("plugin {plugin}: {reason}")]
pub struct SetupError {
    pub plugin: String,
    pub reason: String,
}

/// Does `s` say the plugin does not work (unreachable, too slow, not implementing the
/// API, refusing the controller), rather than that it works and refuses or cannot do this
/// one call? The first holds every cluster behind the plugin and runs its outage clock;
/// the second counts in that cluster's run of errors.
pub fn is_down(s: &Status) -> bool {
    matches!(
        s.code(),
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Cancelled
            | Code::Unknown
            | Code::Unimplemented
            | Code::Unauthenticated
            | Code::PermissionDenied
    )
}

/// `CODE: message` of a gRPC status, its first line only (uncut).
pub fn status_text(s: &Status) -> String {
    match s.message().lines().next().unwrap_or_default() {
        "" => format!("{:?}", s.code()),
        m => format!("{:?}: {m}", s.code()),
    }
}

/// How often the client certificate's files are read again to see whether they changed.
pub const CERT_RECHECK: Duration = Duration::from_secs(30);

/// A registered plugin, ready to call.
#[derive(Clone, Debug)]
pub struct PluginClient {
    name: String,
    dial: Arc<Mutex<Dial>>,
    timeout: Duration,
    cert_recheck: Duration,
}

/// The channel calls go through, and the client certificate it was made with.
#[derive(Debug)]
struct Dial {
    cfg: PluginConfig,
    inner: RolloutPluginClient<Channel>,
    /// The PEM pair the channel presents (None: no client certificate).
    pair: Option<(Vec<u8>, Vec<u8>)>,
    /// When that certificate expires, read once per pair.
    expires: Option<Result<i64, String>>,
    checked: Instant,
}

impl PluginClient {
    /// The client of `cfg`'s plugin; nothing is dialled until the first call.
    pub fn new(cfg: &PluginConfig) -> Result<Self, SetupError> {
        let pair = match &cfg.client_certificate {
            Some(c) => Some(read_pair(c).map_err(|reason| setup_error(cfg, reason))?),
            None => None,
        };
        let inner = channel(cfg, pair.as_ref()).map_err(|reason| setup_error(cfg, reason))?;
        let dial = Dial {
            cfg: cfg.clone(),
            inner,
            expires: pair.as_ref().map(|(cert, _)| not_after(cert)),
            pair,
            checked: Instant::now(),
        };
        Ok(Self {
            name: cfg.name.clone(),
            dial: Arc::new(Mutex::new(dial)),
            timeout: CALL_TIMEOUT,
            cert_recheck: CERT_RECHECK,
        })
    }

    /// The channel to call through: a new one when the client certificate's files hold
    /// another pair than the one in use (looked at most every [`CERT_RECHECK`]). A pair
    /// that cannot be read or used keeps the channel in use, and says why.
    fn channel(&self) -> RolloutPluginClient<Channel> {
        let mut dial = self.dial();
        if dial.checked.elapsed() >= self.cert_recheck {
            dial.checked = Instant::now();
            if let Err(reason) = dial.reload() {
                tracing::warn!(plugin = %self.name, %reason, "client certificate not reloaded; the one in use stays");
            }
        }
        dial.inner.clone()
    }

    /// When the client certificate in use expires (its notAfter), if there is one.
    pub fn client_cert_not_after(&self) -> Option<Result<i64, String>> {
        self.dial().expires.clone()
    }

    /// The bound on each call, retries included.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn dial(&self) -> std::sync::MutexGuard<'_, Dial> {
        match self.dial.lock() {
            Ok(d) => d,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The same client looking at its certificate's files every `every` (tests).
    pub fn with_cert_recheck(mut self, every: Duration) -> Self {
        self.cert_recheck = every;
        self
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
            let answer = tokio::time::timeout(left, send(self.channel(), r)).await;
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

impl Dial {
    /// A new channel when the files hold another pair than the one in use.
    fn reload(&mut self) -> Result<(), String> {
        let Some(files) = &self.cfg.client_certificate else {
            return Ok(());
        };
        let pair = read_pair(files)?;
        if self.pair.as_ref() == Some(&pair) {
            return Ok(());
        }
        let expires = not_after(&pair.0)?;
        self.inner = channel(&self.cfg, Some(&pair))?;
        tracing::info!(plugin = %self.cfg.name, "client certificate changed on disk: new connections present it");
        self.pair = Some(pair);
        self.expires = Some(Ok(expires));
        Ok(())
    }
}

fn setup_error(cfg: &PluginConfig, reason: String) -> SetupError {
    SetupError {
        plugin: cfg.name.clone(),
        reason,
    }
}

/// The certificate and key files' contents, as one pair: read again when the certificate
/// changed while the key was read (a rotation between the two reads).
fn read_pair(c: &ClientCertificate) -> Result<(Vec<u8>, Vec<u8>), String> {
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("clientCertificate: reading {}: {e}", p.display()))
    };
    let mut cert = read(&c.cert_file)?;
    for _ in 0..3 {
        let key = read(&c.key_file)?;
        let again = read(&c.cert_file)?;
        if again == cert {
            return Ok((cert, key));
        }
        cert = again;
    }
    Err("clientCertificate: the files keep changing while read".into())
}

/// A lazily connected channel to `cfg`'s plugin presenting `pair`.
fn channel(
    cfg: &PluginConfig,
    pair: Option<&(Vec<u8>, Vec<u8>)>,
) -> Result<RolloutPluginClient<Channel>, String> {
    let mut endpoint = Endpoint::from_shared(cfg.uri.clone())
        .map_err(|e| format!("endpoint {}: {e}", cfg.uri))?
        .connect_timeout(CONNECT_TIMEOUT);
    if let (Some(domain), Some(pem)) = (&cfg.tls_domain, &cfg.ca_pem) {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(pem))
            .domain_name(domain.clone());
        if let Some((cert, key)) = pair {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| format!("TLS: {e}"))?;
    }
    Ok(RolloutPluginClient::new(endpoint.connect_lazy()))
}

/// The notAfter of the first certificate in `pem`, in seconds since the epoch.
pub fn not_after(pem: &[u8]) -> Result<i64, String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| format!("clientCertificate: not PEM: {e}"))?;
    let cert = block
        .parse_x509()
        .map_err(|e| format!("clientCertificate: not an X.509 certificate: {e}"))?;
    Ok(cert.validity().not_after.timestamp())
}
