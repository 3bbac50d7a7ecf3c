//! What the bare client writes beside a template: the labels and annotations the
//! controller gives a ManifestWork of an MWRS, under keys of the same length in a domain
//! no controller reads, and a field manager as long as the controller's. The bare
//! client's ManifestWorks are then the controller's size, as stored and as sent to every
//! watch, so that the reference makes the same writes, not smaller ones.
//!
//! Size matters on a hub without the watch cache for ManifestWorks (the ceiling runs):
//! each watch of them is its own etcd watch and decodes every event itself, a selector's
//! watch the object before the event too. At 9,000 ManifestWorks the controller's were
//! 3,854 bytes and the bare client's 3,149 (its template alone), and the hub spent 13%
//! more CPU per write on the controller's.

use std::hash::{DefaultHasher, Hash, Hasher};

use jiff::Timestamp;
use kube::api::{PatchParams, PostParams};
use mwrs_api::labels;
use serde_json::{Map, Value};

use crate::fleet_view::template;

/// The domain of upstream's keys, and the bench's own of the same length.
const UPSTREAM: &str = "work.open-cluster-management.io";
const MIRRORED: &str = "mwrs-bench.mirrors-the-hub.test";

/// As long as the controller's (`mwrs-controller`).
const FIELD_MANAGER: &str = "mwrs-bench-bare";

/// `key` of the controller's, in the bench's domain.
fn mirrored(key: &str) -> String {
    key.replacen(UPSTREAM, MIRRORED, 1)
}

/// Ten hex digits, as long as the controller's revision hash.
fn hash_of(version: &str) -> String {
    let mut h = DefaultHasher::new();
    version.hash(&mut h);
    format!("{:010x}", h.finish() & 0xff_ffff_ffff)
}

/// The metadata the controller gives the ManifestWork of MWRS `namespace/name` on the
/// revision of `version`, written `now`, mirrored: `{"labels": …, "annotations": …}`.
fn metadata(namespace: &str, name: &str, version: &str, now: Timestamp) -> Value {
    let map = |pairs: &[(&str, String)]| -> Value {
        pairs
            .iter()
            .map(|(k, v)| (mirrored(k), Value::String(v.clone())))
            .collect::<Map<_, _>>()
            .into()
    };
    let labels = map(&[
        (labels::CONTROLLER_HASH, hash_of(version)),
        (labels::MWRS_OWNER, format!("{namespace}.{name}")),
        (labels::PLACEMENT_NAME, "fleet".to_string()),
    ]);
    let annotations = map(&[
        (labels::MWRS_OWNER_ANNOTATION, format!("{namespace}/{name}")),
        (labels::REVISION_APPLIED_AT, now.to_string()),
    ]);
    serde_json::json!({"labels": labels, "annotations": annotations})
}

/// The bare client's ManifestWork `name` on `version`: the template, and the metadata the
/// controller gives the ManifestWork of MWRS `namespace/owner`, mirrored. Its create's
/// body and its update's (a merge patch) alike.
pub(crate) fn work(namespace: &str, owner: &str, name: &str, version: &str) -> Value {
    let mut metadata = metadata(namespace, owner, version, Timestamp::now());
    metadata["name"] = name.into();
    serde_json::json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": metadata, "spec": template(version),
    })
}

pub(crate) fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

pub(crate) fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_clients_metadata_is_the_controllers_size_and_never_its_keys() {
        assert_eq!(MIRRORED.len(), UPSTREAM.len());
        assert_eq!(FIELD_MANAGER.len(), "mwrs-controller".len());
        let now: Timestamp = "2026-12-07T04:04:00.061703254Z".parse().expect("a time");
        let m = metadata("bench-many", "bare-00", "b00-v4", now);
        let keys: Vec<&String> = ["labels", "annotations"]
            .iter()
            .filter_map(|k| m[k].as_object())
            .flat_map(|o| o.keys())
            .collect();
        assert_eq!(keys.len(), 5);
        for k in keys {
            assert!(k.starts_with(MIRRORED), "{k}");
            assert!(!labels::CONTROLLER_KEYS.contains(&k.as_str()), "{k}");
        }
        let hash = &m["labels"][mirrored(labels::CONTROLLER_HASH)];
        assert_eq!(hash.as_str().map(str::len), Some(10));
        assert_ne!(
            hash,
            &metadata("bench-many", "bare-00", "b00-v5", now)["labels"]
                [mirrored(labels::CONTROLLER_HASH)]
        );
        assert_eq!(
            m["annotations"][mirrored(labels::REVISION_APPLIED_AT)],
            "2026-12-07T04:04:00.061703254Z"
        );
    }
}
