//! Status feedback as upstream's work agent reports it for a Deployment under a
//! `WellKnownStatus` feedback rule: `ReadyReplicas`, `Replicas` and `AvailableReplicas`
//! in `status.resourceStatus.manifests[].statusFeedback.values`. A simulated cluster has
//! no Deployment controller, so the values follow the ManifestWork's conditions: every
//! replica ready once the work is done (Available, not Progressing, not Degraded), none
//! before. A `JSONPaths` rule on `.status.updatedReplicas` is answered the same way, under
//! the rule's name.

use mwrs_api::work::condition;
use serde_json::{Value, json};

/// A Deployment of the workload that a feedback rule asks about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracked {
    namespace: String,
    name: String,
    ordinal: usize,
    replicas: i64,
    /// No replica ever gets ready ([`never_ready`]).
    unready: bool,
    /// The name of a `JSONPaths` rule reading `.status.updatedReplicas`, if one does.
    updated_as: Option<String>,
}

/// The `tracked` Deployments never get a ready replica, whatever the conditions say.
pub fn never_ready(tracked: &mut [Tracked]) {
    for t in tracked {
        t.unready = true;
    }
}

/// The Deployments of `spec` (a ManifestWork spec) that a `manifestConfigs[]` entry
/// gives feedback rules.
pub fn tracked(spec: &Value) -> Vec<Tracked> {
    let none = Vec::new();
    let configs = spec["manifestConfigs"].as_array().unwrap_or(&none);
    let rules_of = |namespace: &str, name: &str| {
        configs.iter().find_map(|c| {
            let id = &c["resourceIdentifier"];
            let rules = c["feedbackRules"].as_array().filter(|r| !r.is_empty())?;
            (id["group"] == "apps"
                && id["resource"] == "deployments"
                && id["name"] == name
                && id["namespace"] == namespace)
                .then_some(rules)
        })
    };
    let updated_as = |rules: &Vec<Value>| {
        rules
            .iter()
            .filter(|r| r["type"] == "JSONPaths")
            .flat_map(|r| r["jsonPaths"].as_array().into_iter().flatten())
            .find(|p| p["path"] == ".status.updatedReplicas")
            .and_then(|p| p["name"].as_str())
            .map(str::to_string)
    };
    spec["workload"]["manifests"]
        .as_array()
        .unwrap_or(&none)
        .iter()
        .enumerate()
        .filter(|(_, m)| m["kind"] == "Deployment" && m["apiVersion"] == "apps/v1")
        .filter_map(|(ordinal, m)| {
            let namespace = m["metadata"]["namespace"].as_str().unwrap_or("default");
            let name = m["metadata"]["name"].as_str()?;
            let rules = rules_of(namespace, name)?;
            Some(Tracked {
                namespace: namespace.to_string(),
                name: name.to_string(),
                ordinal,
                replicas: m["spec"]["replicas"].as_i64().unwrap_or(1),
                unready: false,
                updated_as: updated_as(rules),
            })
        })
        .collect()
}

/// `status.resourceStatus` reporting `tracked` under `conditions` (None: nothing tracked).
pub fn resource_status(
    tracked: &[Tracked],
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<Value> {
    if tracked.is_empty() {
        return None;
    }
    let is = |type_: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    let done = is(condition::AVAILABLE) && !is(condition::PROGRESSING) && !is(condition::DEGRADED);
    let manifests: Vec<Value> = tracked
        .iter()
        .map(|t| {
            let ready = if done && !t.unready { t.replicas } else { 0 };
            json!({
                "resourceMeta": {
                    "ordinal": t.ordinal, "group": "apps", "version": "v1",
                    "kind": "Deployment", "resource": "deployments",
                    "name": t.name, "namespace": t.namespace,
                },
                "statusFeedback": {"values": values(t, ready)},
                "conditions": [],
            })
        })
        .collect();
    Some(json!({"manifests": manifests}))
}

/// The feedback values of `t` with `ready` replicas ready (and updated).
fn values(t: &Tracked, ready: i64) -> Vec<Value> {
    let value =
        |name: &str, n: i64| json!({"name": name, "fieldValue": {"type": "Integer", "integer": n}});
    let mut v = vec![
        value("ReadyReplicas", ready),
        value("Replicas", t.replicas),
        value("AvailableReplicas", ready),
    ];
    v.extend(t.updated_as.as_deref().map(|name| value(name, ready)));
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn spec() -> Value {
        json!({
            "workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "web"}},
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "web", "namespace": "web"}, "spec": {"replicas": 3}},
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "untracked", "namespace": "web"}},
            ]},
            "manifestConfigs": [{
                "resourceIdentifier": {"group": "apps", "resource": "deployments",
                    "name": "web", "namespace": "web"},
                "feedbackRules": [{"type": "WellKnownStatus"}],
            }],
        })
    }

    fn cond(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: String::new(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn only_deployments_under_a_feedback_rule_are_reported() {
        let t = tracked(&spec());
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].name.as_str(), t[0].ordinal, t[0].replicas),
            ("web", 1, 3)
        );
        assert!(tracked(&json!({"workload": {"manifests": []}})).is_empty());
    }

    #[test]
    fn replicas_are_ready_once_the_work_is_done() {
        let t = tracked(&spec());
        let ready = |conditions: &[Condition]| {
            let s = resource_status(&t, conditions).unwrap();
            s["manifests"][0]["statusFeedback"]["values"][0]["fieldValue"]["integer"]
                .as_i64()
                .unwrap()
        };
        let progressing = [cond("Available", "True"), cond("Progressing", "True")];
        let done = [
            cond("Available", "True"),
            cond("Progressing", "False"),
            cond("Degraded", "False"),
        ];
        let degraded = [cond("Available", "True"), cond("Degraded", "True")];
        assert_eq!(ready(&progressing), 0);
        assert_eq!(ready(&done), 3);
        assert_eq!(ready(&degraded), 0);
        assert_eq!(resource_status(&[], &done), None);
        let mut broken = t.clone();
        never_ready(&mut broken);
        let s = resource_status(&broken, &done).unwrap();
        let values = &s["manifests"][0]["statusFeedback"]["values"];
        assert_eq!(values[0]["fieldValue"]["integer"], 0, "ReadyReplicas");
        assert_eq!(values[1]["fieldValue"]["integer"], 3, "Replicas");
    }

    #[test]
    fn a_json_paths_rule_on_updated_replicas_is_answered_under_its_name() {
        let mut spec = spec();
        spec["manifestConfigs"][0]["feedbackRules"] = json!([{"type": "WellKnownStatus"},
            {"type": "JSONPaths", "jsonPaths": [{"name": "UpdatedReplicas", "path": ".status.updatedReplicas"}]}]);
        let t = tracked(&spec);
        let done = [cond("Available", "True")];
        let s = resource_status(&t, &done).unwrap();
        let values = s["manifests"][0]["statusFeedback"]["values"]
            .as_array()
            .unwrap();
        let updated = values
            .iter()
            .find(|v| v["name"] == "UpdatedReplicas")
            .unwrap();
        assert_eq!(updated["fieldValue"]["integer"], 3);
        let plain = resource_status(&tracked(&super::tests::spec()), &done).unwrap();
        assert_eq!(
            plain["manifests"][0]["statusFeedback"]["values"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }
}
