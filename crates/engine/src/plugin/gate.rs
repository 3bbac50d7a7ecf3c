//! The plugin gate: what a cluster its agent reports done, or one about to be written,
//! becomes behind its plugin, given what [`PluginInputs`] holds (the rules are in
//! [`super`]'s doc).

use jiff::Timestamp;

use crate::marks::MarkPlace;
use crate::rollout::RolloutStatus;

use super::calls::Mutation;
use super::inputs::{Begun, ClusterVerdict, PluginHealth, PluginInputs, Verdict};
use super::policy::{ErrorRun, FailureMode, FailurePolicy, PLUGIN_FAILED, spent_words};

/// Whether the update revision may be written to a cluster behind a plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BeginGate<'a> {
    /// BeginRollout and MutateManifestWork were answered: write, with the spec the
    /// plugin returned if it returned one.
    Go(Option<&'a Mutation>),
    /// Send BeginRollout now; write once it is answered.
    Ask,
    /// BeginRollout is on its way, or the plugin does not answer: look again then.
    Wait(Option<Timestamp>),
}

/// What the gate makes of a cluster the agent reports done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// The plugin said SUCCEEDED at this time.
    Passed(Timestamp),
    /// The plugin said FAILED at this time, for this reason.
    Failed(Timestamp, String),
    /// Waiting for a verdict, which the plugin has been able to give since `since`;
    /// `ask` when a question is due now; `held` when its last answer was an error (no
    /// deadline runs meanwhile).
    Validating {
        note: Option<String>,
        ask: bool,
        since: Timestamp,
        held: bool,
    },
    /// The plugin does not answer (or is not registered): the cluster stays where it is.
    Held(String),
}

impl PluginInputs {
    /// The gate for `cluster`, done by its agent on `revision` at `generation`, behind
    /// `plugin`.
    /// `persisted` is the verdict the cluster's ManifestWork carries, if any; a fresh
    /// one recorded here wins.
    pub(crate) fn gate(
        &self,
        (plugin, policy): (&str, FailurePolicy),
        cluster: &str,
        (revision, generation): (&str, i64),
        persisted: Option<&ClusterVerdict>,
        now: Timestamp,
    ) -> Gate {
        let about = |v: &&ClusterVerdict| {
            v.plugin == plugin && v.revision == revision && v.generation == generation
        };
        let fresh = self.verdicts.get(cluster).filter(about);
        let verdict = fresh
            .filter(|v| v.verdict.is_final())
            .or(persisted.filter(about))
            .or(fresh);
        // A final answer stands whatever happened to the plugin since.
        match verdict {
            Some(v) if v.verdict == Verdict::Succeeded => return Gate::Passed(v.at),
            Some(v) if v.verdict == Verdict::Failed => {
                return Gate::Failed(v.at, format!("plugin {plugin}: {}", v.message));
            }
            _ => {}
        }
        let (since, recovering) = match self.health.get(plugin) {
            None => return Gate::Held(format!("plugin {plugin} is not registered")),
            Some(PluginHealth::Unknown) => return Gate::Held(not_asked_yet(plugin)),
            Some(PluginHealth::Unreachable { why, since }) => {
                return outage_gate((plugin, policy), (why, *since), now);
            }
            Some(PluginHealth::Recovering { why, since }) => {
                match outage_gate((plugin, policy), (why, *since), now) {
                    Gate::Held(note) => (*since, Some(note)),
                    spent => return spent,
                }
            }
            Some(PluginHealth::Available { since, .. }) => (*since, None),
        };
        let erred = verdict.is_some_and(|v| v.verdict == Verdict::Erred);
        let ask = self.ask_due(cluster, now).is_none();
        let spent = self.spent_run((plugin, policy), cluster, revision);
        if let Some(run) = spent.filter(|_| erred) {
            let words = spent_words(plugin, run);
            if policy.mode == FailureMode::Fail {
                return Gate::Failed(run.since, format!("{PLUGIN_FAILED}: {words}"));
            }
            return Gate::Validating {
                note: Some(format!("{words} (failurePolicy Hold: held)")),
                ask,
                since,
                held: true,
            };
        }
        // Recovering: asked again to learn whether it works, still down meanwhile.
        let said = verdict
            .filter(|v| !v.message.is_empty())
            .map(|v| format!("plugin {plugin}: {}", v.message));
        Gate::Validating {
            held: erred || recovering.is_some(),
            note: recovering.or(said),
            ask,
            since,
        }
    }

