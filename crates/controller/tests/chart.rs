//! The Helm chart (`deploy/helm/mwrs-controller`, issue #17) with Helm v4 built from its
//! Go module (`scripts/helm.sh`): `helm lint --strict` is clean; deploy/'s plain manifests
//! are the chart's render (`scripts/gen-deploy.sh --check`); the rendered CRD is deploy/'s
//! with the keep policy; and the chart installed on the test hub (server-side apply of
//! `helm template`) runs: the controller started with exactly the rendered container args
//! and env, authenticated as the rendered ServiceAccount, completes a rollout.
//!
//! Needs `MWRS_HELM` (the helm binary; `scripts/test.sh` builds it) and
//! `MWRS_TEST_KUBECONFIG`; skipped without them.

// run-tests: alone (changes cluster-wide objects of the shared test hub)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{create_app_for_all, helm, run_in_repo, start_agent_succeeding, wait_complete};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{self, Scope};
use mwrs_testsupport::{ChildProcess, TestHub};
use serde_json::{Value, json};

const CHART: &str = "deploy/helm/mwrs-controller";
const CRD: &str = include_str!(
    "../../../deploy/crds/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml"
);

/// The chart's copy of the CRD (Helm reads only files inside the chart).
const CHART_CRD: &str = include_str!("../../../deploy/helm/mwrs-controller/files/crd.yaml");

#[test]
fn the_charts_crd_is_deploys() {
    assert!(
        CHART_CRD == CRD,
        "deploy/helm/mwrs-controller/files/crd.yaml differs from deploy/crds/: run scripts/gen-crd.py"
    );
}

/// The documents of a render, without the empty ones.
fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn find<'d>(docs: &'d [Value], kind: &str) -> &'d Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

#[test]
fn the_chart_lints_clean_and_deploy_is_its_render() {
    let Ok(helm_bin) = std::env::var("MWRS_HELM") else {
        eprintln!("MWRS_HELM not set (scripts/helm.sh): skipped");
        return;
    };
    helm(&helm_bin, &["lint", "--strict", CHART]);
    run_in_repo(
        Command::new("scripts/gen-deploy.sh")
            .arg("--check")
            .env("MWRS_HELM", &helm_bin),
    );

    // The CRD is deploy/crds/'s, kept on uninstall, still guarded from upstream's operator.
    let docs = documents(&helm(
        &helm_bin,
        &[
            "template",
            "mwrs",
            CHART,
            "--show-only",
            "templates/crd.yaml",
        ],
    ));
    let rendered = find(&docs, "CustomResourceDefinition");
    let shipped: Value = serde_saphyr::from_str(CRD).unwrap();
    assert_eq!(rendered["spec"], shipped["spec"]);
    let annotations = &rendered["metadata"]["annotations"];
    assert_eq!(annotations["helm.sh/resource-policy"], "keep");
    assert_eq!(
        annotations["operator.open-cluster-management.io/version"],
        shipped["metadata"]["annotations"]["operator.open-cluster-management.io/version"]
    );
    let off = helm(
        &helm_bin,
        &["template", "mwrs", CHART, "--set", "crds.install=false"],
    );
    assert!(!off.contains("kind: CustomResourceDefinition"), "{off}");

    // The optional ServiceMonitor scrapes the metrics port over TLS with a token, and
    // selects the Service's pods.
    let docs = documents(&helm(
        &helm_bin,
        &[
            "template",
            "mwrs",
            CHART,
            "--set",
            "metrics.serviceMonitor.enabled=true",
        ],
    ));
    let monitor = find(&docs, "ServiceMonitor");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], "https-metrics");
    assert_eq!(endpoint["scheme"], "https");
    assert!(endpoint["bearerTokenFile"].is_string(), "{monitor}");
    let service = find(&docs, "Service");
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        service["spec"]["selector"]
    );
    assert_eq!(service["spec"]["ports"][0]["name"], "https-metrics");
}

