//! One row per cluster, read once per pass: the placementRef that wants it, the
//! ManifestWork that survives, duplicates and works being deleted, and the facts the
//! stages read from it. Built for fleets of 100,000 clusters: one sorted merge per pass.

use std::collections::BTreeMap;
use std::iter::Peekable;

use hashbrown::HashMap;
use jiff::Timestamp;
use mwrs_api::labels;

use crate::marks::{MarkPlace, Marks};
use crate::placement::PlacementView;
use crate::plugin::read_spec_mark;
use crate::rollout::{GroupKey, RolloutStatus};
use crate::work;
use crate::work::WorkView;

use super::revision_ids::{Carried, RevisionIds};

/// One cluster the MWRS wants, with the placementRef that owns it.
#[derive(Clone)]
pub(super) struct Desired<'a> {
    pub(super) placement: usize,
    pub(super) group: &'a GroupKey,
}

/// The MWRS labels copied onto its ManifestWorks: all but the keys this controller owns
/// (rules §11.4), so an MWRS can never forge another's ownership through its own labels,
/// and but those `not_copied` (GitOps tools' tracking labels by default).
pub(super) fn copied_labels<'l>(
    mwrs_labels: Option<&'l BTreeMap<String, String>>,
    not_copied: &'l [String],
) -> impl Iterator<Item = (&'l String, &'l String)> {
    mwrs_labels
        .into_iter()
        .flatten()
        .filter(|(k, _)| !labels::is_controller_key(k) && !not_copied.contains(k))
}

/// What this MWRS expects every ManifestWork it owns to carry.
pub(super) struct Expected<'e> {
    pub(super) owner_work_name: String,
    pub(super) owner_label: &'e (&'static str, String),
    /// [`crate::owner::OwnerKey::collector_mark`].
    pub(super) collector_mark: Option<(&'static str, String)>,
    pub(super) owner_slashed: &'e str,
    pub(super) mwrs_labels: Option<&'e BTreeMap<String, String>>,
    /// [`super::PlanConfig::labels_not_copied`].
    pub(super) not_copied: &'e [String],
    /// placementRef names, by index.
    pub(super) placements: Vec<&'e str>,
    /// Whether each placementRef names a rollout plugin, by index.
    pub(super) plugin_named: Vec<bool>,
    pub(super) ids: &'e RevisionIds,
    pub(super) marks: &'e Marks,
    pub(super) mwrs_uid: &'e str,
}

/// What a pass reads from a surviving ManifestWork, read in one go when the rows are
/// built: at 100,000 clusters every further visit to a ManifestWork's labels and
/// conditions is a cache miss.
#[derive(Clone, Copy, Debug)]
pub(super) struct Facts {
    /// The status as the agent reports it and since when (rules §3.10 to §3.15); it counts
    /// only when the ManifestWork carries the target revision.
    pub(super) status: RolloutStatus,
    pub(super) since: Option<Timestamp>,
    /// Written, but the agent has not applied this generation (rules §11.2).
    pub(super) awaiting: bool,
    /// When the controller last saw the conditions change.
    pub(super) seen: Option<Timestamp>,
    /// Conditions True at the current generation, for the summaries.
    pub(super) applied: bool,
    pub(super) available: bool,
    pub(super) progressing: bool,
    pub(super) degraded: bool,
    /// The spec's content among the revisions the pass knows.
    pub(super) content: Content,
    /// Every label and annotation this controller sets is in place, for the placementRef
    /// that wants the cluster and the revision its label names.
    pub(super) labelled: bool,
}

/// What a ManifestWork's spec holds, among the revisions a pass knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Content {
    /// Not read (no digest): taken on trust.
    Unread,
    /// The content of the revision with this id.
    Revision(usize),
    /// Content no known revision has (the spec was edited).
    Other,
}

impl Content {
    fn of(id: Option<usize>) -> Self {
        id.map_or(Content::Other, Content::Revision)
    }
}

impl Facts {
    pub(super) const NONE: Facts = Facts {
        status: RolloutStatus::ToApply,
        since: None,
        awaiting: false,
        seen: None,
        applied: false,
        available: false,
        progressing: false,
        degraded: false,
        content: Content::Unread,
        labelled: false,
    };

