//! Every label, annotation and finalizer key the project reads or writes, in one place.

/// Owner label on ManifestWorks and ControllerRevisions: `<mwrs-namespace>.<mwrs-name>`.
/// A long owner's ManifestWorks carry it with the hashed owner (the value of
/// [`OWNER_KEY_HASH`]): every ManifestWork the controller writes has it, and the
/// controller watches ManifestWorks by this key alone.
pub const MWRS_OWNER: &str = "work.open-cluster-management.io/manifestworkreplicaset";
/// Placement (placementRef name) that selected the ManifestWork's cluster.
pub const PLACEMENT_NAME: &str = "work.open-cluster-management.io/placementname";
/// Revision hash of the template a ManifestWork carries / a ControllerRevision holds.
pub const CONTROLLER_HASH: &str = "work.open-cluster-management.io/controller-hash";
/// Owner label used instead of [`MWRS_OWNER`] when `<ns>.<name>` is not a valid label
/// value (longer than 63 characters): 32 hex characters of SHA-256 of `ns/name`.
pub const OWNER_KEY_HASH: &str = "work.open-cluster-management.io/ownerkey-hash";
/// Annotation holding `ns/name` of the owning MWRS, always written, read when the owner
/// label is hashed.
pub const MWRS_OWNER_ANNOTATION: &str =
    "work.open-cluster-management.io/manifestworkreplicaset-owner";
/// Finalizer on the MWRS that guards ManifestWork cleanup.
pub const MWRS_FINALIZER: &str = "work.open-cluster-management.io/manifest-work-cleanup";
/// ControllerRevision annotation: the MWRS `metadata.generation` that produced it.
pub const REVISION_GENERATION: &str = "work.open-cluster-management.io/generation";
/// ManifestWork annotation: when the controller wrote the revision it carries (RFC 3339).
/// Condition times earlier than this belong to an older revision and are ignored.
pub const REVISION_APPLIED_AT: &str = "work.open-cluster-management.io/revision-applied-at";
/// Annotation a user sets to say why a template changed (as in `kubectl rollout history`).
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// PlacementDecision label naming its Placement.
pub const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
/// PlacementDecision label holding the decision group index.
pub const DECISION_GROUP_INDEX: &str = "cluster.open-cluster-management.io/decision-group-index";
/// PlacementDecision label holding the decision group name ("" for unnamed groups).
pub const DECISION_GROUP_NAME: &str = "cluster.open-cluster-management.io/decision-group-name";

/// Manual rollout controls (rules §7), as annotations on the MWRS. Abort and retry values
/// are request tokens: a new value is a new request, acted on once. A token may name the
/// revision it is meant for (see [`control_request`]).
pub const CONTROL_ABORT: &str = "mwrs.rollout.open-cluster-management.io/abort";
pub const CONTROL_RETRY: &str = "mwrs.rollout.open-cluster-management.io/retry";
pub const CONTROL_PAUSE: &str = "mwrs.rollout.open-cluster-management.io/paused";

/// An abort or retry token `<unique>/<revision>`: meant for `revision` only, so a request
/// that meets a newer update revision (a template applied meanwhile) acts on nothing.
pub fn control_request(unique: &str, revision: &str) -> String {
    format!("{unique}/{revision}")
}

/// The revision a request token names, if it names one (a bare token, e.g. written with
/// `kubectl annotate`, is for whatever revision is the update revision when read).
pub fn requested_revision(token: &str) -> Option<&str> {
    token
        .rsplit_once('/')
        .map(|(_, r)| r)
        .filter(|r| !r.is_empty())
}

/// Marks on a ControllerRevision: when its revision last completed on every desired
/// cluster, and when it was last aborted (RFC 3339). `rollout undo` goes only to
/// revisions that completed and were not aborted since.
pub const REVISION_COMPLETED_AT: &str = "mwrs.rollout.open-cluster-management.io/completed-at";
pub const REVISION_ABORTED_AT: &str = "mwrs.rollout.open-cluster-management.io/aborted-at";
/// On a ManifestWork: the rollout plugin's FAILED verdict on the revision it carries
/// (JSON: plugin, revision, generation, verdict, at, message, seal), so that a restarted
/// controller and the CLI know it without asking (a SUCCEEDED one lives in the MWRS
/// status, `pluginJudged`). The controller believes it only with its own seal (rules
/// §12.2).
pub const PLUGIN_VERDICT: &str = "mwrs.rollout.open-cluster-management.io/plugin-verdict";

