//! Making the calls a pass asks for, in a task of their own and under the write gate,
//! and recording each answer as it comes.

use super::*;

impl Plugins {
    /// Where to say which MWRS has news from its plugins (the controller's trigger).
    pub fn answers_to(&self, news: UnboundedSender<ObjectRef<GuardedMwrs>>) {
        if let Ok(mut n) = self.news.lock() {
            *n = Some(news);
        }
    }

    /// Makes `calls` in a task of their own, so that a slow plugin holds no reconcile
    /// (nor another MWRS); when an answer differs from what was known, `mwrs` is
    /// reconciled again. Each call counts as made from now: the passes meanwhile do not
    /// make it again. Each call is made only while `outlet`'s write gate is open (rules
    /// §12.4), and a refused answer is reported as an Event on `mwrs` through it.
    pub fn call_in_background(
        self: &Arc<Self>,
        outlet: Arc<dyn Outlet>,
        mwrs: &ManifestWorkReplicaSet,
        calls: PluginCalls,
    ) {
        if !outlet.may_call() {
            return;
        }
        let namespace = mwrs.metadata.namespace.clone().unwrap_or_default();
        let name = mwrs.metadata.name.clone().unwrap_or_default();
        let key = ObjectRef::<GuardedMwrs>::new(&name).within(&namespace);
        let owner = OwnerKey::new(namespace, name).slashed();
        let calls = self.mark_sent(&owner, calls, Timestamp::now());
        if calls.is_empty() {
            return;
        }
        let about = MwrsRef::of(mwrs);
        // One encoding of each template, shared by every call about its revision (a Begin
        // per cluster, all about one or two revisions); the MutateManifestWork that
        // follows a Begin carries it.
        let mut specs: BTreeMap<String, Template> = BTreeMap::new();
        for b in &calls.begins {
            if !specs.contains_key(&b.revision)
                && let Some(template) = Template::of(&b.template)
            {
                specs.insert(b.revision.clone(), template);
            }
        }
        let plugins = self.clone();
        let regarding = kube::Resource::object_ref(mwrs, &());
        tokio::spawn(async move {
            let to = Reporting {
                outlet: outlet.as_ref(),
                regarding: &regarding,
                key,
            };
            plugins.call(&owner, &about, calls, &specs, to).await;
        });
    }

    /// Says that MWRS `key` has news from its plugins (the controller's trigger merges
    /// news about one MWRS that come before its pass).
    pub(super) fn announce(&self, key: &ObjectRef<GuardedMwrs>) {
        let news = self.news.lock().ok().and_then(|n| n.clone());
        if let Some(news) = news {
            let _ = news.unbounded_send(key.clone());
        }
    }

    /// Makes `calls`, at most [`ASK_CONCURRENCY`] at once and each only while the write
    /// gate is open, and records each answer as it comes; the MWRS is announced whenever
    /// one differs from what was known.
    pub(super) async fn call(
        &self,
        owner: &str,
        about: &MwrsRef,
        calls: PluginCalls,
        specs: &BTreeMap<String, Template>,
        to: Reporting<'_>,
    ) {
        let outlet = to.outlet;
        let mut answers = futures::stream::iter(self.jobs(about, calls, specs))
            .map(|job| async move {
                let _permit = self.permit(job.plugin()).await;
                // A replica that lost its lease (or the CRD) since the pass asks nothing.
                if outlet.may_call_quietly() {
                    Ok(job.run().await)
                } else {
                    Err(job)
                }
            })
            .buffer_unordered(ASK_CONCURRENCY);
        while let Some(answer) = answers.next().await {
            let answer = match answer {
                Ok(answer) => answer,
                Err(job) => {
                    self.landed(owner, job.sent());
                    continue;
                }
            };
            self.landed(owner, answer.sent());
            if let Some(refusal) = self.refusal_to_report(owner, &answer) {
                outlet
                    .warn(to.regarding, "PluginAnswerRefused", &refusal)
                    .await;
            }
            if self.record_answer(owner, answer) {
                self.announce(&to.key);
            }
        }
    }

