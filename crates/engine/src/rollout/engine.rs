//! The rollout decision itself (upstream's `GetRolloutCluster`): which clusters of one
//! placement take part in the rollout now, which timed out, which left the placement,
//! and whether failures passed `maxFailures`.

use std::collections::BTreeSet;

use hashbrown::HashMap;

use jiff::{SignedDuration, Timestamp};

use super::groups::{DecisionGroups, GroupKey, Selection};
use super::parse::{Deadline, Size};
use super::status::{
    ClusterRolloutStatus, Determined, RolloutStatus, determine_rollout_status, min_recheck_after,
};
use super::strategy::{ParsedStrategy, StrategyKind};

/// Switches back to upstream behaviours this port fixes. The default is the fixed
/// behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compat {
    /// Upstream decides whether the mandatory phase is over from *every* existing
    /// status, so an in-flight or timed-out non-mandatory cluster keeps the rollout in
    /// the mandatory phase: Progressive then moves in whole batches, and one
    /// non-mandatory TimeOut blocks the rollout forever without ever breaching
    /// `maxFailures` (rules §10.3); in-flight clusters of other groups also cut the walk
    /// over the mandatory groups short. Fixed: only mandatory-group clusters (and a
    /// breach among them) hold the mandatory phase and move its walk on; the others are
    /// still reported (their timeouts and recheck times) while it holds.
    pub upstream_mandatory_leak: bool,
    /// Upstream walks group indices `0..number of groups`, so after a gap in the
    /// indices the later groups are invisible (never rolled out, their clusters
    /// reported as removed). Fixed: every group, in index order.
    pub upstream_group_index_gaps: bool,
    /// Upstream's per-group walk keeps the unstarted clusters it added when a group
    /// breaches `maxFailures` (clusters that joined a group late; and since TimeOut
    /// clusters offset the count of unfinished ones, the walk can pass a group that
    /// still has some). Fixed: a breach starts no cluster (rules §5.8), in
    /// ProgressivePerGroup and in mandatory groups as in Progressive.
    pub upstream_start_in_breached_group: bool,
    /// Upstream's per-group walk weighs every in-flight cluster, later groups' included,
    /// against every failure of the groups walked so far. So a Failed cluster in a
    /// later group (within its deadline, or with no progressDeadline at all) holds the
    /// walk at an earlier, finished group: the failure is never counted, neither the
    /// breach nor its tolerance is ever seen, and the rollout stalls for good. And a
    /// tolerated TimeOut (no longer in flight) offsets a cluster still progressing, so
    /// the next group starts early. Fixed: the walk moves past a group once every
    /// cluster of the groups it has walked is done or failed within tolerance.
    pub upstream_group_walk_arithmetic: bool,
}

/// One upstream behaviour [`Compat`] can restore, by the name operators use on the
/// command line (`--upstream-quirk group-walk-arithmetic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quirk {
    MandatoryLeak,
    GroupIndexGaps,
    StartInBreachedGroup,
    GroupWalkArithmetic,
}

impl Quirk {
    pub const ALL: [Quirk; 4] = [
        Quirk::MandatoryLeak,
        Quirk::GroupIndexGaps,
        Quirk::StartInBreachedGroup,
        Quirk::GroupWalkArithmetic,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Quirk::MandatoryLeak => "mandatory-leak",
            Quirk::GroupIndexGaps => "group-index-gaps",
            Quirk::StartInBreachedGroup => "start-in-breached-group",
            Quirk::GroupWalkArithmetic => "group-walk-arithmetic",
        }
    }
}

impl std::fmt::Display for Quirk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Quirk {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quirk::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Quirk::ALL.iter().map(|q| q.name()).collect();
                format!("unknown upstream quirk {s:?}; known: {}", names.join(", "))
            })
    }
}

impl Compat {
    /// Every upstream behaviour, as upstream's rollout library has it.
    pub const UPSTREAM: Compat = Compat {
        upstream_mandatory_leak: true,
        upstream_group_index_gaps: true,
        upstream_start_in_breached_group: true,
        upstream_group_walk_arithmetic: true,
    };