    /// When `plugin`, unreachable, spent `policy`'s `unavailableFor` under `Fail`, and
    /// what the clusters it holds then say (None: it answers, or has budget left).
    pub(crate) fn outage_failure(
        &self,
        (plugin, policy): (&str, FailurePolicy),
        now: Timestamp,
    ) -> Option<(Timestamp, String)> {
        let (why, since) = self.health.get(plugin)?.down_since()?;
        match outage_gate((plugin, policy), (why, since), now) {
            Gate::Failed(at, note) => Some((at, note)),
            _ => None,
        }
    }

    /// `plugin`'s failure budget.
    pub fn policy(&self, plugin: &str) -> FailurePolicy {
        self.policies.get(plugin).copied().unwrap_or_default()
    }

    /// The run of errors about `cluster` on `revision` that has spent `plugin`'s budget
    /// `policy`, if one has.
    pub(crate) fn spent_run(
        &self,
        (plugin, policy): (&str, FailurePolicy),
        cluster: &str,
        revision: &str,
    ) -> Option<&ErrorRun> {
        let limit = policy.consecutive_errors;
        self.errors
            .get(cluster)
            .filter(|r| r.plugin == plugin && r.revision == revision && r.count >= limit)
    }

    /// The run of errors about `cluster` on `revision` that has not spent the budget yet.
    pub(crate) fn erring_run(
        &self,
        plugin: &str,
        cluster: &str,
        revision: &str,
    ) -> Option<&ErrorRun> {
        self.errors
            .get(cluster)
            .filter(|r| r.plugin == plugin && r.revision == revision && r.count > 0)
    }

    /// The annotation value of a FAILED verdict recorded here about `cluster` on
    /// `(revision, generation)` that its ManifestWork does not carry (`persisted`: what it
    /// carries, read back). Compared without the message, which the annotation may
    /// shorten, and without serializing anything on a pass that has nothing to write.
    /// A SUCCEEDED one is never written there: the status record keeps it.
    pub(crate) fn unwritten(
        &self,
        plugin: &str,
        place: MarkPlace<'_>,
        (revision, generation): (&str, i64),
        persisted: Option<&ClusterVerdict>,
    ) -> Option<String> {
        let cluster = place.cluster;
        let v = self.verdicts.get(cluster)?;
        if v.verdict != Verdict::Failed
            || (v.plugin.as_str(), v.revision.as_str(), v.generation)
                != (plugin, revision, generation)
        {
            return None;
        }
        // Written already: the ManifestWork carries this very answer.
        let same = persisted.is_some_and(|p| {
            (
                p.plugin.as_str(),
                p.revision.as_str(),
                p.generation,
                p.verdict,
                p.at,
            ) == (plugin, revision, generation, v.verdict, v.at)
        });
        if same {
            return None;
        }
        v.to_annotation(&self.marks, place)
    }

    /// When the next question about `cluster` is due, None when it is due now.
    pub(crate) fn ask_due(&self, cluster: &str, now: Timestamp) -> Option<Timestamp> {
        let next = self.asked.get(cluster)?.saturating_add(self.poll).ok()?;
        (now < next).then_some(next)
    }

    /// May calls about clusters be made to `plugin`?
    fn available(&self, plugin: &str) -> bool {
        self.health.get(plugin).is_some_and(PluginHealth::callable)
    }

