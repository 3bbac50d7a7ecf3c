//! The key this controller seals its marks on ManifestWorks with ([`mwrs_engine::marks`]):
//! kept in a Secret of its own namespace, so that every replica and every restart seals
//! and checks with the same key (rules §12.2, §12.6).
//!
//! The chart makes the Secret (and keeps it on uninstall); the controller then needs only
//! `get` on that one name. Without a chart, a replica allowed to create Secrets makes it
//! when there is none. The Secret is read with retries at start and again while running:
//! a changed key (a rotation) becomes the one marks are sealed with, and the previous one
//! is still believed for a grace period. A replica that cannot read a usable key seals
//! with a key of its own meanwhile, says so in its log and in a metric, and keeps trying.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use mwrs_api::labels;
use mwrs_engine::marks::{KeyRing, MarkKey, Marks};

use crate::metrics::Metrics;
use crate::plugins::{Plugins, ephemeral_key};

/// The Secret's data key holding the key's bytes.
pub const DATA_KEY: &str = "key";

/// How often a running replica reads the Secret again.
pub const DEFAULT_REREAD: Duration = Duration::from_secs(60);

/// How long a key replaced by a rotation still vouches for the marks it sealed.
pub const DEFAULT_GRACE: SignedDuration = SignedDuration::from_hours(24);

/// Why the key cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("Secret {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {namespace}/{name} is not a mark key: {why}")]
    Unusable {
        namespace: String,
        name: String,
        why: String,
    },
}

/// The Secret holding the key.
#[derive(Clone)]
pub struct KeySecret {
    api: Api<Secret>,
    namespace: String,
    name: String,
}

impl KeySecret {
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// The key in the Secret, made (32 random bytes) when there is none and this
    /// controller may create Secrets.
    pub async fn read(&self) -> Result<MarkKey, KeyError> {
        let secret = match self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.api_error(e))?
        {
            Some(s) => s,
            None => match self
                .api
                .create(&PostParams::default(), &new_secret(&self.name))
                .await
            {
                Ok(s) => s,
                // Another replica made it first: use that one.
                Err(kube::Error::Api(e)) if e.code == 409 => self
                    .api
                    .get(&self.name)
                    .await
                    .map_err(|e| self.api_error(e))?,
                Err(e) => return Err(self.api_error(e)),
            },
        };
        key_of(&secret).map_err(|why| KeyError::Unusable {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            why,
        })
    }

    /// [`KeySecret::read`], tried `attempts` times with a doubling pause (1 s, 2 s, ...)
    /// while the API answers an error; an unusable Secret is not tried again.
    pub async fn read_with_retries(&self, attempts: u32) -> Result<MarkKey, KeyError> {
        let mut pause = Duration::from_secs(1);
        let mut tried = 1;
        loop {
            match self.read().await {
                Err(e @ KeyError::Api { .. }) if tried < attempts => {
                    tracing::warn!(error = %e, attempt = tried, "reading the mark key; trying again");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    tried += 1;
                }
                other => return other,
            }
        }
    }

    fn api_error(&self, source: kube::Error) -> KeyError {
        KeyError::Api {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }
}

/// The key in Secret `namespace/name`, made when there is none (one read, no retry).
pub async fn load_or_create(
    client: Client,
    namespace: &str,
    name: &str,
) -> Result<MarkKey, KeyError> {
    KeySecret::new(client, namespace, name).read().await
}

/// The key a Secret holds, or why it holds none. Only an Opaque Secret carrying the
/// [`labels::MARK_KEY`] label counts: under a name this controller may read, anyone who
/// could create a Secret might otherwise hand it a token or a key of their choosing
/// (security review K1).
pub fn key_of(secret: &Secret) -> Result<MarkKey, String> {
    let type_ = secret.type_.as_deref().unwrap_or("Opaque");
    if type_ != "Opaque" {
        return Err(format!("type {type_}, not Opaque"));
    }
    let labelled = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::MARK_KEY))
        .is_some_and(|v| v == "true");
    if !labelled {
        return Err(format!("no label {}=true", labels::MARK_KEY));
    }
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    MarkKey::new(bytes).map_err(|e| format!("data.{DATA_KEY}: {e}"))
}

