//! Spec validation (rules §5 step 2): everything the planner refuses to act on, reported as
//! the first offending field and the reason. An invalid spec touches no ManifestWork.

use std::collections::BTreeMap;

use mwrs_api::mwrs::{CASCADE_BACKGROUND, CASCADE_FOREGROUND, ManifestWorkReplicaSetSpec};
use mwrs_api::work::{ManifestWorkSpec, ManifestWorkTemplate};
use serde_json::Value;

use crate::Invalid;
use crate::hash::{self, Digest};
use crate::plugin::Mutation;
use crate::rollout::ParsedStrategy;

/// Default limit of the total size of a template's manifests (upstream's webhook).
pub const DEFAULT_MANIFEST_SIZE_LIMIT: usize = 500 * 1024;

/// A spec the planner can act on.
#[derive(Clone, Debug)]
pub struct Validated {
    /// Canonical JSON of `spec.manifestWorkTemplate`.
    pub canonical: String,
    /// One parsed strategy per placementRef, in spec order.
    pub strategies: Vec<ParsedStrategy>,
}

const TEMPLATE: &str = "spec.manifestWorkTemplate";
const MANIFESTS: &str = "spec.manifestWorkTemplate.workload.manifests";

pub fn validate(
    spec: &ManifestWorkReplicaSetSpec,
    manifest_size_limit: usize,
) -> Result<Validated, Invalid> {
    let template = &spec.manifest_work_template;
    template
        .typed()
        .map_err(|e| Invalid::new(TEMPLATE, format!("is not a ManifestWork spec: {e}")))?;
    validate_manifests(MANIFESTS, template.manifests(), manifest_size_limit)?;
    let strategies = validate_placement_refs(spec)?;
    match spec.cascade_deletion_policy.as_deref() {
        None | Some(CASCADE_BACKGROUND) | Some(CASCADE_FOREGROUND) => {}
        Some(other) => {
            return Err(Invalid::new(
                "spec.cascadeDeletionPolicy",
                format!("unknown value {other:?}: must be Background or Foreground"),
            ));
        }
    }
    if let Some(limit) = spec.revision_history_limit.filter(|l| *l < 0) {
        return Err(Invalid::new(
            "spec.revisionHistoryLimit",
            format!("must be 0 or more, got {limit}"),
        ));
    }
    Ok(Validated {
        canonical: hash::canonical_json(&template.to_value()),
        strategies,
    })
}

/// The manifests at `field`: at least one, each with a fixed identity, no two the same,
/// their total size within `limit`.
fn validate_manifests(field: &str, manifests: &[Value], limit: usize) -> Result<(), Invalid> {
    if manifests.is_empty() {
        return Err(Invalid::new(field, "must list at least one manifest"));
    }
    let mut seen: BTreeMap<(String, String, String, String), usize> = BTreeMap::new();
    let mut total = 0usize;
    for (i, m) in manifests.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let id = manifest_identity(m).map_err(|reason| Invalid::new(&at, reason))?;
        if let Some(first) = seen.insert(id.clone(), i) {
            let (api_version, kind, ns, name) = id;
            let what = if ns.is_empty() {
                format!("{api_version} {kind} {name}")
            } else {
                format!("{api_version} {kind} {ns}/{name}")
            };
            return Err(Invalid::new(
                at,
                format!("duplicates manifests[{first}] ({what})"),
            ));
        }
        total += hash::canonical_json(m).len();
    }
    if total > limit {
        return Err(Invalid::new(
            field,
            format!("total size {total} bytes exceeds the limit of {limit} bytes"),
        ));
    }
    Ok(())
}

/// Where a plugin's spec is checked from, in the names its errors use.
const PLUGIN_SPEC: &str = "spec_json";

/// What a plugin's spec may hold besides its manifests (manifestConfigs, deleteOption,
/// executor): its whole answer is refused past the manifests' limit plus this, before it
/// is parsed, so that no answer reaches the API server at several MiB (security review P1).
pub const PLUGIN_SPEC_OVERHEAD: usize = 64 * 1024;