    /// The calls to make for `calls` about the MWRS `about`, with the client of each one's
    /// plugin; `specs` holds the templates Begins are about.
    pub(super) fn jobs(
        &self,
        about: &MwrsRef,
        calls: PluginCalls,
        specs: &BTreeMap<String, Template>,
    ) -> Vec<Job> {
        // A plugin not open to the MWRS's namespace is never called (the planner plans
        // no call to it: this is the second lock on the door).
        let client = |plugin: &str| {
            self.clients
                .get(plugin)
                .filter(|_| self.serves(plugin, &about.namespace))
                .cloned()
        };
        let mut jobs: Vec<Job> = Vec::new();
        for v in calls.validations {
            let request = validate_request(about, &v);
            jobs.push(Job::Validate(client(&v.target.plugin), v, request));
        }
        for b in calls.begins {
            let request = rollout_request(about, &b.target, &b.cluster, &[], b.aborting);
            let check = SpecCheck {
                template: specs.get(&b.revision).cloned(),
                allow_removal: self.allow_removal.contains(&b.target.plugin),
                limit: self.manifest_size_limit,
            };
            let mutate = mutate_request(about, &b, Vec::new());
            let plugin = client(&b.target.plugin);
            jobs.push(Job::Begin(plugin, b, request, Box::new(mutate), check));
        }
        for p in calls.progress {
            let request = rollout_request(about, &p.target, "", &p.clusters, p.aborting);
            jobs.push(Job::Progress(client(&p.target.plugin), p, request));
        }
        jobs
    }
}

/// Where a batch of calls reports: the write gate and Events of `outlet`, about the MWRS
/// `regarding` (`key` in the controller's queue).
pub(super) struct Reporting<'a> {
    pub(super) outlet: &'a dyn Outlet,
    pub(super) regarding: &'a k8s_openapi::api::core::v1::ObjectReference,
    pub(super) key: ObjectRef<GuardedMwrs>,
}

/// The MWRS a call is about, as every request names it.
pub(super) struct MwrsRef {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) uid: String,
}

