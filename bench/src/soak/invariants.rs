//! The rules a soak's log must keep (rules §4, §10, §11, §12), each checked over the log
//! alone. The soak never removes a cluster from the placement nor deletes an MWRS while
//! it runs, so no ManifestWork may ever be deleted.

use std::collections::{BTreeMap, BTreeSet};

use super::log::{Entry, Ms, Seen};

/// How much later than an abort a write must be stamped to count as made after it: the
/// abort's time has whole seconds.
const ABORT_TIME_RESOLUTION: Ms = 1_000;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Two ManifestWorks of one MWRS in one cluster at once.
    Duplicated,
    /// A ManifestWork deleted while its cluster stayed selected.
    Lost,
    /// A ManifestWork created again (another uid) for a cluster that had one.
    Recreated,
    /// A write of ours by a replica while the Lease named the other.
    NonLeaderWrite,
    /// A ManifestWork given a revision an abort holds, after the abort.
    HeldRevisionWritten,
    /// A ControllerRevision deleted while the MWRS status named it.
    NamedRevisionDeleted,
    /// A ManifestWork back on a revision it had left, within one round, other than the
    /// way back of an abort.
    FlipFlop,
    /// A round that did not settle to the state the rules predict within the bound.
    Unsettled,
    /// A write of ours in a window with nothing to do.
    IdleWrite,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Duplicated,
        Kind::Lost,
        Kind::Recreated,
        Kind::NonLeaderWrite,
        Kind::HeldRevisionWritten,
        Kind::NamedRevisionDeleted,
        Kind::FlipFlop,
        Kind::Unsettled,
        Kind::IdleWrite,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Kind::Duplicated => "duplicated ManifestWork",
            Kind::Lost => "ManifestWork lost",
            Kind::Recreated => "ManifestWork re-created",
            Kind::NonLeaderWrite => "write by a non-leader",
            Kind::HeldRevisionWritten => "held revision written",
            Kind::NamedRevisionDeleted => "revision named by status deleted",
            Kind::FlipFlop => "ManifestWork flip-flop",
            Kind::Unsettled => "round not settled as predicted",
            Kind::IdleWrite => "write when idle",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    pub kind: Kind,
    pub at: Ms,
    pub detail: String,
}

/// Every violation in `entries` (in time order).
pub fn check(entries: &[&Entry]) -> Vec<Violation> {
    let mut found = Vec::new();
    found.extend(works(entries));
    found.extend(non_leader_writes(entries));
    found.extend(held_writes(entries));
    found.extend(named_deletes(entries));
    found.extend(flip_flops(entries));
    found.extend(unsettled(entries));
    found.extend(idle_writes(entries));
    found.sort_by_key(|v| v.at);
    found
}

fn violation(kind: Kind, at: Ms, detail: String) -> Violation {
    Violation { kind, at, detail }
}

/// Duplicated, lost and re-created ManifestWorks: per MWRS and cluster, the uids alive
/// and every uid ever seen.
fn works(entries: &[&Entry]) -> Vec<Violation> {
    let mut alive: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    let mut ever: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    let mut found = Vec::new();
    for e in entries {
        let Seen::Work {
            mwrs,
            cluster,
            uid,
            deleted,
            ..
        } = &e.seen
        else {
            continue;
        };
        let key = (mwrs.as_str(), cluster.as_str());
        let live = alive.entry(key).or_default();
        if *deleted {
            live.remove(uid.as_str());
            found.push(violation(
                Kind::Lost,
                e.at,
                format!("{mwrs} in {cluster} (uid {uid}) deleted"),
            ));
            continue;
        }
        let seen = ever.entry(key).or_default();
        if seen.insert(uid.as_str()) && seen.len() > 1 {
            found.push(violation(
                Kind::Recreated,
                e.at,
                format!("{mwrs} in {cluster}: uid {uid} after {seen:?}"),
            ));
        }
        if live.insert(uid.as_str()) && live.len() > 1 {
            found.push(violation(
                Kind::Duplicated,
                e.at,
                format!("{mwrs} in {cluster}: {live:?}"),
            ));
        }
    }
    found
}

