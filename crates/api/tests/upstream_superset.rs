//! Our MWRS CRD must accept everything upstream's accepts: every field path of upstream's
//! schema (open-cluster-management.io/api v1.3.0, fetched from the Go module proxy) exists
//! in ours with the same type, the same defaults and no tighter validation. And its
//! template schema must hold every field of upstream's ManifestWork spec: a template field
//! our schema lacks is pruned by the API server, silently (issue #32).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::{OURS, UPSTREAM_FILE, UPSTREAM_MODULE, UPSTREAM_WORK_FILE};
use serde_json::Value;

/// Skips (outside CI) when upstream's file cannot be had.
fn or_skip(v: Option<Value>) -> Option<Value> {
    if v.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "upstream CRD {UPSTREAM_MODULE} could not be fetched with `go mod download`"
        );
        eprintln!("SKIP: go or the module proxy is unavailable; upstream CRD not checked");
    }
    v
}

fn schema(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

/// path → the schema node, for every node reachable through properties/items.
fn nodes<'a>(s: &'a Value, path: String, out: &mut BTreeMap<String, &'a Value>) {
    out.insert(path.clone(), s);
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            nodes(v, format!("{path}.{k}"), out);
        }
    }
    if let Some(items) = s.get("items") {
        nodes(items, format!("{path}[]"), out);
    }
}

/// Keywords whose value must be identical (type and shape of the data).
const SAME: &[&str] = &[
    "type",
    "format",
    "default",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "required",
];

/// Every path of `theirs` missing from `mine`, or whose type differs.
fn not_held(theirs: &BTreeMap<String, &Value>, mine: &BTreeMap<String, &Value>) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, t) in theirs {
        match mine.get(path) {
            None => problems.push(format!("{path}: missing")),
            Some(m) if t.get("type") != m.get("type") => problems.push(format!(
                "{path}: type differs ({:?} vs {:?})",
                t.get("type"),
                m.get("type")
            )),
            Some(_) => {}
        }
    }
    problems
}

#[test]
fn our_template_schema_holds_every_field_of_upstreams_manifestwork_spec() {
    let Some(up) = or_skip(common::upstream(UPSTREAM_WORK_FILE)) else {
        return;
    };
    let ours: Value = serde_saphyr::from_str(OURS).unwrap();
    let (mut theirs, mut mine) = (BTreeMap::new(), BTreeMap::new());
    nodes(
        &schema(&up)["properties"]["spec"],
        String::new(),
        &mut theirs,
    );
    let template = &schema(&ours)["properties"]["spec"]["properties"]["manifestWorkTemplate"];
    nodes(template, String::new(), &mut mine);
    let problems = not_held(&theirs, &mine);
    assert!(
        problems.is_empty(),
        "spec.manifestWorkTemplate lacks fields of upstream's ManifestWork spec (run \
         scripts/gen-crd.py against the newer api module):\n{}",
        problems.join("\n")
    );
    assert!(
        theirs.len() > 20,
        "read upstream's schema: {} paths",
        theirs.len()
    );
}

#[test]
fn a_template_schema_missing_a_field_is_caught() {
    let theirs_schema = serde_json::json!({"properties": {"workload": {"type": "object"},
        "executor": {"type": "object", "properties": {"subject": {"type": "object"}}}}});
    let mine_schema = serde_json::json!({"properties": {"workload": {"type": "object"},
        "executor": {"type": "object"}}});
    let (mut theirs, mut mine) = (BTreeMap::new(), BTreeMap::new());
    nodes(&theirs_schema, String::new(), &mut theirs);
    nodes(&mine_schema, String::new(), &mut mine);
    assert_eq!(not_held(&theirs, &mine), [".executor.subject: missing"]);
}

#[test]
fn our_crd_is_a_superset_of_upstreams() {
    let Some(up) = or_skip(common::upstream(UPSTREAM_FILE)) else {
        return;
    };
    let ours: Value = serde_saphyr::from_str(OURS).unwrap();
    assert_eq!(up["spec"]["group"], ours["spec"]["group"]);
    assert_eq!(up["spec"]["names"], ours["spec"]["names"]);
    assert_eq!(up["spec"]["scope"], ours["spec"]["scope"]);
    assert_eq!(
        up["spec"]["versions"][0]["subresources"],
        ours["spec"]["versions"][0]["subresources"]
    );
    let (mut theirs, mut mine) = (BTreeMap::new(), BTreeMap::new());
    nodes(schema(&up), String::new(), &mut theirs);
    nodes(schema(&ours), String::new(), &mut mine);
    let mut problems = Vec::new();
    for (path, t) in &theirs {
        let Some(m) = mine.get(path) else {
            problems.push(format!("{path}: missing"));
            continue;
        };
        for k in SAME {
            if t.get(k) != m.get(k) {
                problems.push(format!(
                    "{path}: {k} differs ({:?} vs {:?})",
                    t.get(k),
                    m.get(k)
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "not a superset:\n{}",
        problems.join("\n")
    );
    assert!(mine.len() > theirs.len(), "ours adds fields");
}