impl MwrsRef {
    pub(super) fn of(mwrs: &ManifestWorkReplicaSet) -> Self {
        let meta = &mwrs.metadata;
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

/// One call to make, with the client of its plugin (None: not registered). A Begin is
/// two: BeginRollout (or BeginAbort), then MutateManifestWork.
pub(super) enum Job {
    Validate(Option<PluginClient>, Validation, api::ValidateRequest),
    Begin(
        Option<PluginClient>,
        Begin,
        api::RolloutRequest,
        // Boxed: the variant is the largest by far.
        Box<api::MutateRequest>,
        SpecCheck,
    ),
    Progress(Option<PluginClient>, Progress, api::RolloutRequest),
}

/// What a call was about, as far as calls in flight go.
pub(super) enum Sent<'a> {
    Validation(&'a Validation),
    Begin(&'a Begin),
    Progress,
}

impl Job {
    /// The plugin it calls.
    pub(super) fn plugin(&self) -> &str {
        match self {
            Job::Validate(_, v, _) => &v.target.plugin,
            Job::Begin(_, b, ..) => &b.target.plugin,
            Job::Progress(_, p, _) => &p.target.plugin,
        }
    }

    pub(super) fn sent(&self) -> Sent<'_> {
        match self {
            Job::Validate(_, v, _) => Sent::Validation(v),
            Job::Begin(_, b, ..) => Sent::Begin(b),
            Job::Progress(..) => Sent::Progress,
        }
    }
}

impl Answer {
    pub(super) fn sent(&self) -> Sent<'_> {
        match self {
            Answer::Validated(v, _) => Sent::Validation(v),
            Answer::Begun(b, _) => Sent::Begin(b),
            Answer::Progressed(..) => Sent::Progress,
        }
    }
}

/// A call and how it went.
pub(super) enum Answer {
    Validated(Validation, Result<api::ValidateResponse, tonic::Status>),
    /// The spec MutateManifestWork returned, or the call that failed and how.
    Begun(
        Begin,
        Result<Option<Mutation>, (&'static str, tonic::Status)>,
    ),
    Progressed(Progress, Result<(), tonic::Status>),
}

impl Job {
    pub(super) async fn run(self) -> Answer {
        let missing = || tonic::Status::not_found("not registered");
        match self {
            Job::Validate(client, v, r) => {
                let answer = match client {
                    Some(c) if v.aborting => c.validate_abort_completion(r).await,
                    Some(c) => c.validate_rollout_completion(r).await,
                    None => Err(missing()),
                };
                Answer::Validated(v, answer)
            }
            Job::Begin(client, b, r, mutate, check) => {
                let answer = match client {
                    Some(c) => begin_and_mutate(&c, &b, r, *mutate, &check).await,
                    None => Err((b.call_name(), missing())),
                };
                Answer::Begun(b, answer)
            }
            Job::Progress(client, p, r) => {
                let answer = match client {
                    Some(c) => c.progress_rollout(r).await,
                    None => Err(missing()),
                };
                Answer::Progressed(p, answer.map(drop))
            }
        }
    }
}

/// A revision's template: the bytes every MutateManifestWork about it sends, and the
/// parsed form its answers are checked against.
#[derive(Clone)]
pub(super) struct Template {
    pub(super) bytes: Arc<[u8]>,
    pub(super) typed: Arc<ManifestWorkTemplate>,
    /// Its digest: an answer equal to it is no mutation.
    pub(super) digest: mwrs_engine::hash::Digest,
}

impl Template {
    pub(super) fn of(template: &serde_json::Value) -> Option<Self> {
        let bytes = Arc::from(serde_json::to_vec(template).ok()?);
        let typed = ManifestWorkTemplate::from_value(template.clone()).ok()?;
        Some(Self {
            bytes,
            typed: Arc::new(typed),
            digest: mwrs_engine::hash::digest(template),
        })
    }
}

/// What a MutateManifestWork answer is checked against (rules §12.1).
pub(super) struct SpecCheck {
    pub(super) template: Option<Template>,
    pub(super) allow_removal: bool,
    pub(super) limit: usize,
}

/// BeginRollout (or BeginAbort) about `b`, then MutateManifestWork: the spec to write
/// instead of the template, if the plugin returns one it may (`check`).
pub(super) async fn begin_and_mutate(
    c: &PluginClient,
    b: &Begin,
    r: api::RolloutRequest,
    mut mutate: api::MutateRequest,
    check: &SpecCheck,
) -> Result<Option<Mutation>, (&'static str, tonic::Status)> {
    let begun = match b.aborting {
        true => c.begin_abort(r).await,
        false => c.begin_rollout(r).await,
    };
    begun.map_err(|s| (b.call_name(), s))?;
    const MUTATE: &str = "MutateManifestWork";
    let Some(template) = &check.template else {
        // No template to send: nothing to mutate (the revision's content is unknown).
        return Ok(None);
    };
    // Copied here, one call at a time, not for every queued call at once.
    mutate.spec_json = template.bytes.to_vec();
    let answer = c
        .mutate_manifest_work(mutate)
        .await
        .map_err(|s| (MUTATE, s))?;
    let spec = mwrs_engine::validate::plugin_spec(
        &answer.spec_json,
        (&template.typed, template.digest),
        check.allow_removal,
        check.limit,
    );
    spec.map_err(|invalid| {
        let why = cut(format!("refused: {invalid}"), PLUGIN_TEXT_MAX);
        (MUTATE, tonic::Status::invalid_argument(why))
    })
}

pub(super) trait CallName {
    fn call_name(&self) -> &'static str;
}

impl CallName for Validation {
    fn call_name(&self) -> &'static str {
        if self.aborting {
            "ValidateAbortCompletion"
        } else {
            "ValidateRolloutCompletion"
        }
    }
}

impl CallName for Begin {
    fn call_name(&self) -> &'static str {
        if self.aborting {
            "BeginAbort"
        } else {
            "BeginRollout"
        }
    }
}