/// The kinds of object a replica writes for an MWRS (Leases, Events and its own Secret
/// are not the rollout's state).
fn is_rollout_state(resource: &str) -> bool {
    matches!(
        resource,
        "manifestworks" | "controllerrevisions" | "manifestworkreplicasets"
    )
}

fn is_success(code: u16) -> bool {
    (200..300).contains(&code)
}

/// Successful writes of rollout state by a replica the Lease did not name at the time.
fn non_leader_writes(entries: &[&Entry]) -> Vec<Violation> {
    let mut leader: Option<&str> = None;
    let mut found = Vec::new();
    for e in entries {
        match &e.seen {
            Seen::Leader { replica } => leader = replica.as_deref(),
            Seen::Write {
                replica,
                verb,
                resource,
                namespace,
                name,
                code,
            } if is_rollout_state(resource)
                && is_success(*code)
                && leader != Some(replica.as_str()) =>
            {
                found.push(violation(
                    Kind::NonLeaderWrite,
                    e.at,
                    format!(
                        "{replica} {verb} {resource} {namespace}/{name} ({code}) while the \
                         lease named {leader:?}"
                    ),
                ));
            }
            _ => {}
        }
    }
    found
}

/// ManifestWorks given a held revision by a write stamped after the abort that holds it.
/// A retry lifts the holds of the aborts before it (the controller writes the revision
/// before the status that says so).
fn held_writes(entries: &[&Entry]) -> Vec<Violation> {
    let mut held: BTreeMap<&str, (&str, Ms)> = BTreeMap::new();
    let mut lifted: BTreeMap<&str, Ms> = BTreeMap::new();
    let mut found = Vec::new();
    for e in entries {
        match &e.seen {
            Seen::Action { mwrs, what, .. } if what.starts_with("Retry") => {
                lifted.insert(mwrs, e.at);
                held.remove(mwrs.as_str());
            }
            Seen::Status { mwrs, held: h, .. } => match h {
                Some((rev, at)) if lifted.get(mwrs.as_str()).is_none_or(|l| at > l) => {
                    held.insert(mwrs, (rev, *at));
                }
                _ => {
                    held.remove(mwrs.as_str());
                }
            },
            Seen::Work {
                mwrs,
                cluster,
                revision: Some(rev),
                applied_at: Some(applied),
                deleted: false,
                ..
            } => {
                if let Some((h, since)) = held.get(mwrs.as_str())
                    && h == rev
                    && *applied > since + ABORT_TIME_RESOLUTION
                {
                    found.push(violation(
                        Kind::HeldRevisionWritten,
                        e.at,
                        format!("{mwrs} in {cluster}: held revision {rev} written at {applied}"),
                    ));
                }
            }
            _ => {}
        }
    }
    found
}

/// Revisions deleted while the latest status of their MWRS named them.
fn named_deletes(entries: &[&Entry]) -> Vec<Violation> {
    let mut named: BTreeMap<&str, &[String]> = BTreeMap::new();
    let mut found = Vec::new();
    for e in entries {
        match &e.seen {
            Seen::Status { mwrs, named: n, .. } => {
                named.insert(mwrs, n);
            }
            Seen::Revision {
                mwrs,
                hash,
                deleted: true,
            } if named.get(mwrs.as_str()).is_some_and(|n| n.contains(hash)) => {
                found.push(violation(
                    Kind::NamedRevisionDeleted,
                    e.at,
                    format!("{mwrs}: revision {hash} deleted while its status named it"),
                ));
            }
            _ => {}
        }
    }
    found
}