    /// The default (fixed) behaviour with `quirks` turned back on.
    pub fn with_quirks<'q>(quirks: impl IntoIterator<Item = &'q Quirk>) -> Self {
        quirks
            .into_iter()
            .fold(Compat::default(), |c, q| c.with(*q))
    }

    /// This switch set with `quirk` turned on.
    pub fn with(mut self, quirk: Quirk) -> Self {
        match quirk {
            Quirk::MandatoryLeak => self.upstream_mandatory_leak = true,
            Quirk::GroupIndexGaps => self.upstream_group_index_gaps = true,
            Quirk::StartInBreachedGroup => self.upstream_start_in_breached_group = true,
            Quirk::GroupWalkArithmetic => self.upstream_group_walk_arithmetic = true,
        }
        self
    }

    /// The quirks turned on, for logs.
    pub fn quirks(self) -> Vec<Quirk> {
        Quirk::ALL
            .into_iter()
            .filter(|q| self.with(*q) == self)
            .collect()
    }
}

/// The engine's verdict for one placement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RolloutResult {
    /// Clusters taking part in the rollout now. Only the ToApply ones need the revision
    /// written; the others (Progressing, Failed within the deadline, Succeeded still
    /// soaking) hold their slot and must be left as they are.
    pub to_rollout: Vec<ClusterRolloutStatus>,
    /// Clusters at or past the progress deadline, status TimeOut.
    pub timed_out: Vec<ClusterRolloutStatus>,
    /// Existing statuses of clusters no longer in any decision group, unchanged.
    pub removed: Vec<ClusterRolloutStatus>,
    /// Failures passed `maxFailures` (per group for ProgressivePerGroup, zero tolerated
    /// in mandatory groups); no new cluster starts. Never set for type All.
    pub max_failure_breach: bool,
    /// Shortest positive delay until a cluster in `to_rollout` ends its soak or reaches
    /// its deadline.
    pub recheck_after: Option<SignedDuration>,
    /// What the clusters hold of the strategy's limits, as this decision counted them.
    pub budget: Budget,
}

/// One placement's rollout against its strategy's limits, as [`evaluate`] counted them:
/// what a reader shows next to the clusters (the writes follow `to_rollout`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// The decision group the limits were counted in, where the strategy counts group by
    /// group (ProgressivePerGroup, mandatory groups): the group the walk stopped at.
    /// None: the whole placement.
    pub group: Option<GroupKey>,
    /// Clusters holding a slot: progressing, validating, failed within the deadline,
    /// succeeded and still soaking.
    pub in_flight: usize,
    /// Slots: `maxConcurrency` resolved against the clusters it counts over. None: no
    /// limit of its own (type All; a group walk starts its whole group).
    pub max_concurrency: Option<usize>,
    /// Failures counted against the limit (in `group` when there is one).
    pub failures: usize,
    /// Failures tolerated: `maxFailures` resolved (none in a mandatory group). None:
    /// failures never stop the rollout (type All).
    pub max_failures: Option<usize>,
    /// The earliest progress deadline among the clusters in flight; a cluster a plugin
    /// holds has none.
    pub next_deadline: Option<Timestamp>,
}

/// The limits a walk counted against, for its [`Budget`].
struct Counted {
    group: Option<GroupKey>,
    max_concurrency: Option<usize>,
    failures: usize,
    max_failures: Option<usize>,
}

/// Decides the rollout of one placement at `now`. `existing` holds the statuses of the
/// clusters that already carry the target revision (other clusters join as ToApply).
pub fn evaluate(
    strategy: &ParsedStrategy,
    groups: &DecisionGroups,
    existing: &[ClusterRolloutStatus],
    now: Timestamp,
    compat: Compat,
) -> RolloutResult {
    let universe = if compat.upstream_group_index_gaps {
        Selection::new(groups, groups.upstream_visible())
    } else {
        Selection::all(groups)
    };
    let (current, removed) = split_removed(&universe, existing);
    let ctx = Ctx {
        min_success_time: strategy.min_success_time,
        deadline: strategy.deadline,
        now,
    };
    let mut result = match strategy.kind {
        StrategyKind::All => all(&ctx, &universe, &current),
        StrategyKind::Progressive => {
            progressive(strategy, &ctx, groups, &universe, &current, compat)
        }
        StrategyKind::ProgressivePerGroup => {
            progressive_per_group(strategy, &ctx, groups, &universe, &current, compat)
        }
    };
    result.removed = removed;
    result
}

