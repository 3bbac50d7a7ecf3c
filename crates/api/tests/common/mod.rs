//! What the api crate's tests share: our CRD as shipped, and upstream's files from the
//! `open-cluster-management.io/api` Go module (the newest the proxy serves).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

pub const OURS: &str = include_str!(
    "../../../../deploy/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
);
pub const UPSTREAM_MODULE: &str = "open-cluster-management.io/api@v1.3.0";
/// Upstream's MWRS CRD in that module.
pub const UPSTREAM_FILE: &str =
    "work/v1alpha1/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml";
/// Upstream's ManifestWork CRD in that module.
pub const UPSTREAM_WORK_FILE: &str =
    "work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml";

/// `file` of upstream's api module from the Go module cache (downloading it if needed),
/// parsed. None when Go or the proxy is unavailable: that fails the test in CI.
pub fn upstream(file: &str) -> Option<Value> {
    let out = Command::new("go")
        .args(["mod", "download", "-json", UPSTREAM_MODULE])
        .output()
        .ok()?;
    let info: Value = serde_json::from_slice(&out.stdout).ok()?;
    let dir = PathBuf::from(info["Dir"].as_str()?);
    let text = std::fs::read_to_string(dir.join(file)).ok()?;
    serde_saphyr::from_str(&text).ok()
}