fn new_secret(name: &str) -> Secret {
    let bytes: [u8; 32] = rand::random();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [
                    (
                        "app.kubernetes.io/managed-by".to_string(),
                        "mwrs-controller".to_string(),
                    ),
                    (labels::MARK_KEY.to_string(), "true".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some([(DATA_KEY.to_string(), ByteString(bytes.to_vec()))].into()),
        ..Default::default()
    }
}

/// The keys a replica holds, and how it came by them. Pure: reads are handed in with the
/// time they were made.
#[derive(Clone, Debug)]
pub struct KeyHolding {
    current: MarkKey,
    /// Read from the Secret (else made by this process, believed by no other).
    shared: bool,
    /// The key the current one replaced, believed until the time given.
    previous: Option<(MarkKey, Timestamp)>,
}

/// What a read changed.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyChange {
    None,
    /// The Secret holds another key than the one marks were sealed with.
    Rotated,
    /// The shared key, read for the first time by a replica sealing with its own.
    Shared,
    /// The previous key's grace ended.
    PreviousDropped,
}

impl KeyHolding {
    pub fn shared(key: MarkKey) -> Self {
        Self {
            current: key,
            shared: true,
            previous: None,
        }
    }

    /// A key of this process, while the Secret cannot be read.
    pub fn own() -> Self {
        Self {
            current: ephemeral_key(),
            shared: false,
            previous: None,
        }
    }

    pub fn is_own(&self) -> bool {
        !self.shared
    }

    /// Takes in what a read of the Secret found at `now` (None: it could not be read; the
    /// keys held are kept). A new key is sealed with from now on; the one it replaces is
    /// believed until `now + grace`.
    pub fn read(
        &mut self,
        read: Option<MarkKey>,
        now: Timestamp,
        grace: SignedDuration,
    ) -> KeyChange {
        let expired = self
            .previous
            .as_ref()
            .is_some_and(|(_, until)| *until <= now);
        if expired {
            self.previous = None;
        }
        let change = match read {
            Some(key) if key != self.current => {
                let was_shared = self.shared;
                let old = std::mem::replace(&mut self.current, key);
                let until = now.checked_add(grace).unwrap_or(Timestamp::MAX);
                self.previous = Some((old, until));
                self.shared = true;
                if was_shared {
                    KeyChange::Rotated
                } else {
                    KeyChange::Shared
                }
            }
            _ => KeyChange::None,
        };
        match change {
            KeyChange::None if expired => KeyChange::PreviousDropped,
            c => c,
        }
    }

    /// How marks are sealed and checked with these keys.
    pub fn marks(&self) -> Marks {
        let ring = KeyRing::new(self.current.clone());
        Marks::Sealed(match &self.previous {
            Some((previous, _)) => ring.with_previous(previous.clone()),
            None => ring,
        })
    }
}

/// The keys a replica holds, kept current: read again every so often, and at once when
/// the replica begins to lead.
pub struct KeyKeeper {
    secret: KeySecret,
    holding: std::sync::Mutex<KeyHolding>,
    plugins: Arc<Plugins>,
    metrics: Arc<Metrics>,
    grace: SignedDuration,
}

impl KeyKeeper {
    /// Hands `plugins` the marks of `holding` and keeps them.
    pub fn new(
        secret: KeySecret,
        holding: KeyHolding,
        plugins: Arc<Plugins>,
        metrics: Arc<Metrics>,
        grace: SignedDuration,
    ) -> Self {
        plugins.set_marks(holding.marks());
        metrics.mark_key_own.set(i64::from(holding.is_own()));
        Self {
            secret,
            holding: std::sync::Mutex::new(holding),
            plugins,
            metrics,
            grace,
        }
    }