    /// May `revision` be written to `cluster` behind `plugin`? Only once BeginRollout
    /// and MutateManifestWork about it were answered; they are sent again `poll` after
    /// an unanswered one. A rewrite of the same revision (a hand edit) reuses the answer
    /// while it is known here.
    pub(crate) fn begin_gate(
        &self,
        plugin: &str,
        cluster: &str,
        revision: &str,
        now: Timestamp,
    ) -> BeginGate<'_> {
        let sent = self
            .begun
            .get(cluster)
            .filter(|b| b.plugin == plugin && b.revision == revision && !b.aborting);
        if let Some(b) = sent.filter(|b| b.acked) {
            return BeginGate::Go(b.mutation.as_ref());
        }
        let again = |b: &Begun| b.at.saturating_add(self.poll).ok();
        if !self.available(plugin) {
            return BeginGate::Wait(now.saturating_add(self.poll).ok());
        }
        match sent.and_then(again) {
            Some(next) if now < next => BeginGate::Wait(Some(next)),
            _ => BeginGate::Ask,
        }
    }

    /// The spec `plugin` returned for an abort's revert of `cluster` to `revision`
    /// (None: none known, or the template unchanged).
    pub(crate) fn revert_mutation(
        &self,
        plugin: &str,
        cluster: &str,
        revision: &str,
    ) -> Option<&Mutation> {
        let b = self.begun.get(cluster)?;
        let about = b.plugin == plugin && b.revision == revision && b.aborting && b.acked;
        about.then_some(b.mutation.as_ref()).flatten()
    }

    /// Is BeginAbort about reverting `cluster` to `revision` to be sent now, and if not,
    /// when? It is sent as the revert is written (`reverting`), and again `poll` after
    /// an unanswered one, never to a plugin that does not answer: the revert goes ahead
    /// all the same, and gets the plugin's spec when it comes.
    pub(crate) fn abort_due(
        &self,
        plugin: &str,
        cluster: &str,
        revision: &str,
        reverting: bool,
        now: Timestamp,
    ) -> Result<(), Option<Timestamp>> {
        let sent = self
            .begun
            .get(cluster)
            .filter(|b| b.plugin == plugin && b.revision == revision && b.aborting);
        let due = match sent {
            None if reverting => Some(now),
            Some(b) if !b.acked => b.at.saturating_add(self.poll).ok(),
            _ => None,
        };
        match due {
            None => Err(None),
            Some(at) if now < at => Err(Some(at)),
            Some(_) if self.available(plugin) => Ok(()),
            Some(_) => Err(now.saturating_add(self.poll).ok()),
        }
    }

    /// Are the cluster states `(cluster, status, revision)` news for `placement`'s
    /// plugin? Their fingerprint when they are (None: they are not, or the plugin does not
    /// answer). The fingerprint ignores the times: a state is news when it changes, not
    /// when it ages; nothing is built on a pass that has no news.
    pub(crate) fn progress_news<'s>(
        &self,
        plugin: &str,
        placement: &str,
        states: impl Iterator<Item = (&'s str, RolloutStatus, Option<&'s str>)>,
    ) -> Option<u64> {
        if !self.available(plugin) {
            return None;
        }
        let fingerprint = fingerprint(states);
        (self.progressed.get(placement) != Some(&fingerprint)).then_some(fingerprint)
    }
}

/// What a cluster behind `plugin` says while this replica has not asked it anything.
fn not_asked_yet(plugin: &str) -> String {
    format!(
        "plugin {plugin} not asked yet by this replica (it began to lead since): held until it answers, no budget spent"
    )
}

/// FNV-1a over the clusters' names, statuses and revisions: stable across processes and
/// versions, unlike the standard library's hasher.
fn fingerprint<'s>(states: impl Iterator<Item = (&'s str, RolloutStatus, Option<&'s str>)>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        h = (h ^ 0xff).wrapping_mul(PRIME);
    };
    for (cluster, status, revision) in states {
        eat(cluster.as_bytes());
        eat(status.as_str().as_bytes());
        eat(revision.unwrap_or_default().as_bytes());
    }
    h
}