/// What every phase needs besides the clusters.
struct Ctx {
    min_success_time: SignedDuration,
    deadline: Deadline,
    now: Timestamp,
}

impl Ctx {
    fn determine(&self, s: &ClusterRolloutStatus) -> Determined {
        determine_rollout_status(s, self.min_success_time, self.deadline, self.now)
    }
}

/// Existing statuses split into clusters still selected and clusters gone.
/// Only the removed ones are copied: they go into the result.
fn split_removed<'s>(
    universe: &Selection<'_>,
    existing: &'s [ClusterRolloutStatus],
) -> (Vec<&'s ClusterRolloutStatus>, Vec<ClusterRolloutStatus>) {
    let (current, removed): (Vec<_>, Vec<_>) =
        existing.iter().partition(|s| universe.contains(&s.cluster));
    (current, removed.into_iter().cloned().collect())
}

/// Every cluster at once; failures never stop it and there is no soak.
fn all(ctx: &Ctx, universe: &Selection<'_>, current: &[&ClusterRolloutStatus]) -> RolloutResult {
    let n = universe.cluster_count();
    let ctx = Ctx {
        min_success_time: SignedDuration::ZERO,
        ..*ctx
    };
    let mut result = per_cluster(&ctx, universe, n, n, current);
    result.budget.max_concurrency = None;
    result.budget.max_failures = None;
    result
}

fn progressive(
    strategy: &ParsedStrategy,
    ctx: &Ctx,
    groups: &DecisionGroups,
    universe: &Selection<'_>,
    current: &[&ClusterRolloutStatus],
    compat: Compat,
) -> RolloutResult {
    // maxFailures counts against every cluster, mandatory ones included (upstream).
    let max_failures = strategy.max_failures.resolve(universe.cluster_count(), 0);
    let mandatory = groups.resolve_mandatory(&strategy.mandatory);
    if let Some(held) = mandatory_phase(ctx, groups, &mandatory, current, compat) {
        return held;
    }
    let rest = universe.without(&mandatory);
    let n = rest.cluster_count();
    let size = strategy.max_concurrency.unwrap_or_default().resolve(n, n);
    per_cluster(ctx, &rest, size, max_failures, current)
}

fn progressive_per_group(
    strategy: &ParsedStrategy,
    ctx: &Ctx,
    groups: &DecisionGroups,
    universe: &Selection<'_>,
    current: &[&ClusterRolloutStatus],
    compat: Compat,
) -> RolloutResult {
    let mandatory = groups.resolve_mandatory(&strategy.mandatory);
    if let Some(held) = mandatory_phase(ctx, groups, &mandatory, current, compat) {
        return held;
    }
    let rest = universe.without(&mandatory);
    per_group(ctx, &rest, strategy.max_failures, current, compat)
}

/// Mandatory groups roll first, group by group, with no failure tolerated. Returns the
/// result while that phase is not over.
fn mandatory_phase(
    ctx: &Ctx,
    groups: &DecisionGroups,
    mandatory: &BTreeSet<GroupKey>,
    current: &[&ClusterRolloutStatus],
    compat: Compat,
) -> Option<RolloutResult> {
    if mandatory.is_empty() {
        return None;
    }
    let phase = Selection::new(groups, mandatory.clone());
    // Every existing status is evaluated, as upstream does, so in-flight clusters of
    // other groups still report their timeouts and recheck times while this phase
    // holds; in fixed mode they no longer decide whether it holds.
    let result = per_group(ctx, &phase, Size::Count(0), current, compat);
    let held = if compat.upstream_mandatory_leak {
        !result.to_rollout.is_empty() || !result.timed_out.is_empty()
    } else {
        // A breach with nothing listed (a mandatory cluster that came in as TimeOut)
        // holds too: zero tolerance means zero.
        result.max_failure_breach
            || result
                .to_rollout
                .iter()
                .chain(&result.timed_out)
                .any(|c| phase.contains(&c.cluster))
    };
    held.then_some(result)
}

