//! Pure builders of the patches the executor sends: JSON Patches for ManifestWorks and
//! finalizers (with `test`/resourceVersion guards), and the JSON merge patch of a status
//! diff (explicit `null` for removed fields, because a merge patch that omits a field
//! keeps it).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::work_cache::PatchBase;

/// Escapes one JSON Pointer segment (RFC 6901): `~` → `~0`, `/` → `~1`.
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Operations setting each `want` entry of the map at `/metadata/<field>`, creating the
/// map when the object has none.
fn map_ops(
    field: &str,
    have: Option<&BTreeMap<String, String>>,
    want: &BTreeMap<String, String>,
    ops: &mut Vec<Value>,
) {
    if want.is_empty() {
        return;
    }
    match have {
        None => ops.push(json!({"op": "add", "path": format!("/metadata/{field}"), "value": want})),
        Some(have) => {
            for (k, v) in want {
                if have.get(k) != Some(v) {
                    ops.push(json!({
                        "op": "add",
                        "path": format!("/metadata/{field}/{}", escape(k)),
                        "value": v,
                    }));
                }
            }
        }
    }
}

/// Operations removing each label of `dropped` the object carries.
fn drop_ops(have: Option<&BTreeMap<String, String>>, dropped: &[String], ops: &mut Vec<Value>) {
    for k in dropped
        .iter()
        .filter(|k| have.is_some_and(|h| h.contains_key(*k)))
    {
        let path = format!("/metadata/labels/{}", escape(k));
        ops.push(json!({"op": "remove", "path": path}));
    }
}

fn to_patch(ops: Vec<Value>) -> Result<json_patch::Patch, serde_json::Error> {
    serde_json::from_value(Value::Array(ops))
}

/// Replaces the spec with `template`, sets the controller's labels and annotations and
/// removes the `dropped` labels. With `resource_version`, the patch only applies to that
/// version of the object (the API server answers 409 otherwise), so a decision made on a
/// stale cache is refused.
pub fn work_update(
    base: &PatchBase,
    template: &Value,
    (labels, dropped): (&BTreeMap<String, String>, &[String]),
    annotations: &BTreeMap<String, String>,
    resource_version: Option<&str>,
) -> Result<json_patch::Patch, serde_json::Error> {
    let mut ops: Vec<Value> = version_guard(resource_version).into_iter().collect();
    ops.push(json!({"op": "add", "path": "/spec", "value": template}));
    map_ops("labels", base.labels.as_ref(), labels, &mut ops);
    drop_ops(base.labels.as_ref(), dropped, &mut ops);
    map_ops(
        "annotations",
        base.annotations.as_ref(),
        annotations,
        &mut ops,
    );
    // A plugin's spec digest says what the spec is: it goes with a spec it does not
    // describe.
    let digest = mwrs_api::labels::PLUGIN_SPEC_DIGEST;
    let stale = base
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(digest));
    if stale && !annotations.contains_key(digest) {
        let path = format!("/metadata/annotations/{}", escape(digest));
        ops.push(json!({"op": "remove", "path": path}));
    }
    to_patch(ops)
}

/// The op that makes a JSON patch apply to that version of the object only: the API
/// server answers 409 when the object is at another (changed since, or deleted and
/// created again), so a change planned on a stale cache, or sent by a replica that has
/// lost the lease, is refused (rules §12). None when the version is not known.
fn version_guard(resource_version: Option<&str>) -> Option<Value> {
    resource_version
        .map(|rv| json!({"op": "replace", "path": "/metadata/resourceVersion", "value": rv}))
}

/// Sets labels and annotations only, and removes the `dropped` labels, on
/// `resource_version` of the object when known; None when nothing differs.
pub fn relabel(
    base: &PatchBase,
    (labels, dropped): (&BTreeMap<String, String>, &[String]),
    annotations: &BTreeMap<String, String>,
    resource_version: Option<&str>,
) -> Result<Option<json_patch::Patch>, serde_json::Error> {
    let mut ops = Vec::new();
    map_ops("labels", base.labels.as_ref(), labels, &mut ops);
    drop_ops(base.labels.as_ref(), dropped, &mut ops);
    map_ops(
        "annotations",
        base.annotations.as_ref(),
        annotations,
        &mut ops,
    );
    if ops.is_empty() {
        return Ok(None);
    }
    ops.splice(0..0, version_guard(resource_version));
    to_patch(ops).map(Some)
}

