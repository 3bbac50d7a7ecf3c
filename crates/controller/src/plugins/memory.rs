//! What each MWRS's plugins were told and said (verdicts, Begins, error runs, specs, the
//! calls in flight), and the planner's copy of it ([`Plugins::inputs`]).

use super::*;

/// What one MWRS's plugins were told and said.
#[derive(Default)]
pub(super) struct Judged {
    pub(super) verdicts: BTreeMap<Arc<str>, ClusterVerdict>,
    pub(super) asked: BTreeMap<Arc<str>, Timestamp>,
    pub(super) begun: BTreeMap<Arc<str>, Begun>,
    pub(super) progressed: BTreeMap<String, u64>,
    /// Per cluster, the calls about it that went wrong in a row.
    pub(super) errors: BTreeMap<Arc<str>, ErrorRun>,
    /// Every distinct spec the plugins returned that a cluster still holds, by digest: a
    /// plugin returning the same spec for 5,000 clusters costs one copy, not 5,000.
    pub(super) specs: HashMap<mwrs_engine::hash::Digest, Arc<serde_json::Value>>,
    /// Validations (cluster, revision) and Begins (cluster, revision, aborting) not
    /// answered yet: a slow plugin is not asked the same again meanwhile. A validation
    /// keeps the time it was sent (the planner judges the cluster's deadline as of then).
    pub(super) validating: BTreeMap<(Arc<str>, String), Timestamp>,
    pub(super) beginning: BTreeSet<(Arc<str>, String, bool)>,
}

/// `m` sharing the copy of its spec `specs` holds, if one is there; else `m`, whose spec
/// `specs` then holds. Specs no cluster holds any more are dropped meanwhile.
pub(super) fn intern(
    specs: &mut HashMap<mwrs_engine::hash::Digest, Arc<serde_json::Value>>,
    m: Mutation,
) -> Mutation {
    if let Some(spec) = specs.get(&m.digest) {
        return Mutation {
            spec: spec.clone(),
            digest: m.digest,
        };
    }
    specs.retain(|_, spec| Arc::strong_count(spec) > 1);
    specs.insert(m.digest, m.spec.clone());
    m
}

impl Plugins {
    /// What a pass over MWRS `owner` plans with.
    pub fn inputs(&self, owner: &str) -> PluginInputs {
        let namespace = owner.split_once('/').map_or(owner, |(ns, _)| ns);
        let health = self
            .health
            .read()
            .map(|h| {
                h.iter()
                    .map(|(n, t)| (n.clone(), self.health_for(n, namespace, &t.health)))
                    .collect()
            })
            .unwrap_or_default();
        let poll = SignedDuration::try_from(self.poll).unwrap_or(SignedDuration::from_secs(10));
        let base = PluginInputs {
            health,
            poll,
            policies: self.policies.clone(),
            // Never the default (marks taken as written), even from a poisoned lock.
            marks: match self.marks.read() {
                Ok(m) => m.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            },
            ..PluginInputs::default()
        };
        let Ok(judged) = self.judged.lock() else {
            return base;
        };
        let Some(j) = judged.get(owner) else {
            return base;
        };
        PluginInputs {
            verdicts: j.verdicts.clone(),
            asked: j.asked.clone(),
            unanswered: unanswered(&j.validating),
            begun: j.begun.clone(),
            progressed: j.progressed.clone(),
            errors: j.errors.clone(),
            ..base
        }
    }

    /// Forgets what was said about a deleted MWRS.
    pub fn forget(&self, owner: &str) {
        if let Ok(mut j) = self.judged.lock() {
            j.remove(owner);
        }
    }

    /// Records `calls` as made at `now`, and returns those to make: all but a question
    /// or a Begin that is in flight already (it counts as asked all the same, so that
    /// the planner's schedule goes on).
    pub(super) fn mark_sent(
        &self,
        owner: &str,
        mut calls: PluginCalls,
        now: Timestamp,
    ) -> PluginCalls {
        let Ok(mut judged) = self.judged.lock() else {
            return PluginCalls::default();
        };
        let j = judged.entry(owner.to_string()).or_default();
        for v in &calls.validations {
            j.asked.insert(Arc::from(v.cluster.as_str()), now);
        }
        let in_flight = InFlight::of(&calls);
        let mut keys = in_flight.validating.into_iter();
        calls.validations.retain(|_| {
            keys.next()
                .is_some_and(|k| sent_first(&mut j.validating, k, now))
        });
        let mut keys = in_flight.beginning.into_iter();
        calls
            .begins
            .retain(|_| keys.next().is_some_and(|k| j.beginning.insert(k)));
        for b in &calls.begins {
            let begun = Begun {
                plugin: b.target.plugin.clone(),
                revision: b.revision.clone(),
                aborting: b.aborting,
                at: now,
                acked: false,
                mutation: None,
            };
            j.begun.insert(Arc::from(b.cluster.as_str()), begun);
        }
        for p in &calls.progress {
            j.progressed
                .insert(p.target.placement.clone(), p.fingerprint);
        }
        calls
    }

