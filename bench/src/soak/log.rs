//! What the soak saw, in one time-ordered log: every ManifestWork, revision, MWRS status
//! and Lease change its watches delivered, every write the API server's audit log
//! attributes to a replica, and the soak's own actions and faults. The invariants
//! (`invariants.rs`) are checked over this log alone.

/// Milliseconds since the Unix epoch: watch deliveries, audit timestamps and the
/// controllers' own stamps share this machine's clock.
pub type Ms = i64;

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub at: Ms,
    pub seen: Seen,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    /// A ManifestWork of MWRS `mwrs` as a watch delivered it (or its deletion).
    Work {
        mwrs: String,
        cluster: String,
        uid: String,
        generation: i64,
        /// Its `controller-hash` label.
        revision: Option<String>,
        /// When the controller wrote that revision into it (its revision-applied-at
        /// annotation), by the controller's clock.
        applied_at: Option<Ms>,
        deleted: bool,
    },
    /// A ControllerRevision of `mwrs` (or its deletion).
    Revision {
        mwrs: String,
        hash: String,
        deleted: bool,
    },
    /// An MWRS status.
    Status {
        mwrs: String,
        /// The revisions it names (current, update, the last abort's and where it went).
        named: Vec<String>,
        /// The update revision held by an abort, with the abort's time.
        held: Option<(String, Ms)>,
    },
    /// The Lease names `replica` (None: a holder the soak did not start) from `at`.
    Leader { replica: Option<String> },
    /// A write the API server answered with `code`, by `replica`.
    Write {
        replica: String,
        verb: String,
        resource: String,
        namespace: String,
        name: String,
        code: u16,
    },
    /// The soak's own action starting round `round` on `mwrs`.
    Action {
        round: u32,
        mwrs: String,
        what: String,
    },
    /// The round settled: `outcome` is None when the state is the one the rules predict,
    /// else what differs (or that it did not settle within the bound).
    Settled {
        round: u32,
        mwrs: String,
        aborted: bool,
        outcome: Option<String>,
    },
    Fault {
        kind: String,
        target: String,
        start: bool,
    },
    /// A window with no action and no fault: the controllers must not write.
    Idle { start: bool },
}

#[derive(Default)]
pub struct Log {
    pub entries: Vec<Entry>,
}

impl Log {
    pub fn push(&mut self, at: Ms, seen: Seen) {
        self.entries.push(Entry { at, seen });
    }

    /// The entries in time order (stable: what was logged first stays first at a tie).
    pub fn sorted(&self) -> Vec<&Entry> {
        let mut v: Vec<&Entry> = self.entries.iter().collect();
        v.sort_by_key(|e| e.at);
        v
    }
}

/// Now, in [`Ms`].
pub fn now_ms() -> Ms {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Ms)
}

/// An RFC 3339 time in [`Ms`] (None when it does not parse).
pub fn parse_ms(s: &str) -> Option<Ms> {
    let t: jiff::Timestamp = s.parse().ok()?;
    Some(t.as_millisecond())
}
