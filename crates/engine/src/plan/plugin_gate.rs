//! The rollout plugin's say ([`crate::plugin`] has the rules). Part of stage 3: on a
//! cluster its agent reports done, the questions to put to plugins next, and the final
//! verdicts to write onto the ManifestWorks they are about. Part of stage 5: whether the
//! update revision may be written yet (BeginRollout), and what to tell plugins of an
//! abort's reverts (BeginAbort). After stage 3: the placementRefs' progress.

use std::sync::Arc;

use jiff::Timestamp;

use mwrs_api::labels;
use mwrs_api::mwrs::{PluginJudged, condition as mwrs_condition};
use serde_json::Value;

use crate::conditions::{self, Cond, Status};
use crate::hash::Digest;
use crate::marks::MarkPlace;
use crate::plugin::{
    About, Begin, BeginGate, CallTarget, ClusterState, ClusterVerdict, FailureMode, FailurePolicy,
    Gate, JudgedBits, Mutation, PLUGIN_FAILED, PluginHealth, Progress, Validation, Verdict,
    read_spec_mark, spec_mark, spent_words,
};
use crate::rollout::RolloutStatus;
use crate::work::WorkView;

use super::cluster_table::{ClusterRow, Desired};
use super::output::{ClusterReport, WorkApply};
use super::pass::Pass;

/// A cluster's status once its plugin has had its say.
pub(super) struct Gated {
    pub(super) status: RolloutStatus,
    pub(super) since: Option<Timestamp>,
    pub(super) note: Option<String>,
    /// The plugin does not answer: no deadline runs meanwhile.
    pub(super) held: bool,
    /// A question about the cluster went out at this time and is not answered yet: its
    /// deadline is judged as of then, and the answer decides.
    pub(super) asked_at: Option<Timestamp>,
    /// Its plugin judged it SUCCEEDED (the status record keeps this).
    pub(super) judged: bool,
}

/// The questions a pass wants put to plugins, and the answers to write down.
#[derive(Default)]
pub(super) struct Questions {
    pub(super) due: Vec<Validation>,
    /// When the next one not due yet will be.
    pub(super) next: Option<Timestamp>,
    /// Final verdicts the controller holds and the cluster's ManifestWork does not carry
    /// yet: (cluster, annotation value).
    pub(super) to_write: Vec<(Arc<str>, String)>,
}

impl Questions {
    fn later(&mut self, at: Option<Timestamp>) {
        if let Some(t) = at {
            self.next = Some(self.next.map_or(t, |n| n.min(t)));
        }
    }
}

/// A cluster its agent reports done on `revision`, in `work`, behind `plugin`.
struct Done<'w> {
    plugin: &'w str,
    policy: FailurePolicy,
    placement: usize,
    work: &'w WorkView,
    revision: &'w str,
}

impl<'a> Pass<'a> {
    /// `status` as the agent's report makes it, gated by the placementRef's plugin when
    /// the cluster carries the target revision: the update revision, or the stable one
    /// an abort reverts to (ValidateAbortCompletion). `judged_before`: the status record
    /// says its plugin judged it SUCCEEDED ([`Pass::prior_judged`]).
    pub(super) fn gate(
        &self,
        (cluster, row, d): (&Arc<str>, &ClusterRow<'a>, &Desired<'a>),
        target: Option<usize>,
        (status, since, note): (RolloutStatus, Option<Timestamp>, Option<String>),
        judged_before: bool,
        questions: &mut Questions,
    ) -> Gated {
        let ungated = Gated {
            status,
            since,
            note,
            held: false,
            asked_at: None,
            judged: false,
        };
        let (Some(plugin), Some(i)) = (self.plugin_of(d.placement), target) else {
            return ungated;
        };
        let revision = self.ids.name(i);
        let mut policy = self.policy_of(d.placement, plugin);
        if revision != self.resolution.hash() {
            // An abort's revert to the stable revision: a plugin that is down leaves it
            // written and unvalidated, never failed (the stable revision is not on trial).
            policy.mode = FailureMode::Hold;
        }
        if status == RolloutStatus::ToApply {
            return self.begin_budget((plugin, policy), cluster, revision, ungated);
        }
        let Some(work) = row.work.filter(|_| status == RolloutStatus::Succeeded) else {
            return ungated;
        };
        let done = Done {
            plugin,
            policy,
            placement: d.placement,
            work,
            revision,
        };
        self.validated_done(cluster, &done, judged_before, ungated, questions)
    }

