//! Connecting to the hub the way kubectl does (kubeconfig, context, namespace) and reading
//! what belongs to one MWRS with list calls and label selectors — never one GET per
//! cluster, so it stays cheap on hubs with thousands of clusters.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use mwrs_api::labels;
use mwrs_api::mwrs::ManifestWorkReplicaSet;
use mwrs_api::placement::{Placement, PlacementDecision};
use mwrs_api::work::ManifestWork;
use mwrs_engine::owner::OwnerKey;
use mwrs_engine::revision::RevisionView;
use mwrs_engine::rollout::parse_go_duration;
use mwrs_engine::snapshot::{Snapshot, owner_of};
use mwrs_engine::stored_work::StoredWork;

use crate::args::Global;
use crate::error::{CliError, Exit, Result};
use crate::streamed;

pub struct HubClient {
    pub client: Client,
    /// `-n`, else the context's namespace.
    pub namespace: String,
    /// The API server, for messages.
    pub url: String,
}

/// A request timeout flag as a duration ("0": none).
pub fn parse_timeout(s: &str, flag: &str) -> Result<Option<Duration>> {
    if s == "0" {
        return Ok(None);
    }
    let d = parse_go_duration(s)
        .map_err(|e| CliError::usage(format!("{flag} {s:?}: {e} (examples: 30s, 5m, 1h)")))?;
    Ok(Some(Duration::try_from(d).map_err(|_| {
        CliError::usage(format!("{flag} {s:?}: must not be negative"))
    })?))
}

