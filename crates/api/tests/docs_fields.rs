//! The book's field reference (`docs/src/reference/fields.md`) is written from the CRD this
//! project ships (`deploy/crds/`), with upstream's CRD of the same api module to mark which
//! fields are this project's: the test fails when the checked-in page is stale, and
//! `MWRS_BLESS=1` rewrites it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;

use serde_json::Value;

mod common;

use common::{UPSTREAM_MODULE, upstream};

fn schema(crd: &Value) -> &Value {
    &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

/// The node at `path` (`spec.placementRefs[].name`) of a schema, if there is one.
fn node<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut n = root;
    for part in path.split('.') {
        let (name, items) = match part.strip_suffix("[]") {
            Some(p) => (p, true),
            None => (part, false),
        };
        n = n.get("properties")?.get(name)?;
        if items {
            n = n.get("items")?;
        }
    }
    Some(n)
}

/// One row per field under `path`, depth first, in the schema's order.
fn rows(n: &Value, path: &str, upstream: &Value, out: &mut String) {
    let Some(props) = n.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, field) in props {
        let is_list = field["type"] == "array";
        let child = format!("{path}.{name}{}", if is_list { "[]" } else { "" });
        let new = node(upstream, &child).is_none();
        let _ = writeln!(
            out,
            "| `{}`{} | {} | {} | {} |",
            child,
            if new { " **new**" } else { "" },
            kind(field),
            field
                .get("default")
                .map(|d| format!("`{d}`"))
                .unwrap_or_default(),
            text(field)
        );
        // A template is a whole ManifestWork spec: its own API documents it.
        if child == "spec.manifestWorkTemplate" {
            continue;
        }
        let inner = if is_list { &field["items"] } else { field };
        rows(inner, &child, upstream, out);
    }
}

fn kind(field: &Value) -> String {
    if field.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return "int or string".into();
    }
    let t = field["type"].as_str().unwrap_or("object");
    match (t, field["items"]["type"].as_str()) {
        ("array", Some(item)) => format!("array of {item}"),
        _ => match field["format"].as_str() {
            Some(f) => format!("{t} ({f})"),
            None => t.to_string(),
        },
    }
}

/// The description on one line, with the allowed values and bounds.
fn text(field: &Value) -> String {
    let mut s: String = field["description"]
        .as_str()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(values) = field["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.as_str().unwrap_or("")))
            .collect();
        let _ = write!(s, " One of {}.", values.join(", "));
    }
    if let Some(min) = field.get("minimum") {
        let _ = write!(s, " Minimum {min}.");
    }
    s.replace('|', "\\|").replace('<', "&lt;")
}

fn page(ours: &Value, upstream: &Value) -> String {
    let mut out = String::from(
        "# MWRS fields\n\n<!-- Generated from deploy/crds/ (crates/api/tests/docs_fields.rs); \
         `MWRS_BLESS=1 cargo test -p mwrs-api --test docs_fields` rewrites it. -->\n\n\
         `apiVersion: work.open-cluster-management.io/v1alpha1`, `kind: ManifestWorkReplicaSet`, \
         namespaced, short name `mwrs`. Fields marked **new** are this project's; the others \
         are upstream's (`open-cluster-management.io/api` v1.3.0), with upstream's words. \
         `spec.manifestWorkTemplate` is a whole ManifestWork spec (OCM's `work/v1` API), \
         copied into every cluster's ManifestWork. Where this controller departs from upstream's \
         words, [deviations from upstream](deviations.md) says so.\n",
    );
    for part in ["spec", "status"] {
        let _ = write!(
            out,
            "\n## {part}\n\n| field | type | default | meaning |\n|---|---|---|---|\n"
        );
        let n = node(schema(ours), part).expect("the CRD has the part");
        rows(n, part, schema(upstream), &mut out);
    }
    out
}

#[test]
fn the_field_reference_is_generated_from_the_crd() {
    let Some(upstream) = upstream(common::UPSTREAM_FILE) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "upstream CRD {UPSTREAM_MODULE} could not be fetched with `go mod download`"
        );
        eprintln!("SKIP: go or the module proxy is unavailable");
        return;
    };
    let ours: Value = serde_saphyr::from_str(common::OURS).unwrap();
    mwrs_testsupport::check_generated(
        "docs/src/reference/fields.md",
        &page(&ours, &upstream),
        "cargo test -p mwrs-api --test docs_fields",
    );
}