    /// A cluster its agent reports done, as its verdict makes it: a fresh one, or one kept
    /// on its ManifestWork or (`judged_before`) in the status record. A FAILED one not
    /// written down yet goes to `questions`, with the question due about it.
    fn validated_done(
        &self,
        cluster: &Arc<str>,
        done: &Done<'_>,
        judged_before: bool,
        ungated: Gated,
        questions: &mut Questions,
    ) -> Gated {
        let plugins = self.observed.plugins;
        let about = (done.revision, done.work.generation);
        let place = self.mark_place(done.work);
        let persisted = done
            .work
            .annotation(labels::PLUGIN_VERDICT)
            .and_then(|v| ClusterVerdict::from_annotation(v, &plugins.marks, place))
            .or_else(|| judged_before.then(|| judged_earlier(done.plugin, about)));
        if let Some(value) = plugins.unwritten(done.plugin, place, about, persisted.as_ref()) {
            questions.to_write.push((cluster.clone(), value));
        }
        let gate = plugins.gate(
            (done.plugin, done.policy),
            cluster,
            about,
            persisted.as_ref(),
            self.now,
        );
        self.gated(gate, cluster, done, ungated, questions)
    }

    /// `ungated` as the plugin's `gate` makes it; a question due about the cluster goes
    /// to `questions`, with when the next one will be.
    fn gated(
        &self,
        gate: Gate,
        cluster: &Arc<str>,
        done: &Done<'_>,
        ungated: Gated,
        questions: &mut Questions,
    ) -> Gated {
        let plugins = self.observed.plugins;
        let since = ungated.since;
        match gate {
            Gate::Passed(at) => Gated {
                since: since.max(Some(at)),
                judged: true,
                ..ungated
            },
            Gate::Failed(at, why) => Gated {
                status: RolloutStatus::Failed,
                since: Some(at),
                note: Some(why),
                ..ungated
            },
            Gate::Validating {
                note: said,
                ask,
                since: answering,
                held,
            } => {
                if ask {
                    let about = (done.work, done.revision, since);
                    let question = self.question(done.plugin, done.placement, cluster, about);
                    questions.due.push(question);
                    // The answer may change nothing; the next question is due anyway.
                    questions.later(self.now.saturating_add(plugins.poll).ok());
                } else {
                    questions.later(plugins.ask_due(cluster, self.now));
                }
                Gated {
                    status: RolloutStatus::Validating,
                    since: since.max(Some(answering)),
                    note: said.or(ungated.note),
                    held,
                    asked_at: plugins.unanswered.get(cluster).copied(),
                    judged: false,
                }
            }
            Gate::Held(why) => {
                questions.later(self.now.saturating_add(plugins.poll).ok());
                Gated {
                    status: RolloutStatus::Validating,
                    note: Some(why),
                    held: true,
                    asked_at: None,
                    ..ungated
                }
            }
        }
    }
}

/// A SUCCEEDED verdict the status record keeps about `(revision, generation)`: it holds
/// no time, so the cluster's success counts from its agent's report.
fn judged_earlier(plugin: &str, (revision, generation): (&str, i64)) -> ClusterVerdict {
    ClusterVerdict {
        plugin: plugin.to_string(),
        revision: revision.to_string(),
        generation,
        verdict: Verdict::Succeeded,
        message: String::new(),
        at: Timestamp::MIN,
    }
}

