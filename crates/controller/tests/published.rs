//! The published release installed as a user would, with nothing built (issue #51): on a
//! private test hub where OCM's operator has put upstream's MWRS CRD in place,
//! `helm install oci://REGISTRY/charts/mwrs-controller` from the registry
//! `scripts/publish.sh` pushed to; then the controller's image pulled from that registry
//! (its linux/amd64 image, by the digest the index names) and its binary run the way the
//! chart's pod spec runs it: the rendered args and env, its numeric user, every capability
//! dropped, no new privileges, a read-only root, and no kubeconfig, only the
//! ServiceAccount's token, CA and namespace at the in-cluster path with
//! `KUBERNETES_SERVICE_HOST`/`PORT`. It turns ready, rolls a template out, and exits 0 on
//! SIGTERM.
//!
//! Needs `MWRS_REGISTRY` (a registry holding the release: `scripts/release-check.sh` starts
//! one and publishes to it), `MWRS_CRANE`, `MWRS_HELM` and `MWRS_TEST_KUBECONFIG`; the run
//! as the pod spec needs root (a mount namespace of its own, then the pod's user), and is
//! skipped, saying so, without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::operator::operators_crd_in_place;
use common::{
    container_args_env, create_app_for_all, helm, run_program as run, start_agent_succeeding,
    wait_complete,
};
use kube::config::Kubeconfig;
use mwrs_testsupport::{ChildProcess, PrivateHub, TestHub, wait_for};
use serde_json::Value;

/// Where a pod finds its ServiceAccount.
const IN_CLUSTER: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The image's config and its binary, pulled from `image` for linux/amd64 into `dir`.
fn pull(crane: &str, image: &str, dir: &Path) -> (Value, PathBuf) {
    let platform = ["--insecure", "--platform", "linux/amd64"];
    let config: Value =
        serde_json::from_str(&run(crane, &[&platform[..], &["config", image]].concat())).unwrap();
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    let tar = dir.join("rootfs.tar");
    run(
        crane,
        &[&platform[..], &["export", image, &tar.to_string_lossy()]].concat(),
    );
    run(
        "tar",
        &[
            "-xf",
            &tar.to_string_lossy(),
            "-C",
            &rootfs.to_string_lossy(),
        ],
    );
    let entry = config["config"]["Entrypoint"][0]
        .as_str()
        .unwrap()
        .to_string();
    (config, rootfs.join(entry.trim_start_matches('/')))
}

/// The Deployment of the release's manifest.
fn deployment(helm_bin: &str, release: &str, ns: &str, kubeconfig: &str) -> Value {
    let manifest = helm(
        helm_bin,
        &[
            "get",
            "manifest",
            release,
            "-n",
            ns,
            "--kubeconfig",
            kubeconfig,
        ],
    );
    serde_saphyr::from_multiple::<Value>(&manifest)
        .unwrap()
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the release has a Deployment")
}

/// The ServiceAccount's files as the kubelet mounts them, in `dir`.
async fn service_account_files(hub: &TestHub, sa: &str, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let token = hub.service_account_token(sa).await.unwrap();
    let kc = Kubeconfig::read_from(&hub.kubeconfig).unwrap();
    let cluster = kc.clusters[0].cluster.as_ref().unwrap();
    let ca = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap()
        }
        (None, Some(path)) => std::fs::read(path).unwrap(),
        (None, None) => panic!("the hub's kubeconfig names no CA"),
    };
    std::fs::write(dir.join("token"), token).unwrap();
    std::fs::write(dir.join("ca.crt"), ca).unwrap();
    std::fs::write(dir.join("namespace"), &hub.namespace).unwrap();
    // The pod's user reads them, as the kubelet's projected volume lets it.
    run("chmod", &["-R", "a+rX", &dir.to_string_lossy()]);
}

/// The API server's host and port, as a pod's environment names the Service.
fn api_server(hub: &TestHub) -> (String, String) {
    let kc = Kubeconfig::read_from(&hub.kubeconfig).unwrap();
    let server = kc.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .server
        .clone()
        .unwrap();
    let hostport = server.trim_start_matches("https://").trim_end_matches('/');
    let (host, port) = hostport.rsplit_once(':').unwrap();
    (host.to_string(), port.to_string())
}