    /// The call `sent` landed (or was not made after all): it may be made again.
    pub(super) fn landed(&self, owner: &str, sent: Sent<'_>) {
        let Ok(mut judged) = self.judged.lock() else {
            return;
        };
        let Some(j) = judged.get_mut(owner) else {
            return;
        };
        match sent {
            Sent::Validation(v) => {
                j.validating
                    .remove(&(Arc::from(v.cluster.as_str()), v.revision.clone()));
            }
            Sent::Begin(b) => {
                let cluster = Arc::from(b.cluster.as_str());
                j.beginning
                    .remove(&(cluster, b.revision.clone(), b.aborting));
            }
            Sent::Progress => {}
        }
    }

    /// Records one answer; true when it differs from what was known.
    pub(super) fn record_answer(&self, owner: &str, answer: Answer) -> bool {
        let now = Timestamp::now();
        let answered = |plugin: &str| self.set_health(plugin, Seen::Answered { at: now });
        match answer {
            Answer::Validated(v, Ok(r)) => {
                self.end_error_run(owner, &v.cluster);
                let back = answered(&v.target.plugin);
                self.record(owner, &v, r, now) || back
            }
            Answer::Begun(b, Ok(mutation)) => {
                self.end_error_run(owner, &b.cluster);
                let back = answered(&b.target.plugin);
                self.record_begun(owner, &b, mutation) || back
            }
            Answer::Progressed(p, Ok(())) => answered(&p.target.plugin),
            Answer::Validated(v, Err(s)) => {
                let message = format!("{}: {}", v.call_name(), status_line(&s));
                let about = (v.target.plugin.as_str(), v.revision.as_str());
                // A down status counts in the cluster's run as any error does (rules §12.6).
                let counted = self.extend_error_run(owner, &v.cluster, about, &message, now);
                let health = self.health_after(&v.target.plugin, &s, &message, now);
                let said = self.record_verdict(owner, &v, (Verdict::Erred, message), now);
                said || counted || health
            }
            Answer::Begun(b, Err((call, s))) => {
                // Left unanswered: sent again after the poll interval; the cluster waits,
                // and its note says why, until the plugin's budget is spent.
                let message = format!("{call}: {}", status_line(&s));
                if is_about_the_call(&s) {
                    tracing::warn!(plugin = %b.target.plugin, cluster = %b.cluster, %message, "rollout plugin's answer refused");
                }
                let about = (b.target.plugin.as_str(), b.revision.as_str());
                let counted =
                    !b.aborting && self.extend_error_run(owner, &b.cluster, about, &message, now);
                self.health_after(&b.target.plugin, &s, &message, now) || counted
            }
            Answer::Progressed(p, Err(s)) => {
                // Told again once the plugin is back.
                self.forget_progress(owner, &p.target.placement);
                let message = format!("ProgressRollout: {}", status_line(&s));
                self.health_after(&p.target.plugin, &s, &message, now)
            }
        }
    }

    /// The Event to publish about `answer`: a refused answer about a cluster, once per
    /// run of errors (the cluster's note and status say the rest).
    pub(super) fn refusal_to_report(&self, owner: &str, answer: &Answer) -> Option<String> {
        let Answer::Begun(b, Err((call, s))) = answer else {
            return None;
        };
        if !is_about_the_call(s) {
            return None;
        }
        let judged = self.judged.lock().ok()?;
        let running = judged
            .get(owner)
            .and_then(|j| j.errors.get(b.cluster.as_str()))
            .is_some_and(|r| r.plugin == b.target.plugin && r.revision == b.revision);
        (!running).then(|| {
            format!(
                "cluster {}: plugin {} {call}: {}; nothing was written, the cluster waits and is asked again",
                b.cluster,
                b.target.plugin,
                status_line(s)
            )
        })
    }

    /// One more call about `cluster` on `(plugin, revision)` went wrong; true (news) when
    /// it changes the run.
    pub(super) fn extend_error_run(
        &self,
        owner: &str,
        cluster: &str,
        (plugin, revision): (&str, &str),
        message: &str,
        now: Timestamp,
    ) -> bool {
        let Ok(mut judged) = self.judged.lock() else {
            return false;
        };
        let j = judged.entry(owner.to_string()).or_default();
        let last = cut(message.to_string(), PLUGIN_TEXT_MAX);
        match j.errors.get_mut(cluster) {
            Some(run) if run.plugin == plugin && run.revision == revision => {
                run.count = run.count.saturating_add(1);
                run.last = last;
            }
            _ => {
                let run = ErrorRun {
                    plugin: plugin.to_string(),
                    revision: revision.to_string(),
                    count: 1,
                    since: now,
                    last,
                };
                j.errors.insert(Arc::from(cluster), run);
            }
        }
        true
    }