    pub(super) fn read(w: &WorkView, wanted: Option<&Desired<'_>>, e: &Expected<'_>) -> Self {
        use mwrs_api::work::condition as work_condition;
        let (status, since) = work::written_status(w);
        let labelled = wanted.is_some_and(|d| {
            let has = |k: &str, v: &str| w.label(k) == Some(v);
            let (owner_key, owner_value) = e.owner_label;
            w.hash().is_some()
                && has(labels::PLACEMENT_NAME, e.placements[d.placement])
                && has(owner_key, owner_value)
                && e.collector_mark.as_ref().is_none_or(|(k, v)| has(k, v))
                && copied_labels(e.mwrs_labels, e.not_copied).all(|(k, v)| has(k, v))
                && e.not_copied.iter().all(|k| w.label(k).is_none())
                && w.annotation(labels::MWRS_OWNER_ANNOTATION) == Some(e.owner_slashed)
                && w.annotation(labels::REVISION_APPLIED_AT).is_some()
        });
        Self {
            status,
            since,
            awaiting: !work::is_applied(w),
            seen: w.status_seen,
            applied: w.is_true(work_condition::APPLIED),
            available: w.is_true(work_condition::AVAILABLE),
            progressing: w.is_true(work_condition::PROGRESSING),
            degraded: w.is_true(work_condition::DEGRADED),
            content: content(w, e, wanted.is_some_and(|d| e.plugin_named[d.placement])),
            labelled,
        }
    }
}

/// What one pass knows per cluster: the placementRef that wants it (if any) and the
/// ManifestWork that represents it (if any).
pub(super) struct ClusterRow<'a> {
    pub(super) desired: Option<Desired<'a>>,
    /// The survivor: the deterministic name, else the oldest.
    pub(super) work: Option<&'a WorkView>,
    /// The revision the survivor carries.
    pub(super) carried: Option<Carried<'a>>,
    pub(super) facts: Facts,
    /// Other owned ManifestWorks in the same namespace.
    pub(super) duplicates: Vec<&'a WorkView>,
    /// A ManifestWork of the deterministic name is being deleted there: a new one can
    /// only be created once the agent is done with it.
    pub(super) name_blocked: bool,
}

impl ClusterRow<'_> {
    /// Does the survivor carry revision `target` of `ids` with its content? A spec that no
    /// longer matches (edited by hand) does not count.
    pub(super) fn carries(&self, ids: &RevisionIds, target: Option<usize>) -> bool {
        let Some(t) = target else { return false };
        self.work.is_some()
            && self.carried == Some(Carried::Known(t))
            && match (self.facts.content, ids.digest(t)) {
                (Content::Revision(have), Some(want)) => ids.digest(have) == Some(want),
                (Content::Other, Some(_)) => false,
                (Content::Unread, _) | (_, None) => true,
            }
    }
}

pub(super) struct Clusters<'a> {
    pub(super) rows: ClusterIndex<'a, ClusterRow<'a>>,
    /// Owned ManifestWorks being deleted.
    pub(super) deleting: Vec<&'a WorkView>,
    pub(super) desired_len: usize,
    pub(super) works_len: usize,
}