    /// Reads the Secret once and takes in what changed. A replica that begins to lead
    /// calls it before its first pass: a rotation it missed as a standby must not make
    /// it distrust the marks the previous leader sealed with the new key.
    pub async fn refresh(&self) {
        let read = match self.secret.read().await {
            Ok(key) => Some(key),
            Err(e) => {
                tracing::warn!(error = %e, "reading the mark key");
                None
            }
        };
        let Ok(mut holding) = self.holding.lock() else {
            return;
        };
        let change = holding.read(read, Timestamp::now(), self.grace);
        match change {
            KeyChange::None => return,
            KeyChange::Rotated => tracing::info!(
                grace = %self.grace,
                "the mark key changed: marks are sealed with the new one; the previous one is believed for the grace period"
            ),
            KeyChange::Shared => {
                tracing::info!("the shared mark key is read: sealing with it from now on")
            }
            KeyChange::PreviousDropped => tracing::info!(
                "the previous mark key's grace ended: its marks are no longer believed"
            ),
        }
        self.plugins.set_marks(holding.marks());
        self.metrics.mark_key_own.set(i64::from(holding.is_own()));
    }

    /// [`KeyKeeper::refresh`] every `every`, for as long as the process runs.
    pub async fn keep(self: Arc<Self>, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            self.refresh().await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use mwrs_engine::marks::MarkPlace;

    fn key(b: u8) -> MarkKey {
        MarkKey::new(&[b; 32]).unwrap()
    }

    const HERE: MarkPlace<'static> = MarkPlace {
        mwrs_uid: "u",
        cluster: "c1",
        work: "ns.app",
        work_uid: None,
        at_creation: false,
    };

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    /// Security review K2: after a rotation the old key's marks stay believed for the
    /// grace period, then not; a read that fails changes nothing.
    #[test]
    fn a_rotation_believes_the_previous_key_for_the_grace_only() {
        let grace = SignedDuration::from_secs(3600);
        let mut h = KeyHolding::shared(key(1));
        let old = h.marks().seal(HERE, &[b"x"]);
        assert_eq!(h.read(Some(key(1)), at(0), grace), KeyChange::None);
        assert_eq!(
            h.read(None, at(10), grace),
            KeyChange::None,
            "a failed read"
        );
        assert_eq!(h.read(Some(key(2)), at(20), grace), KeyChange::Rotated);
        let marks = h.marks();
        assert!(marks.trusts(HERE, &[b"x"], &old), "within the grace");
        assert!(marks.seal(HERE, &[b"x"]).starts_with(&key(2).id()));
        assert_eq!(h.read(Some(key(2)), at(3619), grace), KeyChange::None);
        assert_eq!(
            h.read(Some(key(2)), at(3620), grace),
            KeyChange::PreviousDropped
        );
        assert!(!h.marks().trusts(HERE, &[b"x"], &old), "past the grace");
    }

    /// A replica that sealed with a key of its own takes the shared one when it can read
    /// it, and still believes what it sealed meanwhile for the grace.
    #[test]
    fn a_replica_with_a_key_of_its_own_takes_the_shared_one_when_it_can() {
        let grace = SignedDuration::from_secs(60);
        let mut h = KeyHolding::own();
        assert!(h.is_own());
        let mine = h.marks().seal(HERE, &[b"x"]);
        assert_eq!(h.read(None, at(0), grace), KeyChange::None);
        assert_eq!(h.read(Some(key(3)), at(5), grace), KeyChange::Shared);
        assert!(!h.is_own());
        assert!(h.marks().trusts(HERE, &[b"x"], &mine));
    }

    /// Security review K1: only an Opaque Secret with the label counts as the key.
    #[test]
    fn a_secret_is_a_key_only_when_opaque_and_labelled() {
        let good = new_secret("marks");
        assert!(key_of(&good).is_ok());
        let mut token = good.clone();
        token.type_ = Some("kubernetes.io/service-account-token".into());
        assert_eq!(
            key_of(&token).unwrap_err(),
            "type kubernetes.io/service-account-token, not Opaque"
        );
        let mut unlabelled = good.clone();
        unlabelled.metadata.labels = None;
        assert!(key_of(&unlabelled).unwrap_err().contains(labels::MARK_KEY));
        let mut short = good;
        short.data = Some([(DATA_KEY.to_string(), ByteString(vec![1; 8]))].into());
        assert!(key_of(&short).unwrap_err().contains("at least 32 bytes"));
    }
}