impl Pass<'_> {
    /// The clusters the status record says their plugin judged SUCCEEDED on `revision`,
    /// if it vouches for them as the hub stands now (decoded once a pass).
    pub(super) fn prior_judged(&self, revision: &str) -> Option<&JudgedBits> {
        let record = self.old.plugin_judged.as_ref()?;
        if record.revision != revision {
            return None;
        }
        self.prior_judged
            .get_or_init(|| {
                let bits = JudgedBits::written(record)?;
                let about = self.judged_about(&bits);
                JudgedBits::vouched(
                    record,
                    revision,
                    &about,
                    &self.observed.plugins.marks,
                    self.mwrs_uid(),
                )
                .then_some(bits)
            })
            .as_ref()
    }

    /// The status record of the clusters `bits` marks judged SUCCEEDED on `revision`
    /// (None: none is, or no placementRef names a plugin).
    pub(super) fn judged_record(&self, revision: &str, bits: &JudgedBits) -> Option<PluginJudged> {
        if bits.count() == 0 {
            return None;
        }
        let about = self.judged_about(bits);
        Some(bits.record(
            revision,
            &about,
            &self.observed.plugins.marks,
            self.mwrs_uid(),
        ))
    }

    /// What `bits`, one per chosen cluster in the order of their names, are about now.
    fn judged_about(&self, bits: &JudgedBits) -> Digest {
        let plugins = self
            .validated
            .strategies
            .iter()
            .map(|s| s.plugin.as_deref());
        let mut about = About::new(plugins);
        for (i, (cluster, row)) in self.clusters.chosen().enumerate() {
            let judged_at = bits.get(i).then(|| row.work.map_or(-1, |w| w.generation));
            about.cluster(cluster, judged_at);
        }
        about.finish()
    }

    fn mwrs_uid(&self) -> &str {
        self.observed
            .mwrs
            .metadata
            .uid
            .as_deref()
            .unwrap_or_default()
    }
}

impl<'a> Pass<'a> {
    /// The plugin the placementRef at `placement` names, unless the update revision is
    /// to roll out past its plugins (`mwrs rollout undo|retry --skip-plugins`).
    pub(super) fn plugin_of(&self, placement: usize) -> Option<&str> {
        let plugin = self.validated.strategies[placement].plugin.as_deref()?;
        (!self.skips_plugins()).then_some(plugin)
    }

