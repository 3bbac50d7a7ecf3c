//! `disable-upstream`: turns upstream's MWRS controller off in the ClusterManager and
//! waits until it has stopped, before this controller is installed (both would write the
//! same ManifestWorks).
//!
//! The cluster-manager operator reads the first entry of a feature in
//! `spec.workConfiguration.featureGates` and ignores the rest, and the gate is off when no
//! entry names it. So only a first entry with `mode: Enable` is changed, in place, with a
//! JSON patch that first tests that the entry is still the one read: every other gate and
//! entry stays as it was (a merge patch would replace the whole list). Then it waits until
//! the operator's work-controller Deployment, and every pod of it, is gone or no longer
//! turns the gate on (the same Deployment also runs for `CleanUpCompletedManifestWork`).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::args::DisableUpstreamArgs;
use crate::error::{CliError, Exit, Result};
use crate::hub::{HubClient, parse_timeout};

/// The work feature gate of upstream's MWRS controller.
pub const GATE: &str = "ManifestWorkReplicaSet";
/// How often the work controller is looked for while waiting.
const POLL: Duration = Duration::from_secs(2);

/// What the ClusterManager's gate list asks of the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// No entry names the gate: off, its default.
    Unlisted,
    /// The first entry naming it, at `index` of the list, says `Disable` (or anything but
    /// `Enable`): off.
    Off { index: usize },
    /// The first entry naming it, at `index`, says `Enable`: on.
    On { index: usize },
}

/// The gate as `cluster_manager` (the object, as JSON) sets it.
pub fn gate(cluster_manager: &Value) -> Gate {
    let entries = cluster_manager
        .pointer("/spec/workConfiguration/featureGates")
        .and_then(Value::as_array);
    let first = entries.and_then(|list| {
        list.iter()
            .position(|e| e.get("feature").and_then(Value::as_str) == Some(GATE))
    });
    match first {
        None => Gate::Unlisted,
        Some(index) => {
            let mode = entries
                .and_then(|list| list[index].get("mode"))
                .and_then(Value::as_str);
            if mode == Some("Enable") {
                Gate::On { index }
            } else {
                Gate::Off { index }
            }
        }
    }
}

/// The JSON patch that turns the entry at `index` off, and fails if it no longer names
/// the gate as `Enable` (someone edited the list since it was read).
pub fn turn_off(index: usize) -> Value {
    let at = format!("/spec/workConfiguration/featureGates/{index}");
    json!([
        {"op": "test", "path": format!("{at}/feature"), "value": GATE},
        {"op": "test", "path": format!("{at}/mode"), "value": "Enable"},
        {"op": "replace", "path": format!("{at}/mode"), "value": "Disable"},
    ])
}

/// Whether a container of upstream's work controller runs the MWRS controller: its
/// `--feature-gates` turn the gate on.
pub fn runs_mwrs(containers: &[Container]) -> bool {
    let on = format!("{GATE}=true");
    containers.iter().any(|c| {
        c.args
            .iter()
            .chain(c.command.iter())
            .flatten()
            .filter_map(|a| a.strip_prefix("--feature-gates="))
            .any(|gates| gates.split(',').any(|g| g.trim() == on))
    })
}

pub async fn run(hub: &HubClient, a: &DisableUpstreamArgs) -> Result<Exit> {
    let timeout = parse_timeout(&a.timeout, "--timeout")?.unwrap_or(Duration::MAX);
    let api = cluster_managers(&hub.client);
    let name = a.cluster_manager.as_str();
    let cm = api
        .get(name)
        .await
        .map_err(|e| CliError::kube(&format!("clustermanager {name}"), e))?;
    let cm = serde_json::to_value(&cm).map_err(|e| CliError::error(e.to_string()))?;
    match gate(&cm) {
        Gate::Unlisted => println!(
            "clustermanager {name}: {GATE} is not listed in spec.workConfiguration.featureGates \
             (off by default); nothing changed"
        ),
        Gate::Off { index } => println!(
            "clustermanager {name}: featureGates[{index}] already turns {GATE} off; nothing changed"
        ),
        Gate::On { index } if a.dry_run => println!(
            "clustermanager {name}: would set featureGates[{index}] ({GATE}) to mode Disable"
        ),
        Gate::On { index } => {
            let patch: json_patch::Patch = serde_json::from_value(turn_off(index))
                .map_err(|e| CliError::error(e.to_string()))?;
            api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .map_err(|e| {
                    CliError::kube(
                        &format!("clustermanager {name} (featureGates[{index}] changed since read? run it again)"),
                        e,
                    )
                })?;
            println!("clustermanager {name}: featureGates[{index}] ({GATE}) set to mode Disable");
        }
    }
    if a.dry_run {
        return Ok(Exit::Ok);
    }
    wait_stopped(hub, a, timeout).await
}

