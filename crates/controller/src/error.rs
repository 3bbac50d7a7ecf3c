//! The controller's one error type. Every variant has a short metric label, so errors
//! can be counted by kind without leaking names into label values.

/// Why a reconcile (or a part of it) failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The hub refused or failed a request.
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// An optimistic-concurrency write lost a race; the next pass sees the new state.
    #[error("conflict on {what}: it changed since it was read")]
    Conflict { what: String },
    /// Some of a plan's writes failed; the first failure is kept.
    #[error("{failed} of {total} writes failed; first: {first}")]
    Writes {
        failed: usize,
        total: usize,
        first: Box<Error>,
    },
    #[error("cannot serialize {what}: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The object lacks a field the controller needs (name, namespace).
    #[error("object has no {0}")]
    MissingField(&'static str),
    /// The installed CRD cannot hold this controller's state (rules §10.15).
    #[error("the installed ManifestWorkReplicaSet CRD is not usable: {0}")]
    Crd(String),
    /// A revision's name is held by an object that is not this revision (another owner's,
    /// other content, or no template at all): the collision count moves on.
    #[error("revision name {what} is taken by another object; collisionCount bumped")]
    RevisionNameTaken { what: String },
    /// This replica cannot prove it still holds the leader lease; it writes nothing.
    #[error("not the leader: the lease was not confirmed in time; write refused")]
    NotLeader,
    /// The metrics endpoint's certificate cannot be made or read.
    #[error("metrics TLS: {0}")]
    Tls(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps a kube error with what was being done; a 409 becomes [`Error::Conflict`].
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Self {
        let what = what.into();
        if is_status(&source, 409) {
            return Error::Conflict { what };
        }
        Error::Kube { what, source }
    }

    /// The label used for this error in metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Conflict { .. } => "conflict",
            Error::Writes { first, .. } => match **first {
                Error::Conflict { .. } => "conflict",
                _ => "writes",
            },
            Error::Serialize { .. } => "serialize",
            Error::MissingField(_) => "missing_field",
            Error::Crd(_) => "crd",
            Error::NotLeader => "not_leader",
            Error::Tls(_) => "tls",
            Error::RevisionNameTaken { .. } => "revision_name_taken",
        }
    }

    /// A lost race, worth a quick retry rather than a backoff.
    pub fn is_conflict(&self) -> bool {
        match self {
            Error::Conflict { .. } => true,
            Error::Writes { first, .. } => first.is_conflict(),
            _ => false,
        }
    }
}

/// Is `e` an API error with HTTP status `code`?
pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}