    /// Is the update revision to roll out without asking any plugin? Only for the request
    /// that asked: the annotation names the revision and the MWRS generation it was asked
    /// at (`REVISION@GENERATION`), so a skip is spent once the spec changes, even if the
    /// revision comes back later (security review U1).
    pub(super) fn skips_plugins(&self) -> bool {
        let metadata = &self.observed.mwrs.metadata;
        let Some((revision, generation)) = metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::SKIP_PLUGINS))
            .and_then(|v| v.split_once('@'))
        else {
            return false;
        };
        revision == self.resolution.hash()
            && generation.parse::<i64>().ok() == Some(metadata.generation.unwrap_or_default())
    }

    /// The failure budget of `plugin` for the placementRef at `placement`: its
    /// registration's, with what the placementRef's `pluginFailurePolicy` sets.
    fn policy_of(&self, placement: usize, plugin: &str) -> FailurePolicy {
        let registered = self.observed.plugins.policy(plugin);
        self.validated.strategies[placement]
            .plugin_failure
            .over(registered)
    }

    /// Where a mark on `work` is about.
    pub(super) fn mark_place<'p>(&'p self, work: &'p WorkView) -> MarkPlace<'p> {
        MarkPlace {
            work_uid: work.uid,
            at_creation: work.generation == 1,
            ..self.write_place(&work.cluster, &work.name, None)
        }
    }

    /// Where a mark written into the ManifestWork `work` of `cluster` is about: `existing`,
    /// or one this write creates (it has no uid yet).
    fn write_place<'p>(
        &'p self,
        cluster: &'p str,
        work: &'p str,
        existing: Option<&WorkView>,
    ) -> MarkPlace<'p> {
        MarkPlace {
            mwrs_uid: self.mwrs_uid(),
            cluster,
            work,
            work_uid: existing.and_then(|w| w.uid),
            at_creation: false,
        }
    }

    /// A cluster waiting for `revision` behind `plugin` (ToApply): Failed under
    /// failurePolicy Fail once the calls about it went wrong past the plugin's budget, or
    /// the plugin has been unreachable past it (no BeginRollout can reach it: the rollout
    /// cannot go on, and says so instead of waiting for ever); it is then not written.
    /// Else what went wrong, as its note.
    fn begin_budget(
        &self,
        (plugin, policy): (&str, FailurePolicy),
        cluster: &str,
        revision: &str,
        ungated: Gated,
    ) -> Gated {
        let plugins = self.observed.plugins;
        if let Some(run) = plugins.spent_run((plugin, policy), cluster, revision) {
            let words = spent_words(plugin, run);
            return match policy.mode {
                FailureMode::Fail => Gated {
                    status: RolloutStatus::Failed,
                    since: Some(run.since),
                    note: Some(format!("{PLUGIN_FAILED}: {words}")),
                    ..ungated
                },
                FailureMode::Hold => Gated {
                    note: Some(format!("{words} (failurePolicy Hold: held)")),
                    ..ungated
                },
            };
        }
        if let Some((at, note)) = plugins.outage_failure((plugin, policy), self.now) {
            return Gated {
                status: RolloutStatus::Failed,
                since: Some(at),
                note: Some(note),
                ..ungated
            };
        }
        match plugins.erring_run(plugin, cluster, revision) {
            Some(run) => Gated {
                note: Some(format!(
                    "plugin {plugin}: {} ({} of {} errors in a row)",
                    run.last, run.count, policy.consecutive_errors
                )),
                ..ungated
            },
            None => ungated,
        }
    }

    /// The question to `plugin` about `cluster`'s ManifestWork `work`, done by its agent
    /// on `revision` since `since`, for the placementRef at `placement`.
    fn question(
        &self,
        plugin: &str,
        placement: usize,
        cluster: &str,
        (work, revision, since): (&WorkView, &str, Option<Timestamp>),
    ) -> Validation {
        Validation {
            target: self.call_target(plugin, placement),
            cluster: cluster.to_string(),
            manifest_work: work.name.to_string(),
            revision: revision.to_string(),
            generation: work.generation,
            since,
            aborting: revision != self.resolution.hash(),
        }
    }

    /// What a call to `plugin` about the placementRef at `placement` is about.
    fn call_target(&self, plugin: &str, placement: usize) -> CallTarget {
        CallTarget {
            plugin: plugin.to_string(),
            placement: self.observed.mwrs.spec.placement_refs[placement]
                .name
                .clone(),
            total_clusters: self.views[placement]
                .and_then(|v| v.groups())
                .map_or(0, |g| g.len()),
            current: self.old.current_revision.clone(),
            update: self.resolution.hash().to_string(),
        }
    }

    /// Stage 5, rolling forward: may `revision` be written to `cluster` now, and with
    /// which spec? Where a plugin is named, only once it answered BeginRollout and
    /// MutateManifestWork about it (Some(None): the template unchanged); `begins` gets
    /// the call to make and `next` when to look again.
    pub(super) fn may_begin(
        &self,
        cluster: &str,
        placement: usize,
        (revision, template): (&str, &Arc<Value>),
        (begins, next): (&mut Vec<Begin>, &mut Option<Timestamp>),
    ) -> Option<Option<&'a Mutation>> {
        let Some(plugin) = self.plugin_of(placement) else {
            return Some(None);
        };
        let plugins = self.observed.plugins;
        let wait = match plugins.begin_gate(plugin, cluster, revision, self.now) {
            BeginGate::Go(mutation) => return Some(mutation),
            BeginGate::Ask => {
                begins.push(Begin {
                    target: self.call_target(plugin, placement),
                    cluster: cluster.to_string(),
                    revision: revision.to_string(),
                    template: template.clone(),
                    aborting: false,
                });
                self.now.saturating_add(plugins.poll).ok()
            }
            BeginGate::Wait(at) => at,
        };
        if let Some(at) = wait {
            *next = Some(next.map_or(at, |n| n.min(at)));
        }
        None
    }

    /// The spec the placementRef's plugin returned for an abort's revert of `cluster`
    /// to `revision`, if it returned one.
    pub(super) fn revert_mutation(
        &self,
        cluster: &str,
        placement: usize,
        revision: &str,
    ) -> Option<&'a Mutation> {
        let plugin = self.plugin_of(placement)?;
        self.observed
            .plugins
            .revert_mutation(plugin, cluster, revision)
    }

    /// Stage 5, an abort's revert of `cluster` to `revision` (`reverting`: written in
    /// this pass): BeginAbort, where a plugin is named and it is due
    /// ([`crate::plugin::PluginInputs::abort_due`] has the rule); else when it will be.
    /// Never a reason to wait.
    pub(super) fn abort_notice(
        &self,
        cluster: &str,
        placement: usize,
        (revision, template): (&str, &Arc<Value>),
        reverting: bool,
    ) -> Result<Begin, Option<Timestamp>> {
        let Some(plugin) = self.plugin_of(placement) else {
            return Err(None);
        };
        let plugins = self.observed.plugins;
        plugins.abort_due(plugin, cluster, revision, reverting, self.now)?;
        Ok(Begin {
            target: self.call_target(plugin, placement),
            cluster: cluster.to_string(),
            revision: revision.to_string(),
            template: template.clone(),
            aborting: true,
        })
    }

    /// ProgressRollout for each placementRef with a plugin whose cluster states changed
    /// since the last one sent.
    pub(super) fn progress(&self, reports: &[ClusterReport], target: &str) -> Vec<Progress> {
        let refs = &self.observed.mwrs.spec.placement_refs;
        let mut out = Vec::new();
        for (i, r) in refs.iter().enumerate() {
            let Some(plugin) = self.plugin_of(i) else {
                continue;
            };
            let mine = || reports.iter().filter(|c| *c.placement == *r.name);
            let states = mine().map(|c| (&*c.cluster, c.status, c.revision.as_deref()));
            let plugins = self.observed.plugins;
            let Some(fingerprint) = plugins.progress_news(plugin, &r.name, states) else {
                continue;
            };
            let clusters = mine()
                .map(|c| ClusterState {
                    cluster: c.cluster.clone(),
                    status: c.status,
                    revision: c.revision.clone(),
                    since: c.since,
                })
                .collect();
            out.push(Progress {
                target: self.call_target(plugin, i),
                clusters,
                aborting: target != self.resolution.hash(),
                fingerprint,
            });
        }
        out
    }

    /// `PluginLoaded`: True when every plugin the placementRefs name answers, False
    /// naming each one that does not (None: no placementRef names a plugin).
    pub(super) fn plugin_loaded(&self) -> Option<Cond> {
        let mut named: Vec<&str> = self
            .validated
            .strategies
            .iter()
            .filter_map(|s| s.plugin.as_deref())
            .collect();
        named.sort_unstable();
        named.dedup();
        if named.is_empty() {
            return None;
        }
        if self.skips_plugins() {
            return Some(Cond::new(
                mwrs_condition::PLUGIN_LOADED,
                Status::True,
                mwrs_condition::REASON_PLUGINS_SKIPPED,
                format!(
                    "{} not asked about revision {}: its rollout skips plugins ({} annotation, set by --skip-plugins).",
                    named.join(", "),
                    self.resolution.hash(),
                    labels::SKIP_PLUGINS
                ),
            ));
        }
        let health = &self.observed.plugins.health;
        let mut available = Vec::new();
        let mut failed = Vec::new();
        let mut unknown = Vec::new();
        for name in named {
            match health.get(name) {
                Some(PluginHealth::Available { description, .. }) => {
                    available.push(format!("{name} plugin is available ({description})"));
                }
                Some(PluginHealth::Unknown) => unknown.push(name),
                Some(PluginHealth::Unreachable { why, .. }) => {
                    failed.push(format!("{name} plugin is unreachable: {why}"));
                }
                Some(PluginHealth::Recovering { why, .. }) => failed.push(format!(
                    "{name} plugin is unreachable: {why} (its Initialize answers again; down until a call about a cluster succeeds)"
                )),
                None => failed.push(format!(
                    "{name} plugin is not registered in the controller's --work-config"
                )),
            }
        }
        if failed.is_empty() && !unknown.is_empty() {
            return Some(self.plugin_loaded_kept(&unknown));
        }
        Some(if failed.is_empty() {
            Cond::new(
                mwrs_condition::PLUGIN_LOADED,
                Status::True,
                mwrs_condition::REASON_PLUGIN_AVAILABLE,
                format!("{}.", available.join("; ")),
            )
        } else {
            Cond::new(
                mwrs_condition::PLUGIN_LOADED,
                Status::False,
                mwrs_condition::REASON_PLUGIN_FAILED,
                format!(
                    "{}; its clusters are held until it answers, or until its failurePolicy counts them failed. To roll out without it: mwrs rollout retry --skip-plugins.",
                    failed.join("; ")
                ),
            )
        })
    }
}