/// Starts `binary` with `args` and `env` as the pod spec says: a private mount namespace
/// whose root is read-only and where the ServiceAccount's files are at the in-cluster
/// path, then the pod's user and group with no capability and no new privileges.
fn spawn_as_pod(
    binary: &Path,
    args: &[String],
    env: &[(String, String)],
    sa_dir: &Path,
    user: &str,
) -> ChildProcess {
    let (uid, gid) = user.split_once(':').unwrap();
    let quoted = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let command: Vec<String> = std::iter::once(binary.to_string_lossy().to_string())
        .chain(args.iter().cloned())
        .map(|a| quoted(&a))
        .collect();
    let script = format!(
        "set -e; mount -t tmpfs -o mode=755 tmpfs /var/run; \
         mkdir -p {IN_CLUSTER}; mount --bind -o ro {sa} {IN_CLUSTER}; \
         mount -o remount,bind,ro /; \
         exec setpriv --reuid {uid} --regid {gid} --clear-groups --inh-caps=-all \
         --bounding-set=-all --no-new-privs {command}",
        sa = quoted(&sa_dir.to_string_lossy()),
        command = command.join(" "),
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (&**k, &**v)).collect();
    ChildProcess::spawn(
        Path::new("unshare"),
        &["--mount", "--propagation", "private", "sh", "-c", &script],
        &env,
    )
    .expect("start the controller as the pod spec says")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_published_chart_and_image_install_and_run_as_the_pod_spec_says() {
    let (Ok(registry), Ok(crane), Ok(helm_bin)) = (
        std::env::var("MWRS_REGISTRY"),
        std::env::var("MWRS_CRANE"),
        std::env::var("MWRS_HELM"),
    ) else {
        eprintln!(
            "MWRS_REGISTRY, MWRS_CRANE or MWRS_HELM not set (scripts/release-check.sh): skipped"
        );
        return;
    };
    let Some(private) = PrivateHub::start("published") else {
        return;
    };
    let hub = TestHub::at(private.kubeconfig.clone(), "published", 2).await;
    operators_crd_in_place(&hub).await;
    let kubeconfig = hub.kubeconfig.display().to_string();
    let ns = hub.namespace.clone();
    let version = env!("CARGO_PKG_VERSION");
    let port = common::free_port();

    // As the install page says, from the registry.
    let chart = format!("oci://{registry}/charts/mwrs-controller");
    let image = format!("{registry}/mwrs-controller");
    helm(
        &helm_bin,
        &[
            "install",
            "mwrs-controller",
            &chart,
            "--version",
            version,
            "--plain-http",
            "-n",
            &ns,
            "--kubeconfig",
            &kubeconfig,
            "--take-ownership",
            "--force-conflicts",
            "--set",
            &format!("image.repository={image}"),
            "--set",
            &format!("controller.watchNamespace={ns}"),
            "--set",
            &format!("metrics.port={port}"),
        ],
    );
    let deployment = deployment(&helm_bin, "mwrs-controller", &ns, &kubeconfig);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        format!("{image}:{version}"),
        "the chart names the published image"
    );

    let tmp = tempfile::tempdir().unwrap();
    let (config, binary) = pull(&crane, &format!("{image}:{version}"), tmp.path());
    let user = config["config"]["User"].as_str().unwrap().to_string();
    let pod_user = format!(
        "{}:{}",
        pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]
    );
    assert_eq!(user, pod_user, "the image's user is the pod's");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"][0],
        "ALL"
    );
    run("chmod", &["-R", "a+rX", &tmp.path().to_string_lossy()]);

    if !is_root() {
        eprintln!(
            "not root: the run as the pod spec (a mount namespace, the pod's user) is skipped"
        );
        return;
    }
    let sa = pod["serviceAccountName"].as_str().unwrap();
    let sa_dir = tmp.path().join("serviceaccount");
    service_account_files(&hub, sa, &sa_dir).await;
    let (args, mut env) = container_args_env(container);
    let (host, api_port) = api_server(&hub);
    env.extend([
        ("HOSTNAME".into(), "mwrs-controller-0".into()),
        ("KUBERNETES_SERVICE_HOST".into(), host),
        ("KUBERNETES_SERVICE_PORT".into(), api_port),
    ]);
    let controller = spawn_as_pod(&binary, &args, &env, &sa_dir, &user);
    let ready = format!("https://127.0.0.1:{port}/readyz");
    wait_for("the published controller ready", common::WAIT, || async {
        let out = Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", &ready])
            .output()
            .map_err(|e| e.to_string())?;
        let code = String::from_utf8_lossy(&out.stdout).to_string();
        if code == "200" {
            Ok(())
        } else {
            Err(format!("/readyz {code}"))
        }
    })
    .await;

    let _agent = start_agent_succeeding(&hub, Duration::from_millis(100));
    create_app_for_all(&hub).await;
    wait_complete(&hub, "app", None).await;

    run("kill", &["-TERM", &controller.id().to_string()]);
    let mut controller = controller;
    let status = wait_for("a clean stop on SIGTERM", Duration::from_secs(30), || {
        let done = controller.try_wait();
        async move { done.ok_or_else(|| "still running".to_string()) }
    })
    .await;
    assert!(status.success(), "{status:?}: {}", controller.output());
}

fn is_root() -> bool {
    run("id", &["-u"]).trim() == "0"
}