/// On a ManifestWork: the digest (SHA-256 hex of its canonical JSON) of the spec a
/// rollout plugin's MutateManifestWork returned and this controller wrote, then `.` and
/// the controller's seal. A spec with this digest carries the revision the
/// ManifestWork's label names, when the seal is the controller's (rules §12.2).
pub const PLUGIN_SPEC_DIGEST: &str = "mwrs.rollout.open-cluster-management.io/plugin-spec-digest";

/// On an MWRS: `REVISION@GENERATION`, the hash of a revision to roll out without asking
/// its rollout plugins and the MWRS generation the request was made at (`mwrs rollout
/// undo|retry --skip-plugins`, rules §12.3). It counts while that revision is the update
/// revision and the MWRS is at that generation: once, for the request that asked.
pub const SKIP_PLUGINS: &str = "mwrs.rollout.open-cluster-management.io/skip-plugins";

/// On a Secret: `"true"` marks it as holding the key that seals this controller's marks
/// (data `key`, at least 32 bytes, type Opaque). The controller reads no other Secret as
/// its key: a Secret of that name made by someone else without the label is refused
/// (rules §12.2).
pub const MARK_KEY: &str = "mwrs.rollout.open-cluster-management.io/mark-key";

/// Longest valid label value.
pub const MAX_LABEL_VALUE_LEN: usize = 63;

/// Is `v` a valid Kubernetes label value? (empty, or ≤63 chars of `[A-Za-z0-9._-]`
/// starting and ending alphanumeric)
pub fn is_valid_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= MAX_LABEL_VALUE_LEN
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Label keys only this controller sets on the objects it owns (rules §11.4); never taken
/// from an MWRS's own labels.
pub const CONTROLLER_KEYS: [&str; 4] =
    [MWRS_OWNER, OWNER_KEY_HASH, PLACEMENT_NAME, CONTROLLER_HASH];

/// Label keys GitOps tools track what they own by: Argo CD's label tracking (its default
/// before 3.0, `application.instanceLabelKey`; its documented alternative key) and Flux's
/// kustomize and helm controllers. Copied from an MWRS onto its ManifestWorks, as upstream
/// copies every label, they make thousands of ManifestWorks look like resources of the
/// Application or Kustomization that owns the MWRS, which its pruning then deletes (and
/// the agents with them, the workloads on the spokes). Not copied by default
/// (`--labels-not-copied`); annotations are never copied, Argo CD's tracking one
/// included.
pub const GITOPS_TRACKING_LABELS: [&str; 6] = [
    "app.kubernetes.io/instance",
    "argocd.argoproj.io/instance",
    "kustomize.toolkit.fluxcd.io/name",
    "kustomize.toolkit.fluxcd.io/namespace",
    "helm.toolkit.fluxcd.io/name",
    "helm.toolkit.fluxcd.io/namespace",
];

/// Is `key` one of [`CONTROLLER_KEYS`]?
pub fn is_controller_key(key: &str) -> bool {
    CONTROLLER_KEYS.contains(&key)
}

/// Can `name` be a namespace (an RFC 1123 label: at most 63 lowercase alphanumerics or
/// '-', starting and ending alphanumeric)? A managed cluster's name is its namespace's.
pub fn is_dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LABEL_VALUE_LEN
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Can `name` be an object's name (an RFC 1123 subdomain: at most 253 characters, dot-
/// separated labels of lowercase alphanumerics or '-', each starting and ending
/// alphanumeric)? An MWRS's name must be.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_subdomains() {
        for ok in ["app", "app-1.v2", "a", &"a".repeat(253)] {
            assert!(is_dns_subdomain(ok), "{ok}");
        }
        for bad in [
            "",
            "..",
            "a/b",
            "a..b",
            ".a",
            "a.",
            "A",
            "-a",
            "a%2Fb",
            &"a".repeat(254),
        ] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn label_values() {
        assert!(is_valid_label_value(""));
        assert!(is_valid_label_value("ns.name-1"));
        assert!(!is_valid_label_value("-a"));
        assert!(!is_valid_label_value("a/b"));
        assert!(is_valid_label_value(&"a".repeat(63)));
        assert!(!is_valid_label_value(&"a".repeat(64)));
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("cluster-1"));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("Cluster"));
        assert!(!is_dns_label("a.b"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label("../kube-system"));
        assert!(is_dns_label(&"a".repeat(63)));
        assert!(!is_dns_label(&"a".repeat(64)));
    }
}