impl<'a> Clusters<'a> {
    /// One walk that merges the placements' clusters (each already by name) with the
    /// ManifestWorks sorted by cluster: sorting runs that are in order costs a linear
    /// pass, so a fleet of 100,000 clusters is not sorted from scratch on every pass.
    pub(super) fn new(
        views: &[Option<&'a PlacementView>],
        works: &'a [WorkView],
        e: &Expected<'_>,
    ) -> Self {
        let mut desired: Vec<(&'a str, Desired<'a>)> = Vec::new();
        for (i, groups) in views
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i, v.and_then(|v| v.groups())?)))
        {
            desired.extend(groups.by_name().map(|(cluster, group)| {
                (
                    cluster,
                    Desired {
                        placement: i,
                        group,
                    },
                )
            }));
        }
        // One placement's clusters come by name, each once; several need sorting.
        let placements = views
            .iter()
            .filter(|v| v.and_then(|v| v.groups()).is_some());
        // Stable: for a cluster two placementRefs select, the first one stays first.
        let by_name = |d: &mut Vec<(&'a str, Desired<'a>)>| {
            d.sort_by(|a, b| a.0.cmp(b.0));
            d.dedup_by(|later, first| later.0 == first.0);
        };
        if placements.count() > 1 {
            by_name(&mut desired);
        }
        // The controller hands ManifestWorks over by cluster already; only when they come
        // in another order is a sorted copy made (and a pass over sorted input is cheap).
        // The slow path also re-sorts the desired side, so that a merge that cannot
        // fail never depends on the decision groups keeping their order.
        let merged = Self::merge(&desired, works.iter(), e);
        let (entries, deleting, works_len) = match merged {
            Some(m) => m,
            None => {
                by_name(&mut desired);
                let mut sorted: Vec<&'a WorkView> = works.iter().collect();
                sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
                Self::merge(&desired, sorted.into_iter(), e).unwrap_or_else(|| {
                    unreachable!("both sides sorted by cluster, each desired name once")
                })
            }
        };
        let desired_len = desired.len();
        Self {
            rows: ClusterIndex::from_sorted(entries),
            deleting,
            desired_len,
            works_len,
        }
    }

    /// Walks the desired clusters and the ManifestWorks side by side, both by cluster
    /// name; None when the ManifestWorks turn out not to be in that order.
    #[allow(clippy::type_complexity)]
    pub(super) fn merge(
        desired: &[(&'a str, Desired<'a>)],
        works: impl Iterator<Item = &'a WorkView>,
        e: &Expected<'_>,
    ) -> Option<(Vec<(&'a str, ClusterRow<'a>)>, Vec<&'a WorkView>, usize)> {
        use std::cmp::Ordering::{Equal, Greater, Less};
        debug_assert!(desired.windows(2).all(|w| w[0].0 < w[1].0));
        let mut entries = Vec::with_capacity(desired.len());
        let mut deleting = Vec::new();
        let mut works_len = 0;
        let mut desired = desired.iter().peekable();
        let mut work_iter = works.peekable();
        // One comparison of names decides each step: names share long prefixes, so each
        // comparison costs, and a pass makes one per cluster, not two.
        loop {
            let (take_desired, take_work) = match (desired.peek(), work_iter.peek()) {
                (None, None) => break,
                (Some(_), None) => (true, false),
                (None, Some(_)) => (false, true),
                (Some((c, _)), Some(w)) => match (*c).cmp(&*w.cluster) {
                    Less => (true, false),
                    Equal => (true, true),
                    Greater => (false, true),
                },
            };
            let wanted = take_desired.then(|| desired.next()).flatten();
            let first = take_work.then(|| work_iter.next()).flatten();
            let cluster: &'a str = match (wanted, first) {
                (Some((c, _)), _) => c,
                (None, Some(w)) => &w.cluster,
                (None, None) => break,
            };
            let wanted = wanted.map(|(_, d)| d.clone());
            let Namespace {
                survivor,
                duplicates,
                name_blocked,
            } = Namespace::read(first, cluster, &mut work_iter, e, &mut deleting)?;
            if wanted.is_none() && survivor.is_none() {
                continue;
            }
            works_len += usize::from(survivor.is_some());
            let facts = survivor.map_or(Facts::NONE, |w| Facts::read(w, wanted.as_ref(), e));
            entries.push((
                cluster,
                ClusterRow {
                    desired: wanted,
                    work: survivor,
                    carried: survivor.and_then(|w| e.ids.carried(w)),
                    facts,
                    duplicates,
                    name_blocked,
                },
            ));
        }
        Some((entries, deleting, works_len))
    }

    pub(super) fn get(&self, cluster: &str) -> Option<&ClusterRow<'a>> {
        self.rows.get(cluster)
    }

    pub(super) fn desired(&self, cluster: &str) -> Option<&Desired<'a>> {
        self.get(cluster).and_then(|s| s.desired.as_ref())
    }

    /// The rows of the clusters the placementRefs choose, in the order of their names:
    /// the order the status record's bits index ([`crate::plugin::JudgedBits`]).
    pub(super) fn chosen(&self) -> impl Iterator<Item = (&'a str, &ClusterRow<'a>)> + '_ {
        self.rows.iter().filter(|(_, r)| r.desired.is_some())
    }
}

/// The ManifestWorks of one cluster's namespace that are not being deleted.
struct Namespace<'a> {
    /// The deterministic name, else the oldest (upstream's generateName works), so
    /// restarts always pick the same one.
    survivor: Option<&'a WorkView>,
    /// The others, in survivor rank.
    duplicates: Vec<&'a WorkView>,
    /// A ManifestWork of the deterministic name is being deleted there.
    name_blocked: bool,
}