impl HubClient {
    /// A client for `--kubeconfig` (else $KUBECONFIG or ~/.kube/config, else in-cluster)
    /// and `--context`. `watch` leaves the read timeout off (watches stay open).
    pub async fn connect(g: &Global, watch: bool) -> Result<Self> {
        let opts = KubeConfigOptions {
            context: g.context.clone(),
            ..Default::default()
        };
        let mut config = match &g.kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path).map_err(|e| {
                    CliError::error(format!(
                        "cannot read kubeconfig {}: {}",
                        path.display(),
                        crate::error::error_chain(&e)
                    ))
                })?;
                Config::from_custom_kubeconfig(kc, &opts)
                    .await
                    .map_err(|e| {
                        CliError::error(format!(
                            "kubeconfig {}: {}",
                            path.display(),
                            crate::error::error_chain(&e)
                        ))
                    })?
            }
            None => match Config::from_kubeconfig(&opts).await {
                Ok(c) => c,
                Err(e) if g.context.is_none() => Config::incluster().map_err(|_| {
                    CliError::error(format!(
                        "no kubeconfig: {} (use --kubeconfig or $KUBECONFIG)",
                        crate::error::error_chain(&e)
                    ))
                })?,
                Err(e) => {
                    return Err(CliError::error(format!(
                        "kubeconfig: {}",
                        crate::error::error_chain(&e)
                    )));
                }
            },
        };
        config.connect_timeout = Some(Duration::from_secs(10));
        if !watch {
            config.read_timeout = parse_timeout(&g.request_timeout, "--request-timeout")?;
        }
        let url = config.cluster_url.to_string();
        let namespace = g
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).map_err(|e| {
            CliError::new(
                Exit::Unreachable,
                format!("cannot build a client for {url}: {e}"),
            )
        })?;
        Ok(Self {
            client,
            namespace,
            url,
        })
    }

    pub fn mwrs_api(&self) -> Api<ManifestWorkReplicaSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The MWRS `name`, else every MWRS of the namespace (of every namespace with `all`).
    pub async fn list_mwrs(
        &self,
        name: Option<&str>,
        all: bool,
    ) -> Result<Vec<ManifestWorkReplicaSet>> {
        if let Some(name) = name {
            return Ok(vec![self.get(name).await?]);
        }
        let api: Api<ManifestWorkReplicaSet> = if all {
            Api::all(self.client.clone())
        } else {
            self.mwrs_api()
        };
        api.list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| CliError::kube("listing manifestworkreplicasets", e))
    }

    /// Has the API server any objection to `object` (an MWRS as written in a file, unknown
    /// fields included) in `namespace`? A dry-run create with strict field validation:
    /// unknown fields, schema and name are checked before the server looks for an existing
    /// object, so AlreadyExists means it passed. Forbidden (no right to create) is not an
    /// objection: `Ok(Some(why))` says the check could not be made.
    pub async fn server_objection(
        &self,
        namespace: &str,
        object: &serde_json::Value,
    ) -> Result<Option<String>> {
        let url = format!(
            "/apis/work.open-cluster-management.io/v1alpha1/namespaces/{namespace}/\
             manifestworkreplicasets?dryRun=All&fieldValidation=Strict"
        );
        let body = serde_json::to_vec(object)
            .map_err(|e| CliError::error(format!("cannot encode the object: {e}")))?;
        let req = http::Request::post(url)
            .header("content-type", "application/json")
            .body(body)
            .map_err(|e| CliError::error(format!("cannot build the request: {e}")))?;
        match self.client.request::<serde_json::Value>(req).await {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(Some(s.message)),
            Err(kube::Error::Api(s)) if s.code == 400 || s.code == 422 => Err(CliError::new(
                Exit::Degraded,
                format!("the API server rejects it: {}", s.message),
            )),
            Err(e) => Err(CliError::kube("validating on the API server", e)),
        }
    }

    /// The MWRS `name` in the namespace; a clear "not found" otherwise.
    pub async fn get(&self, name: &str) -> Result<ManifestWorkReplicaSet> {
        match self.mwrs_api().get_opt(name).await {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(CliError::not_found(format!(
                "manifestworkreplicaset {name:?} not found in namespace {:?}",
                self.namespace
            ))),
            Err(e) => Err(CliError::kube(
                &format!("reading manifestworkreplicaset {name}"),
                e,
            )),
        }
    }

    /// The ControllerRevisions owned by `m` (owner label, and no controller reference to
    /// another object), as views ordered by revision number, with the raw objects.
    pub async fn revisions(
        &self,
        m: &ManifestWorkReplicaSet,
    ) -> Result<Vec<(RevisionView, ControllerRevision)>> {
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = api
            .list(&owner_params(m))
            .await
            .map_err(|e| CliError::kube("listing controllerrevisions", e))?;
        let mut out: Vec<(RevisionView, ControllerRevision)> = list
            .items
            .into_iter()
            .filter(|cr| owned_by(cr, m))
            .filter_map(|cr| RevisionView::from_controller_revision(&cr).map(|v| (v, cr)))
            .collect();
        out.sort_by_key(|(v, _)| v.revision);
        Ok(out)
    }

    /// The revision views of `m` alone, oldest first.
    pub async fn history(&self, m: &ManifestWorkReplicaSet) -> Result<Vec<RevisionView>> {
        Ok(self
            .revisions(m)
            .await?
            .into_iter()
            .map(|(v, _)| v)
            .collect())
    }

    /// Everything the planner reads about `m`: its Placements, their decisions (by the
    /// placement label), its ManifestWorks in every cluster namespace (by the owner label)
    /// and its revisions. A user who may not list ManifestWorks across the cluster
    /// namespaces (a tenant with rights in its own namespace) gets the rest, and why.
    pub async fn snapshot(&self, m: &ManifestWorkReplicaSet) -> Result<Reading> {
        let owner = owner_of(m);
        let (works, rest) = futures::try_join!(self.works(&owner), self.around(m))?;
        Ok(Reading::of(m, rest, works))
    }

    /// The MWRS `name` and its [`HubClient::snapshot`]. Its ManifestWorks (the bulk of
    /// the reading) are listed while the MWRS and the rest are read.
    pub async fn read(&self, name: &str) -> Result<(ManifestWorkReplicaSet, Reading)> {
        let owner = OwnerKey::new(self.namespace.as_str(), name);
        let mwrs_and_rest = async {
            let m = self.get(name).await?;
            let rest = self.around(&m).await?;
            Ok((m, rest))
        };
        let (works, (m, rest)) = futures::try_join!(self.works(&owner), mwrs_and_rest)?;
        let reading = Reading::of(&m, rest, works);
        Ok((m, reading))
    }

    /// What the planner reads about `m` besides its ManifestWorks.
    async fn around(&self, m: &ManifestWorkReplicaSet) -> Result<Around> {
        let (placements, decisions, revisions) =
            futures::try_join!(self.placements(m), self.decisions(m), self.revisions(m))?;
        Ok(Around {
            placements,
            decisions,
            revisions: revisions.into_iter().map(|(_, cr)| cr).collect(),
        })
    }

    /// May this user list `m`'s ManifestWorks? One metadata-only item is asked for.
    pub async fn works_hidden(&self, m: &ManifestWorkReplicaSet) -> Result<Option<String>> {
        let lp = owner_params(m).limit(1);
        match Api::<ManifestWork>::all(self.client.clone())
            .list_metadata(&lp)
            .await
        {
            Ok(_) => Ok(None),
            Err(e) => forbidden(e, "listing manifestworks").map(Some),
        }
    }

    async fn placements(&self, m: &ManifestWorkReplicaSet) -> Result<Vec<Placement>> {
        let api: Api<Placement> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut out = Vec::new();
        for r in &m.spec.placement_refs {
            match api.get_opt(&r.name).await {
                Ok(Some(p)) => out.push(p),
                Ok(None) => {}
                Err(e) => return Err(CliError::kube(&format!("reading placement {}", r.name), e)),
            }
        }
        Ok(out)
    }

    async fn decisions(&self, m: &ManifestWorkReplicaSet) -> Result<Vec<PlacementDecision>> {
        if m.spec.placement_refs.is_empty() {
            return Ok(Vec::new());
        }
        let api: Api<PlacementDecision> = Api::namespaced(self.client.clone(), &self.namespace);
        let lp = ListParams::default().labels(&placement_selector(m));
        api.list(&lp)
            .await
            .map(|l| l.items)
            .map_err(|e| CliError::kube("listing placementdecisions", e))
    }

    /// `owner`'s ManifestWorks, decoded without their manifests and the agent's
    /// `resourceStatus` (most of what the API server sends), while they arrive.
    async fn works(&self, owner: &OwnerKey) -> Result<Visible<Vec<StoredWork>>> {
        match streamed::list_all::<StoredWork>(&self.client, &owner_selector(owner)).await {
            Ok(items) => Ok(Visible::Yes(items)),
            Err(e) => forbidden(e, "listing manifestworks").map(Visible::Forbidden),
        }
    }
}