/// `controller.plugins` becomes a ConfigMap the controller's own parser accepts, mounted
/// where the rendered `--work-config` points.
#[test]
fn the_charts_plugins_are_a_work_config_the_controller_reads() {
    let Ok(helm_bin) = std::env::var("MWRS_HELM") else {
        eprintln!("MWRS_HELM not set (scripts/helm.sh): skipped");
        return;
    };
    let bundle = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
    let ca = format!("controller.plugins[0].caCertificate.caBundle={bundle}");
    let docs = with_a_plugin(&helm_bin, &["--set", &ca]);
    let config = find(&docs, "ConfigMap");
    let text = config["data"]["config.yaml"].as_str().unwrap();
    let parsed = mwrs_plugin::config::WorkConfig::parse(text).unwrap();
    assert_eq!(parsed.plugins[0].name, "smoke-tests");
    let deployment = find(&docs, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let path = args
        .iter()
        .find_map(|a| a.strip_prefix("--work-config="))
        .expect("--work-config");
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "work-config")
        .expect("the mount");
    let dir = mount["mountPath"].as_str().unwrap();
    assert_eq!(path, format!("{dir}/config.yaml"));
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "work-config")
        .expect("the volume");
    assert_eq!(volume["configMap"]["name"], config["metadata"]["name"]);
    // The client certificate's Secret, mounted where a plugin entry names its files.
    let with_client = with_a_plugin(
        &helm_bin,
        &["--set", "controller.pluginClientCertSecret=plugin-client"],
    );
    let spec = &find(&with_client, "Deployment")["spec"]["template"]["spec"];
    let mounted = spec["containers"][0]["volumeMounts"].to_string();
    assert!(mounted.contains("/etc/mwrs/plugin-client"), "{mounted}");
    assert!(
        spec["volumes"]
            .to_string()
            .contains("\"secretName\":\"plugin-client\"")
    );
    // The mark key's Secret, which the controller may read and make (rules §12.2).
    assert!(
        args.contains(&"--mark-key-secret=mwrs-mwrs-controller-marks"),
        "{args:?}"
    );
    let roles: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Role").collect();
    let marks = roles
        .iter()
        .find(|r| r["metadata"]["name"] == "mwrs-mwrs-controller-marks")
        .expect("the marks Role");
    assert_eq!(
        marks["rules"],
        json!([{"apiGroups": [""], "resources": ["secrets"],
                "resourceNames": ["mwrs-mwrs-controller-marks"], "verbs": ["get"]}]),
        "that one Secret, read only: no create of Secrets (security review K1)"
    );
    let key = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == "mwrs-mwrs-controller-marks")
        .expect("the chart makes the key's Secret");
    assert_eq!(key["type"], "Opaque");
    assert_eq!(
        key["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert_eq!(
        key["metadata"]["labels"]["mwrs.rollout.open-cluster-management.io/mark-key"],
        "true"
    );
    assert!(key["data"]["key"].as_str().is_some_and(|k| k.len() >= 44));
    let named = with_a_plugin(&helm_bin, &["--set", "controller.markKeySecret=own-key"]);
    assert!(
        named.iter().all(|d| d["kind"] != "Secret"),
        "a named one is not made"
    );
    let args =
        find(&named, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(args.contains("--mark-key-secret=own-key"), "{args}");
    let without = documents(&helm(&helm_bin, &["template", "mwrs", CHART]));
    assert!(
        without.iter().all(|d| d["kind"] != "ConfigMap"),
        "no plugins, no work config"
    );
    let args = find(&without, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        .to_string();
    assert!(!args.contains("--work-config"), "{args}");
}

/// Two replicas without leader election would both write: the chart refuses them, and
/// one replica is replaced, never rolled, so that two never run at once (rules §12.4).
#[test]
fn the_chart_refuses_replicas_without_leader_election() {
    let Ok(helm_bin) = std::env::var("MWRS_HELM") else {
        eprintln!("MWRS_HELM not set (scripts/helm.sh): skipped");
        return;
    };
    let off = [
        "template",
        "mwrs",
        CHART,
        "--set",
        "leaderElection.enabled=false",
    ];
    let out = Command::new(&helm_bin)
        .args(off)
        .current_dir(common::repo_root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "rendered two unfenced replicas");
    assert!(stderr.contains("needs replicaCount: 1"), "{stderr}");
    let one = [&off[..], &["--set", "replicaCount=1"]].concat();
    let docs = documents(&helm(&helm_bin, &one));
    let deployment = find(&docs, "Deployment");
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    let on = documents(&helm(&helm_bin, &["template", "mwrs", CHART]));
    assert!(find(&on, "Deployment")["spec"].get("strategy").is_none());
}

/// The chart rendered as release `mwrs` with one plugin, `smoke-tests`, and `extra`
/// arguments.
fn with_a_plugin(helm_bin: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "template",
        "mwrs",
        CHART,
        "--set",
        "controller.plugins[0].name=smoke-tests",
        "--set",
        "controller.plugins[0].endpoint=smoke.mwrs-system.svc:10843",
    ];
    args.extend_from_slice(extra);
    documents(&helm(helm_bin, &args))
}

/// Applies `doc` to the hub with server-side apply.
async fn apply(client: &kube::Client, doc: &Value) {
    let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
    let gvk = obj.types.as_ref().unwrap().try_into().unwrap();
    let (resource, caps) = discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj.metadata.namespace.as_deref().unwrap(),
            &resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let name = obj.metadata.name.clone().unwrap();
    api.patch(
        &name,
        &PatchParams::apply("helm-render").force(),
        &Patch::Apply(&obj),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {} {name}: {e}", gvk.kind));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendered_chart_runs_a_rollout() {
    let Ok(helm_bin) = std::env::var("MWRS_HELM") else {
        eprintln!("MWRS_HELM not set (scripts/helm.sh): skipped");
        return;
    };
    let Some(hub) = TestHub::from_env("chart", 3).await else {
        return;
    };
    let ns = hub.namespace.as_str();
    // The release lives in the test's namespace and handles only its MWRS (other tests
    // share the hub); the CRD is the hub's already.
    let release = format!("r-{ns}");
    let port = common::free_port().to_string();
    let docs = documents(&helm(
        &helm_bin,
        &[
            "template",
            &release,
            CHART,
            "--namespace",
            ns,
            "--set",
            "crds.install=false",
            "--set",
            &format!("controller.watchNamespace={ns}"),
            "--set",
            &format!("metrics.port={port}"),
        ],
    ));
    // Hooks (the `helm test` pod) are Helm's to create, on `helm test` only.
    let (hooks, docs): (Vec<Value>, Vec<Value>) = docs
        .into_iter()
        .partition(|d| d["metadata"]["annotations"]["helm.sh/hook"].is_string());
    for doc in &docs {
        apply(&hub.client, doc).await;
    }

    let deployment = find(&docs, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(container["livenessProbe"]["httpGet"].is_object());
    assert_eq!(deployment["spec"]["replicas"], 2);
    let (args, mut env) = common::container_args_env(container);
    assert!(args.contains(&"--leader-elect".to_string()), "{args:?}");

    // What the kubelet would run, out of a cluster: the rendered args and env, the
    // ServiceAccount's token in place of the in-cluster config.
    let sa = pod["serviceAccountName"].as_str().unwrap();
    let kubeconfig = hub.service_account_kubeconfig(sa).await.unwrap();
    let kubeconfig = kubeconfig.to_string_lossy().to_string();
    let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
    argv.extend(["--kubeconfig", &kubeconfig]);
    env.push(("HOSTNAME".into(), format!("{release}-pod")));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (&**k, &**v)).collect();
    let binary = Path::new(env!("CARGO_BIN_EXE_mwrs-controller"));
    let _controller = ChildProcess::spawn(binary, &argv, &env).expect("start the controller");

    let _agent = start_agent_succeeding(&hub, std::time::Duration::from_millis(100));
    create_app_for_all(&hub).await;
    wait_complete(&hub, "app", None).await;

    // `helm test`: its pod's command, the Service's name standing for this process.
    let test_pod = hooks
        .iter()
        .find(|d| d["metadata"]["annotations"]["helm.sh/hook"] == "test")
        .expect("a helm test pod");
    assert_eq!(test_pod["spec"]["automountServiceAccountToken"], false);
    let (probe_args, _) = common::container_args_env(&test_pod["spec"]["containers"][0]);
    let service = format!("{release}-mwrs-controller-metrics.{ns}.svc");
    let here: Vec<String> = probe_args
        .iter()
        .map(|a| a.replace(&service, "127.0.0.1"))
        .collect();
    assert_ne!(
        here, probe_args,
        "the probe names the metrics Service: {probe_args:?}"
    );
    let probe = |args: &[String]| {
        Command::new(binary)
            .args(args)
            .output()
            .expect("run the probe")
    };
    let answered = probe(&here);
    assert!(answered.status.success(), "{answered:?}");
    let closed = format!("127.0.0.1:{}", common::free_port());
    let nobody: Vec<String> = here
        .iter()
        .map(|a| a.replace(&format!("127.0.0.1:{port}"), &closed))
        .collect();
    let refused = probe(&nobody);
    assert!(!refused.status.success(), "{refused:?}");
}