impl<'a> Namespace<'a> {
    /// Reads the namespace's ManifestWorks from `first` on, taking the ones that follow
    /// it in `works` for the same `cluster`; those being deleted go to `deleting`. None
    /// when a smaller cluster name follows: the input is not in cluster order.
    fn read(
        first: Option<&'a WorkView>,
        cluster: &str,
        works: &mut Peekable<impl Iterator<Item = &'a WorkView>>,
        e: &Expected<'_>,
        deleting: &mut Vec<&'a WorkView>,
    ) -> Option<Self> {
        use std::cmp::Ordering::{Equal, Greater, Less};
        // The survivor is kept apart from the others so that the usual namespace, with one
        // ManifestWork, allocates nothing.
        let rank = |w: &'a WorkView| survivor_rank(w, &e.owner_work_name);
        let mut ns = Namespace {
            survivor: None,
            duplicates: Vec::new(),
            name_blocked: false,
        };
        let mut next = first;
        while let Some(w) = next {
            if w.deleting {
                ns.name_blocked |= *w.name == *e.owner_work_name;
                deleting.push(w);
            } else {
                match ns.survivor {
                    Some(s) if rank(w) < rank(s) => {
                        ns.duplicates.push(s);
                        ns.survivor = Some(w);
                    }
                    Some(_) => ns.duplicates.push(w),
                    None => ns.survivor = Some(w),
                }
            }
            // More ManifestWorks in this namespace; a smaller name after this one means
            // the input is not in cluster order.
            next = match works.peek().map(|n| (*n.cluster).cmp(cluster)) {
                Some(Equal) => works.next(),
                Some(Less) => return None,
                Some(Greater) | None => None,
            };
        }
        ns.duplicates.sort_by_key(|w| rank(w));
        Some(ns)
    }
}

/// Orders a namespace's ManifestWorks: the one of the deterministic name first, then
/// the oldest, then by name.
fn survivor_rank<'w>(w: &'w WorkView, deterministic: &str) -> (bool, Option<Timestamp>, &'w str) {
    (*w.name != *deterministic, w.created, &w.name)
}

/// Per-cluster state of one pass: entries sorted by cluster name (plans and reports come
/// out deterministic, and walks are sequential in memory) with a hashed position index for
/// the several lookups a pass makes per cluster (ordered-tree lookups made large fleets
/// superlinear).
pub(super) struct ClusterIndex<'a, V> {
    pub(super) entries: Vec<(&'a str, V)>,
    pub(super) position: HashMap<&'a str, usize>,
}

impl<'a, V> ClusterIndex<'a, V> {
    /// `entries` sorted by cluster name, each name once.
    pub(super) fn from_sorted(entries: Vec<(&'a str, V)>) -> Self {
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        let position = entries
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (*k, i))
            .collect();
        Self { entries, position }
    }

    pub(super) fn get(&self, cluster: &str) -> Option<&V> {
        self.position(cluster).map(|i| &self.entries[i].1)
    }

    pub(super) fn position(&self, cluster: &str) -> Option<usize> {
        self.position.get(cluster).copied()
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&'a str, &V)> + '_ {
        self.entries.iter().map(|(k, v)| (*k, v))
    }
}

/// What `w`'s spec holds. Written by this controller and unchanged since, or holding the
/// spec a rollout plugin returned for it (`plugin_named`: its placementRef names one): the
/// revision its label names, even when the server's defaults make the digest differ. A
/// plugin's spec marked there and another spec in its place is an edit, even one back to
/// the revision's own template (security review G1). Else the revision whose content the
/// digest is.
fn content(w: &WorkView, e: &Expected<'_>, plugin_named: bool) -> Content {
    let labelled = || Content::of(w.hash().and_then(|h| e.ids.id(h)));
    if w.written_generation.is_some_and(|g| g == w.generation) {
        return labelled();
    }
    match plugin_named.then(|| plugin_spec_mark(w, e)).flatten() {
        Some(marked) if w.spec_digest == Some(marked) => return labelled(),
        Some(_) if w.spec_digest.is_some() => return Content::Other,
        _ => {}
    }
    match w.spec_digest {
        Some(d) => Content::of(e.ids.with_content(d)),
        None => Content::Unread,
    }
}

/// The digest of the spec a rollout plugin returned for the revision `w`'s label names, as
/// this controller wrote it there. Only a mark sealed by this controller says so: anyone
/// who may patch the ManifestWork can write one over a hand edit (rules §12.2).
fn plugin_spec_mark(w: &WorkView, e: &Expected<'_>) -> Option<crate::hash::Digest> {
    let value = w.annotation(labels::PLUGIN_SPEC_DIGEST)?;
    let place = MarkPlace {
        mwrs_uid: e.mwrs_uid,
        cluster: &w.cluster,
        work: &w.name,
        work_uid: w.uid,
        at_creation: w.generation == 1,
    };
    read_spec_mark(value, e.marks, place, w.hash()?)
}