    /// A usable answer about `cluster` ends its run of errors.
    pub(super) fn end_error_run(&self, owner: &str, cluster: &str) {
        if let Ok(mut judged) = self.judged.lock()
            && let Some(j) = judged.get_mut(owner)
        {
            j.errors.remove(cluster);
        }
    }

    /// Records that the plugin answered `b` and the MutateManifestWork after it; true
    /// when that opens a write (the cluster may now get the revision, or a revert the
    /// plugin's spec).
    pub(super) fn record_begun(&self, owner: &str, b: &Begin, mutation: Option<Mutation>) -> bool {
        let Ok(mut judged) = self.judged.lock() else {
            return false;
        };
        let j = judged.entry(owner.to_string()).or_default();
        let Some(sent) = j.begun.get_mut(b.cluster.as_str()) else {
            return false;
        };
        if (&sent.plugin, &sent.revision, sent.aborting)
            != (&b.target.plugin, &b.revision, b.aborting)
        {
            return false;
        }
        sent.acked = true;
        let spec_changes = mutation.is_some();
        sent.mutation = mutation.map(|m| intern(&mut j.specs, m));
        !b.aborting || spec_changes
    }

    pub(super) fn forget_progress(&self, owner: &str, placement: &str) {
        if let Ok(mut judged) = self.judged.lock()
            && let Some(j) = judged.get_mut(owner)
        {
            j.progressed.remove(placement);
        }
    }

    /// Records one answer; true when it differs from the last one.
    pub(super) fn record(
        &self,
        owner: &str,
        v: &Validation,
        r: api::ValidateResponse,
        now: Timestamp,
    ) -> bool {
        let verdict = match api::Verdict::try_from(r.verdict) {
            Ok(api::Verdict::Succeeded) => Verdict::Succeeded,
            Ok(api::Verdict::Failed) => Verdict::Failed,
            // An unspecified or unknown verdict says nothing final.
            _ => Verdict::InProgress,
        };
        self.record_verdict(owner, v, (verdict, r.message), now)
    }

    /// Records `verdict` with its message about `v`; true when it differs from the last
    /// one.
    pub(super) fn record_verdict(
        &self,
        owner: &str,
        v: &Validation,
        (verdict, message): (Verdict, String),
        now: Timestamp,
    ) -> bool {
        let Ok(mut judged) = self.judged.lock() else {
            return false;
        };
        let j = judged.entry(owner.to_string()).or_default();
        let cluster: Arc<str> = Arc::from(v.cluster.as_str());
        let new = ClusterVerdict {
            plugin: v.target.plugin.clone(),
            revision: v.revision.clone(),
            generation: v.generation,
            verdict,
            // Cut at intake: nothing a plugin says may make a status write fail.
            message: cut(message, PLUGIN_TEXT_MAX),
            at: now,
        };
        let same = j.verdicts.get(&cluster).is_some_and(|old| {
            (
                &old.plugin,
                &old.revision,
                old.generation,
                old.verdict,
                &old.message,
            ) == (
                &new.plugin,
                &new.revision,
                new.generation,
                new.verdict,
                &new.message,
            )
        });
        if !same {
            j.verdicts.insert(cluster, new);
        }
        !same
    }
}

/// Records `key` as sent at `now` unless it is in flight already; true when it was not.
pub(super) fn sent_first<K: Ord>(
    in_flight: &mut BTreeMap<K, Timestamp>,
    key: K,
    now: Timestamp,
) -> bool {
    match in_flight.entry(key) {
        std::collections::btree_map::Entry::Vacant(e) => {
            e.insert(now);
            true
        }
        std::collections::btree_map::Entry::Occupied(_) => false,
    }
}

/// Per cluster, when its oldest unanswered question was sent.
pub(super) fn unanswered(
    validating: &BTreeMap<(Arc<str>, String), Timestamp>,
) -> BTreeMap<Arc<str>, Timestamp> {
    let mut out: BTreeMap<Arc<str>, Timestamp> = BTreeMap::new();
    for ((cluster, _), at) in validating {
        out.entry(cluster.clone())
            .and_modify(|t| *t = (*t).min(*at))
            .or_insert(*at);
    }
    out
}

/// What a batch of calls asks about, one key per call in order.
pub(super) struct InFlight {
    pub(super) validating: Vec<(Arc<str>, String)>,
    pub(super) beginning: Vec<(Arc<str>, String, bool)>,
}

impl InFlight {
    pub(super) fn of(calls: &PluginCalls) -> Self {
        Self {
            validating: calls
                .validations
                .iter()
                .map(|v| (Arc::from(v.cluster.as_str()), v.revision.clone()))
                .collect(),
            beginning: calls
                .begins
                .iter()
                .map(|b| {
                    (
                        Arc::from(b.cluster.as_str()),
                        b.revision.clone(),
                        b.aborting,
                    )
                })
                .collect(),
        }
    }
}