/// The spec a rollout plugin's MutateManifestWork returned for a revision whose template
/// is `template`, checked as a user's template is (rules §12.1): a ManifestWork spec with
/// no field that type does not have, manifests present, valid and within `limit`, and
/// every manifest of the template still there unless `allow_removal`. Ok(None): the
/// template unchanged (an empty answer, or the template itself: `template_digest`).
pub fn plugin_spec(
    answer: &[u8],
    (template, template_digest): (&ManifestWorkTemplate, Digest),
    allow_removal: bool,
    limit: usize,
) -> Result<Option<Mutation>, Invalid> {
    if answer.is_empty() {
        return Ok(None);
    }
    let most = limit.saturating_add(PLUGIN_SPEC_OVERHEAD);
    if answer.len() > most {
        return Err(Invalid::new(
            PLUGIN_SPEC,
            format!(
                "is {} bytes: a spec may take {most} (the manifests' limit, --manifest-size-limit, and {PLUGIN_SPEC_OVERHEAD} for its other fields)",
                answer.len()
            ),
        ));
    }
    let value: Value = serde_json::from_slice(answer)
        .map_err(|e| Invalid::new(PLUGIN_SPEC, format!("is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(Invalid::new(PLUGIN_SPEC, "is not a JSON object"));
    }
    let typed: ManifestWorkSpec = serde_json::from_value(value.clone())
        .map_err(|e| Invalid::new(PLUGIN_SPEC, format!("is not a ManifestWork spec: {e}")))?;
    // Every field the typed spec keeps comes back; one that does not was unknown.
    let known = serde_json::to_value(&typed).unwrap_or(Value::Null);
    if let Some(path) = first_unknown(&value, &known, PLUGIN_SPEC) {
        return Err(Invalid::new(path, "is not a field of a ManifestWork spec"));
    }
    let manifests = value["workload"]["manifests"].as_array().map(Vec::as_slice);
    let field = format!("{PLUGIN_SPEC}.workload.manifests");
    validate_manifests(&field, manifests.unwrap_or_default(), limit)?;
    if !allow_removal {
        let kept: Result<Vec<_>, _> = manifests
            .unwrap_or_default()
            .iter()
            .map(manifest_identity)
            .collect();
        let kept = kept.map_err(|reason| Invalid::new(&field, reason))?;
        for m in template.manifests() {
            let Ok(id) = manifest_identity(m) else {
                continue;
            };
            if !kept.contains(&id) {
                let (group, kind, ns, name) = id;
                return Err(Invalid::new(
                    field,
                    format!(
                        "drops the template's {kind} {ns}{}{name} (group {group:?}): the plugin's registration does not allow removal (allowManifestRemoval)",
                        if ns.is_empty() { "" } else { "/" }
                    ),
                ));
            }
        }
    }
    let mutation = Mutation::new(value);
    Ok((mutation.digest != template_digest).then_some(mutation))
}

/// The first field of `given` that `known` (its typed round trip) lacks, by path; raw
/// manifests are not looked into (they are kept whole).
fn first_unknown(given: &Value, known: &Value, path: &str) -> Option<String> {
    match (given, known) {
        (Value::Object(g), Value::Object(k)) => g.iter().find_map(|(key, v)| {
            let at = format!("{path}.{key}");
            match k.get(key) {
                None => Some(at),
                Some(_) if at.ends_with(".workload.manifests") => None,
                Some(kv) => first_unknown(v, kv, &at),
            }
        }),
        (Value::Array(g), Value::Array(k)) => g
            .iter()
            .zip(k)
            .enumerate()
            .find_map(|(i, (v, kv))| first_unknown(v, kv, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// (group of apiVersion, kind, namespace, name) of a manifest, or why it has none.
fn manifest_identity(m: &Value) -> Result<(String, String, String, String), String> {
    let obj = m.as_object().ok_or("must be an object")?;
    let text = |v: Option<&Value>, what: &str| -> Result<String, String> {
        match v {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(Value::String(_)) | None => Err(format!("{what} is required")),
            Some(_) => Err(format!("{what} must be a string")),
        }
    };
    let api_version = text(obj.get("apiVersion"), "apiVersion")?;
    let kind = text(obj.get("kind"), "kind")?;
    let meta = obj
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or("metadata is required")?;
    if meta.get("generateName").is_some() {
        return Err(
            "metadata.generateName is not allowed: every manifest needs a fixed metadata.name"
                .into(),
        );
    }
    let name = text(meta.get("name"), "metadata.name")?;
    let namespace = match meta.get("namespace") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err("metadata.namespace must be a string".into()),
    };
    // Two versions of one group name the same object.
    let group = api_version
        .rsplit_once('/')
        .map(|(g, _)| g.to_string())
        .unwrap_or_default();
    Ok((group, kind, namespace, name))
}

fn validate_placement_refs(
    spec: &ManifestWorkReplicaSetSpec,
) -> Result<Vec<ParsedStrategy>, Invalid> {
    if spec.placement_refs.is_empty() {
        return Err(Invalid::new(
            "spec.placementRefs",
            "must list at least one placement",
        ));
    }
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut strategies = Vec::with_capacity(spec.placement_refs.len());
    for (i, r) in spec.placement_refs.iter().enumerate() {
        let field = format!("spec.placementRefs[{i}]");
        if r.name.is_empty() {
            return Err(Invalid::new(format!("{field}.name"), "is required"));
        }
        if let Some(first) = names.insert(&r.name, i) {
            return Err(Invalid::new(
                format!("{field}.name"),
                format!(
                    "placement {:?} is already referenced by placementRefs[{first}]",
                    r.name
                ),
            ));
        }
        let strategy = r.rollout_strategy.clone().unwrap_or_default();
        strategies.push(
            ParsedStrategy::parse(&strategy)
                .map_err(|e| e.within(&format!("{field}.rolloutStrategy")))?,
        );
    }
    Ok(strategies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mwrs_api::mwrs::LocalPlacementReference;
    use mwrs_api::work::ManifestWorkTemplate;
    use serde_json::json;

    fn spec(manifests: Value) -> ManifestWorkReplicaSetSpec {
        ManifestWorkReplicaSetSpec {
            manifest_work_template: ManifestWorkTemplate::from_value(
                json!({"workload": {"manifests": manifests}}),
            )
            .unwrap(),
            placement_refs: vec![LocalPlacementReference {
                name: "p".into(),
                rollout_strategy: None,
            }],
            ..Default::default()
        }
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "d"}})
    }

    fn field_of(s: &ManifestWorkReplicaSetSpec) -> String {
        validate(s, DEFAULT_MANIFEST_SIZE_LIMIT).unwrap_err().field
    }

    #[test]
    fn accepts_a_plain_template() {
        assert!(
            validate(
                &spec(json!([cm("a"), cm("b")])),
                DEFAULT_MANIFEST_SIZE_LIMIT
            )
            .is_ok()
        );
    }

    #[test]
    fn names_each_bad_manifest_field() {
        assert_eq!(field_of(&spec(json!([]))), MANIFESTS);
        let e = validate(
            &spec(json!([cm("a"), {"kind": "X", "metadata": {"name": "n"}}])),
            DEFAULT_MANIFEST_SIZE_LIMIT,
        )
        .unwrap_err();
        assert_eq!(e.field, format!("{MANIFESTS}[1]"));
        assert!(e.reason.contains("apiVersion"), "{e}");
        let e = validate(
            &spec(json!([{"apiVersion": "v1", "kind": "X", "metadata": {"generateName": "n-"}}])),
            DEFAULT_MANIFEST_SIZE_LIMIT,
        )
        .unwrap_err();
        assert!(e.reason.contains("generateName"), "{e}");
        let e = validate(
            &spec(json!([cm("a"), cm("a")])),
            DEFAULT_MANIFEST_SIZE_LIMIT,
        )
        .unwrap_err();
        assert_eq!(e.field, format!("{MANIFESTS}[1]"));
        assert!(e.reason.contains("duplicates manifests[0]"), "{e}");
        let e = validate(&spec(json!([cm("a")])), 10).unwrap_err();
        assert!(e.reason.contains("exceeds the limit"), "{e}");
    }

    #[test]
    fn names_bad_spec_fields() {
        let mut s = spec(json!([cm("a")]));
        s.cascade_deletion_policy = Some("Sideways".into());
        assert_eq!(field_of(&s), "spec.cascadeDeletionPolicy");
        let mut s = spec(json!([cm("a")]));
        s.revision_history_limit = Some(-1);
        assert_eq!(field_of(&s), "spec.revisionHistoryLimit");
        let mut s = spec(json!([cm("a")]));
        s.placement_refs.clear();
        assert_eq!(field_of(&s), "spec.placementRefs");
        let mut s = spec(json!([cm("a")]));
        s.placement_refs.push(s.placement_refs[0].clone());
        assert_eq!(field_of(&s), "spec.placementRefs[1].name");
        let mut s = spec(json!([cm("a")]));
        s.manifest_work_template
            .fields
            .insert("deleteOption".into(), json!("nope"));
        assert_eq!(field_of(&s), TEMPLATE);
    }

    fn template() -> ManifestWorkTemplate {
        ManifestWorkTemplate::from_value(json!({"workload": {"manifests": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "app"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "app"}},
        ]}}))
        .unwrap()
    }

    /// The template with its digest, as a plugin's answer is checked against it.
    fn with_digest(t: &ManifestWorkTemplate) -> (&ManifestWorkTemplate, Digest) {
        (t, hash::digest(&t.to_value()))
    }

    fn answer(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_plugins_spec_that_would_empty_a_cluster_is_refused_by_field() {
        let t = template();
        let limit = DEFAULT_MANIFEST_SIZE_LIMIT;
        let whole_work = json!({"apiVersion": "work.open-cluster-management.io/v1",
            "kind": "ManifestWork", "metadata": {"name": "x"}, "spec": t.to_value()});
        let cases = [
            (
                json!({}),
                "spec_json.workload.manifests",
                "at least one manifest",
            ),
            (
                json!({"workload": {"manifests": []}}),
                "spec_json.workload.manifests",
                "at least one",
            ),
            (whole_work, "spec_json.apiVersion", "not a field"),
            (
                json!({"workload": {"manifests": [], "extra": 1}}),
                "spec_json.workload.extra",
                "not a field",
            ),
            (
                json!({"workload": {"manifests": 3}}),
                "spec_json",
                "not a ManifestWork spec",
            ),
            (json!([1]), "spec_json", "not a JSON object"),
        ];
        for (given, field, why) in cases {
            let e = plugin_spec(&answer(given.clone()), with_digest(&t), false, limit).unwrap_err();
            assert_eq!(e.field, field, "{given}: {e}");
            assert!(e.reason.contains(why), "{given}: {e}");
        }
        let e = plugin_spec(b"{not json", with_digest(&t), false, limit).unwrap_err();
        assert!(e.reason.contains("is not JSON"), "{e}");
    }

    #[test]
    fn a_plugins_spec_may_drop_a_manifest_only_when_its_registration_allows() {
        let t = template();
        let limit = DEFAULT_MANIFEST_SIZE_LIMIT;
        let mut v = t.to_value();
        v["workload"]["manifests"].as_array_mut().unwrap().remove(1);
        let e = plugin_spec(&answer(v.clone()), with_digest(&t), false, limit).unwrap_err();
        assert!(
            e.reason.contains("drops the template's ConfigMap app/cfg"),
            "{e}"
        );
        assert!(
            plugin_spec(&answer(v), with_digest(&t), true, limit)
                .unwrap()
                .is_some()
        );
        // Another version of the same group names the same object.
        let mut v = t.to_value();
        v["workload"]["manifests"][0]["apiVersion"] = json!("apps/v2");
        assert!(
            plugin_spec(&answer(v), with_digest(&t), false, limit)
                .unwrap()
                .is_some()
        );
    }

    /// Security review P1: bulk outside the manifests (here 100 KiB of manifestConfigs)
    /// counts too: the whole answer is refused past the manifests' limit plus the spec's
    /// other fields' share, before it is parsed.
    #[test]
    fn a_plugins_whole_spec_is_bounded_not_only_its_manifests() {
        let t = template();
        let mut v = t.to_value();
        let rule = json!({"resourceIdentifier": {"group": "", "resource": "configmaps",
            "namespace": "default", "name": "x".repeat(200)}});
        v["manifestConfigs"] = json!(vec![rule; 512]);
        let given = answer(v);
        assert!(given.len() > 1024 + PLUGIN_SPEC_OVERHEAD);
        let e = plugin_spec(&given, with_digest(&t), false, 1024).unwrap_err();
        assert_eq!(e.field, "spec_json");
        assert!(e.reason.contains("a spec may take"), "{e}");
        assert!(plugin_spec(&given, with_digest(&t), false, DEFAULT_MANIFEST_SIZE_LIMIT).is_ok());
    }

    #[test]
    fn a_plugins_spec_is_held_to_the_manifest_size_limit_and_checks() {
        let t = template();
        let mut v = t.to_value();
        v["workload"]["manifests"][1]["data"] = json!({"big": "x".repeat(4096)});
        let e = plugin_spec(&answer(v.clone()), with_digest(&t), false, 1024).unwrap_err();
        assert!(e.reason.contains("exceeds the limit"), "{e}");
        v["workload"]["manifests"][1]["metadata"] = json!({"generateName": "cfg-"});
        let e = plugin_spec(
            &answer(v),
            with_digest(&t),
            false,
            DEFAULT_MANIFEST_SIZE_LIMIT,
        )
        .unwrap_err();
        assert_eq!(e.field, "spec_json.workload.manifests[1]", "{e}");
    }

    #[test]
    fn a_plugins_spec_equal_to_the_template_or_empty_changes_nothing() {
        let t = template();
        let limit = DEFAULT_MANIFEST_SIZE_LIMIT;
        assert_eq!(
            plugin_spec(b"", with_digest(&t), false, limit).unwrap(),
            None
        );
        assert_eq!(
            plugin_spec(&answer(t.to_value()), with_digest(&t), false, limit).unwrap(),
            None
        );
        let mut v = t.to_value();
        v["workload"]["manifests"][1]["metadata"]["labels"] = json!({"judge": "was here"});
        v["deleteOption"] = json!({"propagationPolicy": "Foreground"});
        let m = plugin_spec(&answer(v.clone()), with_digest(&t), false, limit).unwrap();
        assert_eq!(m.map(|m| (*m.spec).clone()), Some(v));
    }
}