impl Pass<'_> {
    /// `PluginLoaded` while this replica has not asked the plugins `unknown` anything yet
    /// (it began to lead since): what the status says already, so that a failover flips
    /// nothing; Unknown when it says nothing.
    fn plugin_loaded_kept(&self, unknown: &[&str]) -> Cond {
        let old = self.old.conditions.as_deref();
        let kept = old.and_then(|l| conditions::find(l, mwrs_condition::PLUGIN_LOADED));
        let known = [
            mwrs_condition::REASON_PLUGIN_AVAILABLE,
            mwrs_condition::REASON_PLUGIN_FAILED,
        ];
        kept.and_then(|c| {
            let reason = known.into_iter().find(|r| *r == c.reason)?;
            let status = match c.status.as_str() {
                "True" => Status::True,
                "False" => Status::False,
                _ => return None,
            };
            Some(Cond::new(
                mwrs_condition::PLUGIN_LOADED,
                status,
                reason,
                c.message.clone(),
            ))
        })
        .unwrap_or_else(|| {
            Cond::new(
                mwrs_condition::PLUGIN_LOADED,
                Status::Unknown,
                mwrs_condition::REASON_PLUGIN_NOT_ASKED,
                format!(
                    "{} not asked yet by this replica; its clusters wait meanwhile.",
                    unknown.join(", ")
                ),
            )
        })
    }

    /// `a` with the spec a plugin returned in place of its revision's template, and the
    /// sealed digest of that spec, by which a ManifestWork carrying it is known to be
    /// current.
    pub(super) fn mutated(&self, mut a: WorkApply, mutation: Option<&Mutation>) -> WorkApply {
        if let Some(m) = mutation {
            let existing = (self.clusters.get(&a.cluster))
                .and_then(|r| r.work)
                .filter(|w| !a.create && *w.name == *a.name);
            let place = self.write_place(&a.cluster, &a.name, existing);
            let mark = spec_mark(&self.observed.plugins.marks, place, &a.revision, &m.digest);
            a.spec = Some(m.spec.clone());
            Arc::make_mut(&mut a.annotations).insert(labels::PLUGIN_SPEC_DIGEST.into(), mark);
        }
        a
    }

    /// Does `work` carry the spec `mutation` asks for as `revision`? (None asks for
    /// nothing more than the revision's template, which the caller checks.)
    pub(super) fn carries_mutation(
        &self,
        work: Option<&WorkView>,
        revision: &str,
        mutation: Option<&Mutation>,
    ) -> bool {
        let Some(m) = mutation else { return true };
        let Some(w) = work else { return false };
        let place = self.mark_place(w);
        let marked = w
            .annotation(labels::PLUGIN_SPEC_DIGEST)
            .and_then(|v| read_spec_mark(v, &self.observed.plugins.marks, place, revision));
        // The mark and the live spec both (a hand edit keeps the mark: G1).
        marked == Some(m.digest) && w.spec_digest.is_none_or(|d| d == m.digest)
    }
}