/// The gate behind `plugin`, unreachable (`why`) since `since`: held, and past the
/// budget's `unavailableFor` failed under `Fail`.
fn outage_gate(
    (plugin, policy): (&str, FailurePolicy),
    (why, since): (&str, Timestamp),
    now: Timestamp,
) -> Gate {
    let down = format!("plugin {plugin} is unreachable: {why}");
    // None: an outage that never spends the budget (a plugin not open to the namespace).
    let end = since.saturating_add(policy.unavailable_for).ok();
    match (end, policy.mode) {
        (Some(end), FailureMode::Fail) if end <= now => Gate::Failed(
            end,
            format!(
                "{PLUGIN_FAILED}: {down} (unreachable for {}, failurePolicy Fail)",
                policy.unavailable_for
            ),
        ),
        (Some(end), FailureMode::Hold) if end <= now => Gate::Held(format!(
            "{down} (failurePolicy Hold: held until it answers)"
        )),
        (Some(end), FailureMode::Fail) => {
            Gate::Held(format!("{down} (counts as failed from {end})"))
        }
        _ => Gate::Held(down),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use jiff::SignedDuration;

    use super::*;
    use crate::marks::Marks;
    use crate::plugin::{read_spec_mark, spec_mark};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    /// The gate for cluster `c1` behind plugin `judge` under its registered policy.
    fn judge(
        p: &PluginInputs,
        about: (&str, i64),
        persisted: Option<&ClusterVerdict>,
        now: Timestamp,
    ) -> Gate {
        p.gate(("judge", p.policy("judge")), "c1", about, persisted, now)
    }

    fn inputs(health: PluginHealth) -> PluginInputs {
        PluginInputs {
            health: BTreeMap::from([("judge".to_string(), health)]),
            poll: SignedDuration::from_secs(10),
            ..Default::default()
        }
    }

    fn available() -> PluginHealth {
        PluginHealth::Available {
            description: "judge 1.0".into(),
            since: t(0),
        }
    }

    fn verdict(v: Verdict, revision: &str, generation: i64) -> ClusterVerdict {
        ClusterVerdict {
            plugin: "judge".into(),
            revision: revision.into(),
            generation,
            verdict: v,
            message: format!("said {}", v.as_str()),
            at: t(50),
        }
    }

    #[test]
    fn a_verdict_counts_only_for_the_revision_and_generation_it_judged() {
        let mut p = inputs(available());
        p.verdicts
            .insert("c1".into(), verdict(Verdict::Succeeded, "app-1", 2));
        assert_eq!(judge(&p, ("app-1", 2), None, t(60)), Gate::Passed(t(50)));
        for (revision, generation) in [("app-2", 2), ("app-1", 3)] {
            assert_eq!(
                judge(&p, (revision, generation), None, t(60)),
                Gate::Validating {
                    note: None,
                    ask: true,
                    since: t(0),
                    held: false,
                }
            );
        }
        p.verdicts
            .insert("c1".into(), verdict(Verdict::Failed, "app-1", 2));
        assert_eq!(
            judge(&p, ("app-1", 2), None, t(60)),
            Gate::Failed(t(50), "plugin judge: said FAILED".into())
        );
    }

    /// rules §12.6: a replica that has asked a plugin nothing yet (it began to lead a
    /// moment ago) holds its clusters and spends no budget, however long it has run.
    #[test]
    fn a_plugin_not_asked_yet_holds_and_spends_nothing() {
        let mut p = inputs(PluginHealth::Unknown);
        p.policies.insert(
            "judge".into(),
            FailurePolicy {
                unavailable_for: SignedDuration::from_secs(10),
                ..FailurePolicy::default()
            },
        );
        let late = t(1_000_000);
        let gate = judge(&p, ("app-1", 2), None, late);
        assert!(
            matches!(&gate, Gate::Held(why) if why.contains("not asked yet")),
            "{gate:?}"
        );
        assert_eq!(p.outage_failure(("judge", p.policy("judge")), late), None);
        assert_eq!(
            p.begin_gate("judge", "c1", "app-1", late),
            BeginGate::Wait(Some(t(1_000_010)))
        );
        // A final verdict it gave stands.
        let v = verdict(Verdict::Succeeded, "app-1", 2);
        assert_eq!(judge(&p, ("app-1", 2), Some(&v), late), Gate::Passed(t(50)));
    }

    /// rules §12.6: a plugin recovering (its Initialize answers, its calls about clusters
    /// failed) is asked again, held with no deadline, and stays down since the first
    /// failed call: under Fail its budget is spent `unavailableFor` after it.
    #[test]
    fn a_recovering_plugin_is_asked_and_still_down() {
        let recovering = PluginHealth::Recovering {
            why: "ValidateRolloutCompletion: Unavailable: backend down".into(),
            since: t(100),
        };
        let fail = FailurePolicy {
            unavailable_for: SignedDuration::from_secs(60),
            consecutive_errors: 1000,
            ..FailurePolicy::default()
        };
        let mut p = inputs(recovering);
        p.policies.insert("judge".into(), fail);
        let gate = judge(&p, ("app-1", 2), None, t(130));
        let Gate::Validating {
            ask, held, note, ..
        } = &gate
        else {
            panic!("{gate:?}");
        };
        assert!(*ask && *held, "{gate:?}");
        assert!(
            note.as_deref().unwrap_or_default().contains("backend down"),
            "{gate:?}"
        );
        assert_eq!(p.begin_gate("judge", "c1", "app-1", t(130)), BeginGate::Ask);
        let spent = judge(&p, ("app-1", 2), None, t(161));
        assert!(
            matches!(&spent, Gate::Failed(at, why) if *at == t(160) && why.contains(PLUGIN_FAILED)),
            "{spent:?}"
        );
        assert!(p.outage_failure(("judge", fail), t(161)).is_some());
        // Under Hold: asked, held, never failed.
        let hold = FailurePolicy {
            mode: FailureMode::Hold,
            ..fail
        };
        let held = p.gate(("judge", hold), "c1", ("app-1", 2), None, t(10_000));
        assert!(
            matches!(
                held,
                Gate::Validating {
                    held: true,
                    ask: true,
                    ..
                }
            ),
            "{held:?}"
        );
    }

    const HERE: MarkPlace<'static> = MarkPlace {
        mwrs_uid: "uid-1",
        cluster: "c1",
        work: "ns.app",
        work_uid: None,
        at_creation: false,
    };

    fn sealed() -> Marks {
        Marks::sealed(crate::marks::MarkKey::new(&[7; 32]).unwrap())
    }

    #[test]
    fn a_final_verdict_survives_as_an_annotation() {
        let marks = sealed();
        let v = verdict(Verdict::Failed, "app-1", 2);
        let value = v.to_annotation(&marks, HERE).unwrap();
        let read = |value: &str| ClusterVerdict::from_annotation(value, &marks, HERE);
        assert_eq!(read(&value), Some(v.clone()));
        assert_eq!(
            verdict(Verdict::InProgress, "app-1", 2).to_annotation(&marks, HERE),
            None
        );
        assert_eq!(read("not json"), None);
        // A controller restarted with the plugin down keeps what the annotation says.
        let p = inputs(PluginHealth::Unreachable {
            why: "connection refused".into(),
            since: t(55),
        });
        let gate = judge(&p, ("app-1", 2), Some(&v), t(60));
        assert_eq!(
            gate,
            Gate::Failed(t(50), "plugin judge: said FAILED".into())
        );
        let other = judge(&p, ("app-1", 3), Some(&v), t(60));
        assert!(
            matches!(other, Gate::Held(_)),
            "another generation: {other:?}"
        );
    }

    #[test]
    fn a_verdict_annotation_counts_only_with_the_controllers_seal() {
        let marks = sealed();
        let v = verdict(Verdict::Succeeded, "app-1", 2);
        // Written by hand (or by a reader without the key): no seal.
        let forged = v.to_annotation(&Marks::AsWritten, HERE).unwrap();
        assert!(!forged.contains("seal"), "{forged}");
        assert_eq!(ClusterVerdict::from_annotation(&forged, &marks, HERE), None);
        // A real one edited: FAILED turned SUCCEEDED, or copied to another cluster.
        let real = verdict(Verdict::Failed, "app-1", 2)
            .to_annotation(&marks, HERE)
            .unwrap();
        let edited = real.replace("FAILED", "SUCCEEDED");
        assert_eq!(ClusterVerdict::from_annotation(&edited, &marks, HERE), None);
        let elsewhere = MarkPlace {
            cluster: "c2",
            ..HERE
        };
        assert_eq!(
            ClusterVerdict::from_annotation(&real, &marks, elsewhere),
            None
        );
        // A reader without the key (the CLI) takes it as written.
        assert!(ClusterVerdict::from_annotation(&forged, &Marks::AsWritten, HERE).is_some());
    }

    #[test]
    fn a_spec_mark_vouches_only_for_its_place_and_revision() {
        let marks = sealed();
        let d = crate::hash::digest(&serde_json::json!({"workload": {}}));
        let mark = spec_mark(&marks, HERE, "app-1", &d);
        assert_eq!(read_spec_mark(&mark, &marks, HERE, "app-1"), Some(d));
        assert_eq!(read_spec_mark(&mark, &marks, HERE, "app-2"), None);
        // The digest of a hand-edited spec, unsealed or under the old seal.
        let other = crate::hash::digest(&serde_json::json!({"workload": {"x": 1}}));
        let seal = mark.split_once('.').unwrap().1;
        for forged in [other.to_hex(), format!("{}.{seal}", other.to_hex())] {
            assert_eq!(
                read_spec_mark(&forged, &marks, HERE, "app-1"),
                None,
                "{forged}"
            );
        }
        assert_eq!(
            read_spec_mark(&other.to_hex(), &Marks::AsWritten, HERE, "app-1"),
            Some(other)
        );
    }

    /// `p` with plugin `judge` registered under failurePolicy Hold.
    fn holding(p: &mut PluginInputs) {
        let hold = FailurePolicy {
            mode: FailureMode::Hold,
            ..FailurePolicy::default()
        };
        p.policies.insert("judge".into(), hold);
    }

    #[test]
    fn an_outage_fails_held_clusters_only_past_the_budget_under_fail() {
        let down = |since| PluginHealth::Unreachable {
            why: "connection refused".into(),
            since,
        };
        let p = inputs(down(t(0)));
        let at = |s| judge(&p, ("app-1", 2), None, t(s));
        assert!(matches!(at(299), Gate::Held(ref n) if n.contains("counts as failed from")));
        match at(300) {
            Gate::Failed(when, why) => {
                assert_eq!(when, t(300), "a stable time: no status write per pass");
                assert!(
                    why.starts_with("PluginFailed: plugin judge is unreachable"),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
        let mut hold = inputs(down(t(0)));
        holding(&mut hold);
        let g = judge(&hold, ("app-1", 2), None, t(3600));
        assert!(
            matches!(g, Gate::Held(ref n) if n.contains("failurePolicy Hold")),
            "{g:?}"
        );
    }

    #[test]
    fn errors_in_a_row_fail_a_cluster_under_fail_and_hold_it_under_hold() {
        let mut p = inputs(available());
        p.verdicts
            .insert("c1".into(), verdict(Verdict::Erred, "app-1", 2));
        let run = |count| ErrorRun {
            plugin: "judge".into(),
            revision: "app-1".into(),
            count,
            since: t(40),
            last: "Internal: no metrics".into(),
        };
        p.errors.insert("c1".into(), run(3));
        let g = judge(&p, ("app-1", 2), None, t(60));
        assert!(matches!(g, Gate::Validating { held: true, .. }), "{g:?}");
        p.errors.insert("c1".into(), run(4));
        assert_eq!(
            judge(&p, ("app-1", 2), None, t(60)),
            Gate::Failed(
                t(40),
                "PluginFailed: plugin judge went wrong 4 times in a row: Internal: no metrics"
                    .into()
            )
        );
        // A run about another revision spends nothing.
        assert!(matches!(
            judge(&p, ("app-2", 2), None, t(60)),
            Gate::Validating { .. }
        ));
        holding(&mut p);
        let g = judge(&p, ("app-1", 2), None, t(60));
        assert!(
            matches!(g, Gate::Validating { held: true, note: Some(ref n), .. } if n.contains("failurePolicy Hold")),
            "{g:?}"
        );
    }

    #[test]
    fn an_unanswered_cluster_is_asked_again_after_the_poll_interval() {
        let mut p = inputs(available());
        p.verdicts
            .insert("c1".into(), verdict(Verdict::InProgress, "app-1", 2));
        p.asked.insert("c1".into(), t(100));
        let gate = |now| judge(&p, ("app-1", 2), None, now);
        assert_eq!(
            gate(t(105)),
            Gate::Validating {
                note: Some("plugin judge: said IN_PROGRESS".into()),
                ask: false,
                since: t(0),
                held: false,
            }
        );
        assert_eq!(p.ask_due("c1", t(105)), Some(t(110)));
        assert!(matches!(gate(t(110)), Gate::Validating { ask: true, .. }));
    }

    #[test]
    fn a_plugin_that_does_not_answer_holds_what_it_has_not_judged() {
        let mut p = inputs(PluginHealth::Unreachable {
            why: "connection refused".into(),
            since: t(55),
        });
        p.verdicts
            .insert("c1".into(), verdict(Verdict::InProgress, "app-1", 2));
        assert!(matches!(
            judge(&p, ("app-1", 2), None, t(60)),
            Gate::Held(n) if n.starts_with("plugin judge is unreachable: connection refused")
        ));
        p.verdicts
            .insert("c2".into(), verdict(Verdict::Succeeded, "app-1", 2));
        assert_eq!(
            p.gate(
                ("judge", p.policy("judge")),
                "c2",
                ("app-1", 2),
                None,
                t(60)
            ),
            Gate::Passed(t(50))
        );
        assert_eq!(
            p.gate(
                ("other", p.policy("other")),
                "c1",
                ("app-1", 2),
                None,
                t(60)
            ),
            Gate::Held("plugin other is not registered".into())
        );
    }
}
