//! The chart installed as a user would, with the image `make image` built, onto the real node.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::support::{self, TestNamespace, eventually};

/// The release name: the chart names its Deployment `<release>-agent-supervisor`.
pub const RELEASE: &str = "sup";
pub const DEPLOYMENT: &str = "sup-agent-supervisor";
/// The images the real node has: the operator's (`hack/image.sh operator`) and the shell agents'.
pub const SHELL_IMAGE: &str = "localhost/agent-shell:dev";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Fails loudly unless the control plane runs the real node (`hack/cluster.sh up`, REAL_NODE
/// not 0), and loads the operator's image into it.
pub async fn real_node(client: &Client) {
    let node = Api::<Node>::all(client.clone())
        .get_opt("real-node")
        .await
        .expect("read nodes");
    assert!(
        node.is_some(),
        "the control plane in {} has no real node: start it with hack/cluster.sh (without \
         REAL_NODE=0)",
        support::kubeconfig().display()
    );
    let image = repo().join("target/image/agent-supervisor.tar");
    assert!(
        image.exists(),
        "no operator image at {}: build it with `make image` (hack/test.sh does)",
        image.display()
    );
    let cluster: PathBuf = support::kubeconfig()
        .parent()
        .expect("the kubeconfig is in its cluster's directory")
        .to_path_buf();
    let out = std::process::Command::new(repo().join("hack/image.sh"))
        .arg("load")
        .arg(&cluster)
        .arg(&image)
        .output()
        .expect("run hack/image.sh load");
    assert!(
        out.status.success(),
        "loading the operator's image into the real node failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace that admits only pods meeting Pod Security's "restricted" profile.
pub async fn restricted(ns: &TestNamespace) {
    let patch = json!({ "metadata": { "labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    } } });
    Api::<Namespace>::all(ns.client.clone())
        .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label the namespace restricted");
}

/// `helm install` of the chart into `release` with the locally built image, on the real node,
/// watching `watched`; returns once its Deployment is Available (its own readiness probe).
pub async fn install_chart(release: &TestNamespace, watched: &str) -> Deployment {
    let chart = repo().join("charts/agent-supervisor");
    let out = support::helm()
        .args(["install", RELEASE])
        .arg(&chart)
        .args(["--namespace", &release.name, "--skip-crds", "--wait=false"])
        .args([
            "--set=image.repository=localhost/agent-supervisor",
            "--set=image.tag=dev",
            "--set=image.pullPolicy=Never",
            "--set-string=nodeSelector.supervisor\\.dev/node=real",
            "--set=tolerations[0].key=supervisor.dev/node",
            "--set=tolerations[0].operator=Exists",
            "--set=logFormat=human",
        ])
        .arg(format!("--set=watchNamespaces={{{watched}}}"))
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm install failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    available(release).await
}

/// Waits until the operator's Deployment is Available, and returns it.
pub async fn available(release: &TestNamespace) -> Deployment {
    let deployments = release.api::<Deployment>();
    let pods = release.api::<Pod>();
    let what = "the operator's Deployment Available on the real node";
    eventually(Duration::from_secs(120), what, || {
        let (deployments, pods) = (deployments.clone(), pods.clone());
        async move {
            let deployment = deployments.get(DEPLOYMENT).await.ok()?;
            let available = deployment
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True");
            // Available with every replica on the new template and ready, not a rollout's old pod.
            let status = deployment.status.as_ref()?;
            let settled = status.updated_replicas == Some(1) && status.ready_replicas == Some(1);
            let on_real = operator_pods(&pods)
                .await
                .iter()
                .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("real-node"));
            (available && settled && on_real).then_some(deployment)
        }
    })
    .await
}

/// The operator's pods, live ones only.
pub async fn operator_pods(pods: &Api<Pod>) -> Vec<Pod> {
    let selector = "app.kubernetes.io/name=agent-supervisor";
    pods.list(&ListParams::default().labels(selector))
        .await
        .expect("list the operator's pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// The name of the operator pod that leads now, from the leader-election Lease.
pub async fn leader(release: &TestNamespace) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    let lease = release.api::<Lease>().get_opt(DEPLOYMENT).await.ok()??;
    let holder = lease.spec?.holder_identity?;
    // The identity is `<pod name>-<incarnation>`.
    holder.rsplit_once('-').map(|(pod, _)| pod.to_string())
}

/// A pod template for a shell agent on the real node running `script`.
pub fn shell_template(script: &str, resources: Value) -> Value {
    json!({ "spec": {
        "nodeSelector": { "supervisor.dev/node": "real" },
        "tolerations": [{ "key": "supervisor.dev/node", "operator": "Exists" }],
        "terminationGracePeriodSeconds": 2,
        "containers": [{
            "name": "agent", "image": SHELL_IMAGE, "imagePullPolicy": "Never",
            "command": ["sh", "-c", script], "resources": resources,
        }],
    } })
}

/// The operator's log, for a failure's message.
pub async fn operator_log(release: &TestNamespace) -> String {
    let pods = release.api::<Pod>();
    let mut log = String::new();
    for pod in operator_pods(&pods).await {
        let text = pods
            .logs(&pod.name_any(), &Default::default())
            .await
            .unwrap_or_else(|e| format!("(no log: {e})"));
        log.push_str(&format!("--- {}\n{text}\n", pod.name_any()));
    }
    log
}
