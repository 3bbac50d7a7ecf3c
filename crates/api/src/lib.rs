//! Wire types of Open Cluster Management's ManifestWorkReplicaSet (MWRS) and the
//! objects around it, kept wire-compatible with upstream's Go types.
//!
//! Rules every type here follows, because the hub (not this crate) owns the schema:
//! - fields the CRD defaults are `Option` (or `#[serde(default)]`), so an object that
//!   lacks them still deserializes;
//! - absent stays absent: nothing is serialized as `null` and no default is written back;
//! - embedded manifests and ManifestWork templates are kept as raw JSON, so what the API
//!   server returned is exactly what is copied, compared and hashed.

pub mod cluster;
pub mod labels;
pub mod mwrs;
pub mod placement;
pub mod rollout;
pub mod work;

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