/// Within each round, a ManifestWork never returns to a revision it left, but for one
/// way back to where it started in a round that aborted.
fn flip_flops(entries: &[&Entry]) -> Vec<Violation> {
    // Per round: each ManifestWork's revisions in order (consecutive repeats folded).
    let mut paths: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    let mut found = Vec::new();
    for e in entries {
        match &e.seen {
            Seen::Action { .. } => paths.clear(),
            Seen::Work {
                mwrs,
                cluster,
                revision: Some(rev),
                deleted: false,
                ..
            } => {
                let path = paths.entry((mwrs, cluster)).or_default();
                if path.last() != Some(&rev.as_str()) {
                    path.push(rev);
                }
            }
            Seen::Settled {
                round,
                mwrs,
                aborted,
                ..
            } => {
                for ((m, cluster), path) in &paths {
                    if m == mwrs && !allowed(path, *aborted) {
                        found.push(violation(
                            Kind::FlipFlop,
                            e.at,
                            format!("round {round}: {mwrs} in {cluster} went {path:?}"),
                        ));
                    }
                }
                paths.retain(|(m, _), _| m != mwrs);
            }
            _ => {}
        }
    }
    found
}

/// A path with no revision visited twice; an abort may add the start once more, at
/// the end.
fn allowed(path: &[&str], aborted: bool) -> bool {
    let (body, back) = match path {
        [first, .., last] if aborted && first == last && path.len() > 2 => {
            (&path[..path.len() - 1], true)
        }
        _ => (path, false),
    };
    let distinct: BTreeSet<&&str> = body.iter().collect();
    distinct.len() == body.len() && (!back || body.len() >= 2)
}

fn unsettled(entries: &[&Entry]) -> Vec<Violation> {
    entries
        .iter()
        .filter_map(|e| match &e.seen {
            Seen::Settled {
                round,
                mwrs,
                outcome: Some(why),
                ..
            } => Some(violation(
                Kind::Unsettled,
                e.at,
                format!("round {round} ({mwrs}): {why}"),
            )),
            _ => None,
        })
        .collect()
}