/// Collects determined statuses and the new clusters into a result.
#[derive(Default)]
struct Acc {
    to_rollout: Vec<ClusterRolloutStatus>,
    timed_out: Vec<ClusterRolloutStatus>,
}

impl Acc {
    /// Files one determined status; returns its status after the determination.
    fn absorb(&mut self, ctx: &Ctx, s: &ClusterRolloutStatus) -> RolloutStatus {
        let d = ctx.determine(s);
        let after = d.status_after(s.status);
        match d {
            Determined::Rollout(c) => self.to_rollout.push(c),
            Determined::TimedOut(c) => self.timed_out.push(c),
            Determined::Dropped => {}
        }
        after
    }

    fn finish(self, ctx: &Ctx, breach: bool, counted: Counted) -> RolloutResult {
        let holding = self
            .to_rollout
            .iter()
            .filter(|c| c.status != RolloutStatus::ToApply);
        let deadlines = holding
            .clone()
            .filter(|c| c.status != RolloutStatus::Succeeded)
            // A cluster a plugin holds comes in at the end of time: no deadline runs.
            .filter(|c| c.last_transition_time != Some(Timestamp::MAX))
            .filter_map(|c| ctx.deadline.at(c.last_transition_time, ctx.now));
        let budget = Budget {
            group: counted.group,
            in_flight: holding.count(),
            max_concurrency: counted.max_concurrency,
            failures: counted.failures,
            max_failures: counted.max_failures,
            next_deadline: deadlines.min(),
        };
        RolloutResult {
            recheck_after: min_recheck_after(&self.to_rollout, ctx.now),
            to_rollout: self.to_rollout,
            timed_out: self.timed_out,
            removed: Vec::new(),
            max_failure_breach: breach,
            budget,
        }
    }
}

/// Upstream's `progressivePerCluster`: a sliding window of `size` slots over the
/// selected clusters by name. Existing statuses (by cluster name) take their slots
/// first; failures beyond `max_failures` stop new clusters from starting.
fn per_cluster(
    ctx: &Ctx,
    selection: &Selection<'_>,
    size: usize,
    max_failures: usize,
    current: &[&ClusterRolloutStatus],
) -> RolloutResult {
    let mut sorted: Vec<&ClusterRolloutStatus> = current
        .iter()
        .copied()
        .filter(|s| !s.cluster.is_empty())
        .collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    let mut acc = Acc::default();
    let (mut failures, mut breach) = (0usize, false);
    let counted = |failures| Counted {
        group: None,
        max_concurrency: Some(size),
        failures,
        max_failures: Some(max_failures),
    };
    for s in sorted.iter().copied() {
        // After a breach, clusters not started yet stay unstarted.
        let after = if breach && s.status == RolloutStatus::ToApply {
            s.status
        } else {
            acc.absorb(ctx, s)
        };
        if after.is_failure() {
            failures += 1;
            breach = failures > max_failures;
        }
        if acc.to_rollout.len() >= size {
            return acc.finish(ctx, breach, counted(failures));
        }
    }
    if breach {
        return acc.finish(ctx, true, counted(failures));
    }
    // Both lists are in name order: one merge finds the clusters without a status.
    let mut existing = sorted.iter().map(|s| &*s.cluster).peekable();
    for (cluster, key) in selection.clusters_by_name() {
        while existing.next_if(|e| *e < cluster).is_some() {}
        if existing.peek() == Some(&cluster) {
            continue;
        }
        acc.to_rollout
            .push(ClusterRolloutStatus::to_apply(cluster, key.clone()));
        if acc.to_rollout.len() >= size {
            break;
        }
    }
    acc.finish(ctx, false, counted(failures))
}