/// Sets a ControllerRevision's number, on `resource_version` of it when known.
pub fn renumber(
    revision: i64,
    resource_version: Option<&str>,
) -> Result<json_patch::Patch, serde_json::Error> {
    let mut ops: Vec<Value> = version_guard(resource_version).into_iter().collect();
    ops.push(json!({"op": "replace", "path": "/revision", "value": revision}));
    to_patch(ops)
}

/// The merge patch setting `annotations`, on `resource_version` of the object when known
/// (a merge patch naming a resourceVersion is refused with 409 at any other).
pub fn annotate(annotations: &BTreeMap<String, String>, resource_version: Option<&str>) -> Value {
    let mut metadata = json!({"annotations": annotations});
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({"metadata": metadata})
}

/// Adds `finalizer`, guarded by a `test` of the list as read (as kube's finalizer helper
/// does), so a concurrent change makes the patch fail instead of clobbering the list.
pub fn finalizer_add(
    finalizers: Option<&Vec<String>>,
    finalizer: &str,
) -> Result<json_patch::Patch, serde_json::Error> {
    let ops = match finalizers {
        None => vec![
            json!({"op": "test", "path": "/metadata/finalizers", "value": null}),
            json!({"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}),
        ],
        Some(list) => vec![
            json!({"op": "test", "path": "/metadata/finalizers", "value": list}),
            json!({"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}),
        ],
    };
    to_patch(ops)
}

/// Removes `finalizer` at the index it was read at; None when it is not there.
pub fn finalizer_remove(
    finalizers: Option<&Vec<String>>,
    finalizer: &str,
) -> Result<Option<json_patch::Patch>, serde_json::Error> {
    let Some(i) = finalizers.and_then(|l| l.iter().position(|f| f == finalizer)) else {
        return Ok(None);
    };
    let path = format!("/metadata/finalizers/{i}");
    to_patch(vec![
        json!({"op": "test", "path": path, "value": finalizer}),
        json!({"op": "remove", "path": path}),
    ])
    .map(Some)
}

/// The JSON merge patch turning `old` into `new`: changed and added keys with their new
/// value (objects recursively), removed keys as `null`, arrays whole. None when equal.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            out.insert(k.clone(), d);
                        }
                    }
                    None => {
                        out.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Some(Value::Object(out))
        }
        // A merge patch cannot express "set to null" for a value; our status types never
        // hold nulls, so a replacement value is always concrete.
        _ => Some(new.clone()),
    }
}

