//! Spec validation (SPEC §5 step 2): everything the planner refuses to act on, reported as
//! the first offending field and the reason. An invalid spec touches no ManifestWork.

use std::collections::BTreeMap;

use mwrs_api::mwrs::{CASCADE_BACKGROUND, CASCADE_FOREGROUND, ManifestWorkReplicaSetSpec};
use serde_json::Value;

use crate::Invalid;
use crate::hash;
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
    validate_manifests(template.manifests(), manifest_size_limit)?;
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

fn validate_manifests(manifests: &[Value], limit: usize) -> Result<(), Invalid> {
    if manifests.is_empty() {
        return Err(Invalid::new(MANIFESTS, "must list at least one manifest"));
    }
    let mut seen: BTreeMap<(String, String, String, String), usize> = BTreeMap::new();
    let mut total = 0usize;
    for (i, m) in manifests.iter().enumerate() {
        let field = format!("{MANIFESTS}[{i}]");
        let id = manifest_identity(m).map_err(|reason| Invalid::new(&field, reason))?;
        if let Some(first) = seen.insert(id.clone(), i) {
            let (api_version, kind, ns, name) = id;
            let what = if ns.is_empty() {
                format!("{api_version} {kind} {name}")
            } else {
                format!("{api_version} {kind} {ns}/{name}")
            };
            return Err(Invalid::new(
                field,
                format!("duplicates manifests[{first}] ({what})"),
            ));
        }
        total += hash::canonical_json(m).len();
    }
    if total > limit {
        return Err(Invalid::new(
            MANIFESTS,
            format!("total size {total} bytes exceeds the limit of {limit} bytes"),
        ));
    }
    Ok(())
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
}
