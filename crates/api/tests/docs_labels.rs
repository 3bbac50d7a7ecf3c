//! The book's label and annotation reference (`docs/src/reference/labels.md`) is written
//! from `crates/api/src/labels.rs`, where every key the project reads or writes is defined
//! with its doc comment: the test fails when the checked-in page is stale, and
//! `MWRS_BLESS=1` rewrites it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

const SOURCE: &str = include_str!("../src/labels.rs");

/// (constant, key, doc) for every `pub const NAME: &str = "key";` of the file, with the
/// doc comment above it (a run of constants shares the comment above the first).
fn keys() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut doc: Vec<String> = Vec::new();
    let mut shared = String::new();
    let mut pending: Option<String> = None;
    for line in SOURCE.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.trim().to_string());
            continue;
        }
        let text = match pending.take() {
            Some(head) => format!("{head} {line}"),
            None => line.to_string(),
        };
        if let Some(rest) = text.strip_prefix("pub const ") {
            let Some((name, value)) = rest.split_once(": &str =") else {
                doc.clear();
                continue;
            };
            let value = value.trim();
            if value.is_empty() {
                pending = Some(text);
                continue;
            }
            if !doc.is_empty() {
                shared = doc.join(" ");
            }
            let key = value.trim_end_matches(';').trim().trim_matches('"');
            out.push((name.trim().to_string(), key.to_string(), shared.clone()));
            doc.clear();
        } else if !line.is_empty() {
            doc.clear();
            shared.clear();
        }
    }
    out
}

fn page() -> String {
    let mut out = String::from(
        "# Labels, annotations and finalizers\n\n<!-- Generated from crates/api/src/labels.rs \
         (crates/api/tests/docs_labels.rs); `MWRS_BLESS=1 cargo test -p mwrs-api --test \
         docs_labels` rewrites it. -->\n\nEvery key this project reads or writes, with what \
         the code says of it. Keys under `work.open-cluster-management.io` and \
         `cluster.open-cluster-management.io` are upstream's or proposed upstream; keys under \
         `mwrs.rollout.open-cluster-management.io` are this project's.\n\n\
         | key | constant | meaning |\n|---|---|---|\n",
    );
    for (name, key, doc) in keys() {
        let doc = doc.replace('|', "\\|");
        out.push_str(&format!("| `{key}` | `{name}` | {doc} |\n"));
    }
    out
}

#[test]
fn the_label_reference_is_generated_from_the_keys() {
    let want = page();
    assert!(want.matches("\n| `").count() >= 20, "{want}");
    mwrs_testsupport::check_generated(
        "docs/src/reference/labels.md",
        &want,
        "cargo test -p mwrs-api --test docs_labels",
    );
}
