//! The planner settings the CLI judges clusters with: the controller's own, read from the
//! arguments of its Deployment (`--controller`), so that `rollout status` and the
//! dashboard count as the controller does (its `--settle-time`, its upstream quirks);
//! the defaults, with the reason, when the Deployment cannot be read.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::Api;
use mwrs_engine::PlanConfig;

/// Where the controller runs, unless `--controller` says otherwise (the chart's default).
pub const DEFAULT_CONTROLLER: &str = "open-cluster-management-hub/mwrs-controller";

/// The settings, and where they come from in a line.
#[derive(Clone, Debug)]
pub struct Judging {
    pub plan: PlanConfig,
    pub said: String,
}

impl Default for Judging {
    fn default() -> Self {
        Self::defaults("no controller named")
    }
}

impl Judging {
    fn defaults(why: &str) -> Self {
        let plan = PlanConfig::default();
        let said = format!(
            "judged with the default settings ({}): {why}",
            plan.describe()
        );
        Self { plan, said }
    }

    /// The settings of a controller the caller runs itself (the demo's).
    pub fn in_process(plan: PlanConfig) -> Self {
        let said = format!(
            "judged with the settings of the controller in this process ({})",
            plan.describe()
        );
        Self { plan, said }
    }

    /// The settings of the controller Deployment `at` (`NAMESPACE/NAME`): its container
    /// named `controller`, else its first.
    pub async fn read(client: &Client, at: &str) -> Self {
        let Some((ns, name)) = at.split_once('/') else {
            return Self::defaults(&format!("--controller {at:?} is not NAMESPACE/NAME"));
        };
        let deployment = match Api::<Deployment>::namespaced(client.clone(), ns)
            .get(name)
            .await
        {
            Ok(d) => d,
            Err(e) => return Self::defaults(&format!("deployment {at} cannot be read: {e}")),
        };
        let containers = deployment
            .spec
            .and_then(|s| s.template.spec)
            .map(|p| p.containers)
            .unwrap_or_default();
        let container = containers
            .iter()
            .find(|c| c.name == "controller")
            .or_else(|| containers.first());
        let Some(container) = container else {
            return Self::defaults(&format!("deployment {at} has no container"));
        };
        let args = container.args.clone().unwrap_or_default();
        match PlanConfig::from_controller_args(&args) {
            Ok(plan) => {
                let said = format!(
                    "judged with the settings of deployment {at} ({})",
                    plan.describe()
                );
                Self { plan, said }
            }
            Err(e) => Self::defaults(&format!("deployment {at}: {e}")),
        }
    }
}
