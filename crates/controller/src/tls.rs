//! The serving certificate of the metrics endpoint: `tls.crt` and `tls.key` (PEM) from a
//! directory — a mounted Secret, rotated by cert-manager or by hand, re-read when either
//! file changes — or, without one, a self-signed certificate made at start (what
//! controller-runtime's secure metrics do; Prometheus then scrapes with
//! `insecure_skip_verify` or the Service's CA).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::error::{Error, Result};

/// How often the certificate files are checked for a change.
const RELOAD_CHECK: Duration = Duration::from_secs(30);

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(what: impl std::fmt::Display) -> Error {
    Error::Tls(what.to_string())
}

/// A TLS acceptor serving the certificate of `dir` (reloaded on change), or a
/// self-signed one for `names` when `dir` is None.
pub fn acceptor(dir: Option<&Path>, names: &[String]) -> Result<TlsAcceptor> {
    let resolver: Arc<dyn ResolvesServerCert> = match dir {
        Some(dir) => CertDir::watch(dir.to_path_buf())?,
        None => Arc::new(Fixed(Arc::new(self_signed(names)?))),
    };
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A certificate for `names` signed by its own key.
fn self_signed(names: &[String]) -> Result<CertifiedKey> {
    let made = rcgen::generate_simple_self_signed(names.to_vec()).map_err(tls_error)?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der()).map_err(tls_error)?;
    certified(vec![made.cert.der().clone()], &key)
}

fn certified(chain: Vec<CertificateDer<'static>>, key: &PrivateKeyDer<'_>) -> Result<CertifiedKey> {
    let key = provider()
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(tls_error)?;
    Ok(CertifiedKey::new(chain, key))
}

struct Fixed(Arc<CertifiedKey>);

impl std::fmt::Debug for Fixed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("self-signed certificate")
    }
}

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// `tls.crt` + `tls.key` of a directory, the pair last read whole.
#[derive(Debug)]
struct CertDir {
    dir: PathBuf,
    current: RwLock<(Option<SystemTime>, Arc<CertifiedKey>)>,
}

impl CertDir {
    /// Reads the pair (an error if it cannot be used) and checks it for changes in the
    /// background; a changed pair that cannot be read is logged and the old one kept.
    fn watch(dir: PathBuf) -> Result<Arc<Self>> {
        let stamp = stamp(&dir);
        let key = read_pair(&dir)?;
        let this = Arc::new(Self {
            dir,
            current: RwLock::new((stamp, Arc::new(key))),
        });
        let weak = Arc::downgrade(&this);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RELOAD_CHECK).await;
                let Some(this) = weak.upgrade() else { return };
                this.reload_if_changed();
            }
        });
        Ok(this)
    }

    fn reload_if_changed(&self) {
        let stamp = stamp(&self.dir);
        let seen = self.current.read().map(|c| c.0).unwrap_or(None);
        if stamp == seen {
            return;
        }
        match read_pair(&self.dir) {
            Ok(key) => {
                if let Ok(mut c) = self.current.write() {
                    *c = (stamp, Arc::new(key));
                }
                tracing::info!(dir = %self.dir.display(), "metrics serving certificate reloaded");
            }
            Err(e) => tracing::warn!(
                dir = %self.dir.display(), error = %e,
                "metrics serving certificate changed but cannot be read; keeping the previous one"
            ),
        }
    }
}

impl ResolvesServerCert for CertDir {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.1.clone())
    }
}

/// The later modification time of the two files (a Secret volume swaps both at once).
fn stamp(dir: &Path) -> Option<SystemTime> {
    ["tls.crt", "tls.key"]
        .iter()
        .filter_map(|f| {
            std::fs::metadata(dir.join(f))
                .and_then(|m| m.modified())
                .ok()
        })
        .max()
}

fn read_pair(dir: &Path) -> Result<CertifiedKey> {
    let crt = dir.join("tls.crt");
    let chain = CertificateDer::pem_file_iter(&crt)
        .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| tls_error(format!("{}: {e}", crt.display())))?;
    if chain.is_empty() {
        return Err(tls_error(format!("{}: no certificate", crt.display())));
    }
    let key_file = dir.join("tls.key");
    let key = PrivateKeyDer::from_pem_file(&key_file)
        .map_err(|e| tls_error(format!("{}: {e}", key_file.display())))?;
    certified(chain, &key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_names_the_given_hosts() {
        let key = self_signed(&["localhost".into(), "mwrs-0".into()]).expect("made");
        assert_eq!(key.cert.len(), 1);
    }

    #[tokio::test]
    async fn a_directory_without_the_pair_is_an_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("mwrs-tls-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let Err(err) = acceptor(Some(&dir), &[]) else {
            panic!("an acceptor without files");
        };
        assert!(err.to_string().contains("tls.crt"), "{err}");
    }

    #[tokio::test]
    async fn the_pair_of_a_directory_is_served_and_a_broken_change_keeps_it() {
        let dir = std::env::temp_dir().join(format!("mwrs-tls-pair-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        std::fs::write(dir.join("tls.crt"), made.cert.pem()).expect("write");
        std::fs::write(dir.join("tls.key"), made.signing_key.serialize_pem()).expect("write");
        let certs = CertDir::watch(dir.clone()).expect("reads the pair");
        let before = certs.current.read().expect("lock").1.clone();
        std::fs::write(dir.join("tls.key"), "not a key").expect("write");
        certs.reload_if_changed();
        let after = certs.current.read().expect("lock").1.clone();
        assert!(Arc::ptr_eq(&before, &after), "the readable pair is kept");
    }
}