/// What the planner reads about an MWRS besides its ManifestWorks.
struct Around {
    placements: Vec<Placement>,
    decisions: Vec<PlacementDecision>,
    revisions: Vec<ControllerRevision>,
}

/// What the CLI read of one MWRS and its fleet.
pub struct Reading {
    pub snapshot: Snapshot,
    /// Why the ManifestWorks could not be read (the API server's refusal), when it could
    /// not: the snapshot then holds none, and per-cluster states are unknown.
    pub works_hidden: Option<String>,
}

impl Reading {
    fn of(m: &ManifestWorkReplicaSet, rest: Around, works: Visible<Vec<StoredWork>>) -> Self {
        let (works, hidden) = match works {
            Visible::Yes(w) => (w, None),
            Visible::Forbidden(why) => (Vec::new(), Some(why)),
        };
        Self {
            snapshot: Snapshot::from_objects(
                m,
                &rest.placements,
                &rest.decisions,
                &works,
                &rest.revisions,
            ),
            works_hidden: hidden,
        }
    }
}

/// A list the user may or may not read.
pub enum Visible<T> {
    Yes(T),
    /// The API server's refusal, in its words.
    Forbidden(String),
}

/// The refusal's message for a 403; any other error as the CLI reports it.
pub fn forbidden(e: kube::Error, what: &str) -> Result<String> {
    match e {
        kube::Error::Api(s) if s.code == 403 => Ok(s.message),
        e => Err(CliError::kube(what, e)),
    }
}

/// Selects what `m` owns by its owner label.
pub fn owner_params(m: &ManifestWorkReplicaSet) -> ListParams {
    owner_selector(&owner_of(m))
}

/// Selects what `owner` owns by its owner label.
fn owner_selector(owner: &OwnerKey) -> ListParams {
    let (k, v) = owner.selector();
    ListParams::default().labels(&format!("{k}={v}"))
}

/// `note: {what}: you may not list ManifestWorks ... ({why})`, for a reader without the
/// right to list ManifestWorks across the cluster namespaces.
pub fn hidden_note(what: &str, why: &str) -> String {
    format!("note: {what}: you may not list ManifestWorks in the cluster namespaces ({why})")
}

/// `cluster.open-cluster-management.io/placement in (a,b)` for the MWRS's placementRefs.
pub fn placement_selector(m: &ManifestWorkReplicaSet) -> String {
    let names: Vec<&str> = m
        .spec
        .placement_refs
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    format!("{} in ({})", labels::PLACEMENT_LABEL, names.join(","))
}

/// A revision carrying `m`'s owner label is still not `m`'s when its controller
/// reference names another object (e.g. an MWRS of the same name deleted and re-created).
pub fn owned_by(cr: &ControllerRevision, m: &ManifestWorkReplicaSet) -> bool {
    let controller = cr
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match (controller, m.metadata.uid.as_deref()) {
        (Some(o), Some(uid)) => o.uid == uid,
        _ => true,
    }
}