/// The ClusterManagers of the hub (cluster-scoped), read as they come.
pub fn cluster_managers(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(
        "operator.open-cluster-management.io",
        "v1",
        "ClusterManager",
    );
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// Waits until no Deployment or pod of upstream's work controller runs the MWRS
/// controller.
async fn wait_stopped(hub: &HubClient, a: &DisableUpstreamArgs, timeout: Duration) -> Result<Exit> {
    let started = Instant::now();
    let deployment = format!("{}-work-controller", a.cluster_manager);
    loop {
        let running = still_running(hub, &a.hub_namespace, &deployment).await?;
        if running.is_empty() {
            println!(
                "upstream's {GATE} controller is stopped ({}/{deployment}: none runs it)",
                a.hub_namespace
            );
            return Ok(Exit::Ok);
        }
        if started.elapsed() >= timeout {
            return Err(CliError::new(
                Exit::Timeout,
                format!(
                    "upstream's {GATE} controller still runs after {}: {}. Is the \
                     cluster-manager operator running? Until it stops, do not start this \
                     controller",
                    a.timeout,
                    running.join(", ")
                ),
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What of upstream's work controller still runs the MWRS controller, by kind and name.
async fn still_running(hub: &HubClient, namespace: &str, deployment: &str) -> Result<Vec<String>> {
    let mut running = Vec::new();
    let deployments: Api<Deployment> = Api::namespaced(hub.client.clone(), namespace);
    let found = deployments
        .get_opt(deployment)
        .await
        .map_err(|e| CliError::kube(&format!("deployment {namespace}/{deployment}"), e))?;
    let template = found
        .as_ref()
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref());
    if template.is_some_and(|p| runs_mwrs(&p.containers)) {
        running.push(format!("deployment {deployment}"));
    }
    let pods: Api<Pod> = Api::namespaced(hub.client.clone(), namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("app={deployment}")))
        .await
        .map_err(|e| CliError::kube(&format!("pods app={deployment} in {namespace}"), e))?;
    for pod in listed.items {
        if pod.spec.as_ref().is_some_and(|p| runs_mwrs(&p.containers)) {
            running.push(format!("pod {}", pod.metadata.name.unwrap_or_default()));
        }
    }
    Ok(running)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(gates: Value) -> Value {
        json!({"spec": {"workConfiguration": {"featureGates": gates}}})
    }

    #[test]
    fn only_the_first_entry_of_the_gate_counts() {
        assert_eq!(gate(&json!({"spec": {}})), Gate::Unlisted);
        assert_eq!(
            gate(&cm(json!([{"feature": "Other", "mode": "Enable"}]))),
            Gate::Unlisted
        );
        let on_then_off = cm(json!([
            {"feature": "CleanUpCompletedManifestWork", "mode": "Enable"},
            {"feature": GATE, "mode": "Enable"},
            {"feature": GATE, "mode": "Disable"},
        ]));
        assert_eq!(gate(&on_then_off), Gate::On { index: 1 });
        let off_then_on =
            cm(json!([{"feature": GATE, "mode": "Disable"}, {"feature": GATE, "mode": "Enable"}]));
        assert_eq!(gate(&off_then_on), Gate::Off { index: 0 });
        assert_eq!(
            gate(&cm(json!([{"feature": GATE}]))),
            Gate::Off { index: 0 }
        );
    }

    #[test]
    fn the_patch_changes_one_mode_after_testing_it() {
        let mut doc = cm(json!([
            {"feature": "CleanUpCompletedManifestWork", "mode": "Enable"},
            {"feature": GATE, "mode": "Enable"},
        ]));
        let patch: json_patch::Patch = serde_json::from_value(turn_off(1)).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(
            doc,
            cm(json!([
                {"feature": "CleanUpCompletedManifestWork", "mode": "Enable"},
                {"feature": GATE, "mode": "Disable"},
            ]))
        );
        // Read before someone moved the entry: the patch fails, nothing changes.
        let mut moved =
            cm(json!([{"feature": GATE, "mode": "Enable"}, {"feature": "X", "mode": "Enable"}]));
        let before = moved.clone();
        assert!(json_patch::patch(&mut moved, &patch).is_err());
        assert_eq!(moved, before);
    }

    #[test]
    fn a_work_controller_runs_mwrs_only_with_its_gate_on() {
        let with = |args: &[&str]| Container {
            args: Some(args.iter().map(|a| a.to_string()).collect()),
            ..Container::default()
        };
        assert!(runs_mwrs(&[with(&[
            "/work",
            "manager",
            "--feature-gates=ManifestWorkReplicaSet=true"
        ])]));
        assert!(runs_mwrs(&[with(&[
            "--feature-gates=CleanUpCompletedManifestWork=true,ManifestWorkReplicaSet=true"
        ])]));
        assert!(!runs_mwrs(&[with(&[
            "/work",
            "manager",
            "--feature-gates=CleanUpCompletedManifestWork=true"
        ])]));
        assert!(!runs_mwrs(&[with(&[
            "--feature-gates=ManifestWorkReplicaSet=false"
        ])]));
    }
}