/// Writes of rollout state (any answer) inside an idle window.
fn idle_writes(entries: &[&Entry]) -> Vec<Violation> {
    let mut idle = false;
    let mut found = Vec::new();
    for e in entries {
        match &e.seen {
            Seen::Idle { start } => idle = *start,
            Seen::Write {
                replica,
                verb,
                resource,
                namespace,
                name,
                code,
            } if idle && is_rollout_state(resource) => found.push(violation(
                Kind::IdleWrite,
                e.at,
                format!("{replica} {verb} {resource} {namespace}/{name} ({code})"),
            )),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(at: Ms, cluster: &str, uid: &str, rev: &str, deleted: bool) -> Entry {
        Entry {
            at,
            seen: Seen::Work {
                mwrs: "web".into(),
                cluster: cluster.into(),
                uid: uid.into(),
                generation: 1,
                revision: Some(rev.into()),
                applied_at: Some(at),
                deleted,
            },
        }
    }

    fn at(at: Ms, seen: Seen) -> Entry {
        Entry { at, seen }
    }

    fn kinds(entries: &[Entry]) -> Vec<Kind> {
        let refs: Vec<&Entry> = entries.iter().collect();
        check(&refs).into_iter().map(|v| v.kind).collect()
    }

    fn write(replica: &str, resource: &str, code: u16) -> Seen {
        Seen::Write {
            replica: replica.into(),
            verb: "patch".into(),
            resource: resource.into(),
            namespace: "c1".into(),
            name: "soak.web".into(),
            code,
        }
    }

    fn leader(replica: &str) -> Seen {
        Seen::Leader {
            replica: Some(replica.into()),
        }
    }

    #[test]
    fn a_clean_log_has_no_violation() {
        let log = [
            at(0, leader("a")),
            at(
                1,
                Seen::Action {
                    round: 1,
                    mwrs: "web".into(),
                    what: "rollout".into(),
                },
            ),
            work(2, "c1", "u1", "r1", false),
            at(3, write("a", "manifestworks", 200)),
            work(4, "c1", "u1", "r2", false),
            at(
                5,
                Seen::Settled {
                    round: 1,
                    mwrs: "web".into(),
                    aborted: false,
                    outcome: None,
                },
            ),
            at(6, Seen::Idle { start: true }),
            at(7, write("a", "leases", 200)),
            at(8, Seen::Idle { start: false }),
        ];
        assert_eq!(kinds(&log), []);
    }

    #[test]
    fn works_deleted_duplicated_and_made_again_are_caught() {
        let log = [
            work(1, "c1", "u1", "r1", false),
            work(2, "c1", "u2", "r1", false),
            work(3, "c1", "u1", "r1", true),
        ];
        assert_eq!(kinds(&log), [Kind::Recreated, Kind::Duplicated, Kind::Lost]);
    }

    #[test]
    fn only_the_lease_holder_may_write_rollout_state() {
        let log = [
            at(1, leader("a")),
            at(2, write("b", "manifestworks", 200)),
            // Refused writes and writes of other kinds are not the rollout's state.
            at(3, write("b", "manifestworks", 409)),
            at(4, write("b", "leases", 200)),
            at(5, leader("b")),
            at(6, write("b", "controllerrevisions", 201)),
            at(7, write("a", "manifestworkreplicasets", 200)),
        ];
        assert_eq!(kinds(&log), [Kind::NonLeaderWrite, Kind::NonLeaderWrite]);
    }

    #[test]
    fn a_held_revision_is_written_only_before_its_abort() {
        let held = |h: Option<(&str, Ms)>| Seen::Status {
            mwrs: "web".into(),
            named: vec!["r1".into(), "r2".into()],
            held: h.map(|(r, t)| (r.to_string(), t)),
        };
        let retry = Seen::Action {
            round: 2,
            mwrs: "web".into(),
            what: "Retry(\"r2\")".into(),
        };
        let log = [
            at(10_000, held(Some(("r2", 10_000)))),
            // Stamped within the abort's second: written before it.
            work(10_500, "c1", "u1", "r2", false),
            work(12_000, "c2", "u2", "r2", false),
            at(13_000, retry),
            // The status still says held until the retry's writes are done.
            at(13_500, held(Some(("r2", 10_000)))),
            work(14_000, "c3", "u3", "r2", false),
            at(14_500, held(None)),
        ];
        assert_eq!(kinds(&log), [Kind::HeldRevisionWritten]);
    }

    #[test]
    fn a_revision_the_status_names_is_never_deleted() {
        let status = |named: &[&str]| Seen::Status {
            mwrs: "web".into(),
            named: named.iter().map(|s| s.to_string()).collect(),
            held: None,
        };
        let deleted = |hash: &str| Seen::Revision {
            mwrs: "web".into(),
            hash: hash.into(),
            deleted: true,
        };
        let log = [
            at(1, status(&["r1", "r2"])),
            at(2, deleted("r0")),
            at(3, deleted("r1")),
        ];
        assert_eq!(kinds(&log), [Kind::NamedRevisionDeleted]);
    }

    #[test]
    fn a_work_returns_to_where_it_started_only_by_an_abort() {
        assert!(allowed(&["r1"], false));
        assert!(allowed(&["r1", "r2"], false));
        assert!(
            allowed(&["r1", "r2", "r3"], false),
            "a template changed mid-rollout"
        );
        assert!(!allowed(&["r1", "r2", "r1"], false));
        assert!(allowed(&["r1", "r2", "r1"], true));
        assert!(!allowed(&["r1", "r2", "r1", "r2", "r1"], true));
        assert!(!allowed(&["r1", "r2", "r3", "r2"], true));
    }

    #[test]
    fn unsettled_rounds_and_idle_writes_are_reported() {
        let log = [
            at(0, leader("a")),
            at(
                1,
                Seen::Settled {
                    round: 4,
                    mwrs: "web".into(),
                    aborted: false,
                    outcome: Some("not complete after 300s".into()),
                },
            ),
            at(2, Seen::Idle { start: true }),
            at(3, write("a", "manifestworks", 200)),
            at(4, Seen::Idle { start: false }),
            at(5, write("a", "manifestworks", 200)),
        ];
        assert_eq!(kinds(&log), [Kind::Unsettled, Kind::IdleWrite]);
    }
}