/// Upstream's `progressivePerGroup`: groups in index order; the next group starts once
/// every cluster of the current one is done or failed within tolerance
/// (`max_failures` resolved against each group's size).
fn per_group(
    ctx: &Ctx,
    selection: &Selection<'_>,
    max_failures: Size,
    current: &[&ClusterRolloutStatus],
    compat: Compat,
) -> RolloutResult {
    let (mut acc, recorded) = record_existing(ctx, current);
    let evaluated = acc.to_rollout.len();
    // Clusters still to finish before the walk may move on. Fixed: counted group by
    // group as the walk reaches them. Upstream: every in-flight cluster from the start,
    // later groups' included (with the mandatory leak, other groups' too), less every
    // failure counted so far (see `Compat::upstream_group_walk_arithmetic`).
    let upstream = compat.upstream_group_walk_arithmetic;
    let mut unfinished = match (upstream, compat.upstream_mandatory_leak) {
        (false, _) => 0,
        (true, true) => evaluated,
        (true, false) => acc
            .to_rollout
            .iter()
            .filter(|c| selection.contains(&c.cluster))
            .count(),
    };
    let (mut total_failures, mut breach) = (0usize, false);
    let mut counted = Counted {
        group: None,
        max_concurrency: None,
        failures: 0,
        max_failures: None,
    };
    for (key, clusters) in selection.groups() {
        let tolerated = max_failures.resolve(selection.group_len(key), 0);
        let mut group_failures = 0usize;
        for cluster in clusters {
            match recorded.get(cluster) {
                Some(r) => {
                    if r.status.is_failure() {
                        group_failures += 1;
                        breach = group_failures > tolerated;
                    }
                    // Failed within the deadline: listed, but tolerated failures never
                    // hold the next group.
                    unfinished += usize::from(!upstream && r.in_flight && !r.status.is_failure());
                }
                None => {
                    acc.to_rollout
                        .push(ClusterRolloutStatus::to_apply(cluster, key.clone()));
                    unfinished += 1;
                }
            }
        }
        total_failures += group_failures;
        counted = Counted {
            group: Some(key.clone()),
            max_concurrency: None,
            failures: group_failures,
            max_failures: Some(tolerated),
        };
        if breach && !compat.upstream_start_in_breached_group {
            // Everything the walk added is unstarted.
            acc.to_rollout.truncate(evaluated);
        }
        // Upstream subtracts every failure from every in-flight cluster, so a tolerated
        // TimeOut (not in flight) let the walk past a cluster still progressing; fixed,
        // the walk moves on once each walked cluster is done or failed within tolerance.
        let holds = if upstream {
            unfinished > total_failures
        } else {
            unfinished > 0
        };
        if holds || breach {
            return acc.finish(ctx, breach, counted);
        }
    }
    acc.finish(ctx, breach, counted)
}

/// An existing status after the determination, and whether it still holds a rollout
/// slot (Progressing, Failed within the deadline, Succeeded still soaking).
struct Recorded {
    status: RolloutStatus,
    in_flight: bool,
}

/// Determines every existing status but ToApply (the group walk adds those again as
/// new), keeping each cluster's status after the determination.
fn record_existing<'s>(
    ctx: &Ctx,
    current: &'s [&'s ClusterRolloutStatus],
) -> (Acc, HashMap<&'s str, Recorded>) {
    let mut acc = Acc::default();
    let mut recorded = HashMap::new();
    for s in current
        .iter()
        .filter(|s| !s.cluster.is_empty() && s.status != RolloutStatus::ToApply)
    {
        let before = acc.to_rollout.len();
        let status = acc.absorb(ctx, s);
        let in_flight = acc.to_rollout.len() > before;
        recorded.insert(&*s.cluster, Recorded { status, in_flight });
    }
    (acc, recorded)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod quirk_tests {
    use super::*;

    #[test]
    fn every_quirk_parses_by_its_name_and_turns_on_one_switch() {
        let mut all = Compat::default();
        for q in Quirk::ALL {
            assert_eq!(q.name().parse::<Quirk>(), Ok(q));
            let one = Compat::default().with(q);
            assert_ne!(one, Compat::default(), "{q}");
            assert_eq!(one.quirks(), vec![q]);
            all = all.with(q);
        }
        assert_eq!(all, Compat::UPSTREAM);
        assert_eq!(Compat::UPSTREAM.quirks(), Quirk::ALL.to_vec());
        assert!(Compat::default().quirks().is_empty());
    }

    #[test]
    fn an_unknown_quirk_names_the_known_ones() {
        let err = "mandatory".parse::<Quirk>().unwrap_err();
        assert!(err.contains("\"mandatory\""), "{err}");
        assert!(err.contains("group-walk-arithmetic"), "{err}");
    }
}