/// The status merge patch, carrying the resourceVersion it was computed from.
pub fn status(old: &Value, new: &Value, resource_version: Option<&str>) -> Option<Value> {
    let diff = merge_diff(old, new)?;
    let mut patch = json!({ "status": diff });
    if let Some(rv) = resource_version {
        patch["metadata"] = json!({ "resourceVersion": rv });
    }
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(doc: &Value, p: &json_patch::Patch) -> Result<Value, json_patch::PatchError> {
        let mut d = doc.clone();
        json_patch::patch(&mut d, p)?;
        Ok(d)
    }

    #[test]
    fn escapes_pointer_segments() {
        assert_eq!(
            escape("work.open-cluster-management.io/x"),
            "work.open-cluster-management.io~1x"
        );
        assert_eq!(escape("a~b"), "a~0b");
    }

    #[test]
    fn work_update_creates_missing_maps_and_keeps_others() {
        let doc = json!({"metadata": {"name": "w", "resourceVersion": "5",
            "labels": {"keep": "me", "a/b": "old"}}, "spec": {"old": true}});
        let base = PatchBase {
            labels: serde_json::from_value(doc["metadata"]["labels"].clone()).unwrap(),
            annotations: None,
        };
        let labels = BTreeMap::from([("a/b".to_string(), "new".to_string())]);
        let ann = BTreeMap::from([("x/y".to_string(), "1".to_string())]);
        let p = work_update(&base, &json!({"new": 1}), (&labels, &[]), &ann, Some("5")).unwrap();
        let out = apply(&doc, &p).unwrap();
        assert_eq!(out["spec"], json!({"new": 1}));
        assert_eq!(
            out["metadata"]["labels"],
            json!({"keep": "me", "a/b": "new"})
        );
        assert_eq!(out["metadata"]["annotations"], json!({"x/y": "1"}));
    }

    /// Every change to an existing object names the version it was planned on, which the
    /// API server then compares (the hub test `preconditions.rs` shows the refusal).
    #[test]
    fn changes_carry_the_version_they_were_planned_on() {
        let guard = json!({"op": "replace", "path": "/metadata/resourceVersion", "value": "7"});
        let base = PatchBase {
            labels: None,
            annotations: None,
        };
        let labels = BTreeMap::from([("a/b".to_string(), "x".to_string())]);
        let none = BTreeMap::new();
        let relabelled = relabel(&base, (&labels, &[]), &none, Some("7"))
            .unwrap()
            .unwrap();
        let renumbered = renumber(4, Some("7")).unwrap();
        for p in [&relabelled, &renumbered] {
            assert_eq!(serde_json::to_value(p).unwrap()[0], guard, "{p:?}");
        }
        assert_eq!(
            annotate(&labels, Some("7"))["metadata"],
            json!({"annotations": {"a/b": "x"}, "resourceVersion": "7"})
        );
        // Unknown version (an object not read from the API): unguarded.
        assert_eq!(
            serde_json::to_value(renumber(4, None).unwrap()).unwrap(),
            json!([{"op": "replace", "path": "/revision", "value": 4}])
        );
        assert_eq!(
            annotate(&labels, None)["metadata"].get("resourceVersion"),
            None
        );
    }

    #[test]
    fn a_template_written_over_a_plugins_spec_drops_its_digest() {
        let digest = mwrs_api::labels::PLUGIN_SPEC_DIGEST;
        let doc = json!({"metadata": {"name": "w", "annotations": {digest: "abc", "keep": "me"}},
            "spec": {"mutated": true}});
        let base = PatchBase {
            labels: None,
            annotations: serde_json::from_value(doc["metadata"]["annotations"].clone()).unwrap(),
        };
        let none = BTreeMap::new();
        let p = work_update(&base, &json!({"template": 1}), (&none, &[]), &none, None).unwrap();
        let out = apply(&doc, &p).unwrap();
        assert_eq!(out["metadata"]["annotations"], json!({"keep": "me"}));
        // Another plugin spec: the digest is replaced, not dropped.
        let ann = BTreeMap::from([(digest.to_string(), "def".to_string())]);
        let p = work_update(&base, &json!({"mutated": 2}), (&none, &[]), &ann, None).unwrap();
        let out = apply(&doc, &p).unwrap();
        assert_eq!(out["metadata"]["annotations"][digest], "def");
    }

    #[test]
    fn finalizer_patches_are_guarded() {
        let f = "work.open-cluster-management.io/manifest-work-cleanup";
        // Absent list: `test null` (the API server accepts it for a missing path, as
        // kube's finalizer helper relies on; the json-patch crate does not), then add.
        let ops = serde_json::to_value(finalizer_add(None, f).unwrap()).unwrap();
        assert_eq!(
            ops[0],
            json!({"op": "test", "path": "/metadata/finalizers", "value": null})
        );
        assert_eq!(ops[1]["value"], json!([f]));
        // Another finalizer appeared since the read: the guard refuses.
        let raced = json!({"metadata": {"finalizers": ["other"]}});
        assert!(apply(&raced, &finalizer_add(None, f).unwrap()).is_err());
        let read = vec!["other".to_string()];
        let out = apply(&raced, &finalizer_add(Some(&read), f).unwrap()).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["other", f]));
        let list = vec!["other".to_string(), f.to_string()];
        let doc = json!({"metadata": {"finalizers": list}});
        let p = finalizer_remove(Some(&list), f).unwrap().unwrap();
        assert_eq!(
            apply(&doc, &p).unwrap()["metadata"]["finalizers"],
            json!(["other"])
        );
        assert!(finalizer_remove(Some(&vec![]), f).unwrap().is_none());
    }

    #[test]
    fn merge_diff_nulls_removed_fields() {
        let old = json!({"a": 1, "abortedTime": "t", "s": {"x": 1, "y": 2}, "l": [1]});
        let new = json!({"a": 1, "s": {"x": 1, "y": 3}, "l": [1, 2]});
        assert_eq!(
            merge_diff(&old, &new).unwrap(),
            json!({"abortedTime": null, "s": {"y": 3}, "l": [1, 2]})
        );
        assert!(merge_diff(&old, &old).is_none());
        let p = status(&old, &new, Some("7")).unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], "7");
    }
}
