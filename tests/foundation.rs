//! The local control plane is real: RBAC is enforced, garbage collection runs, pods are
//! scheduled onto kwok's fake nodes, and a test can play the kubelet.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::AuthInfo;
use kube::{Api, Client};
use serde_json::json;
use support::{TestNamespace, eventually};

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("test object is valid")
}

/// A client that authenticates as `account` with a token from the TokenRequest API.
async fn client_as(ns: &TestNamespace, account: &str) -> Client {
    let accounts: Api<ServiceAccount> = ns.api();
    accounts
        .create(
            &PostParams::default(),
            &from_json(json!({ "metadata": { "name": account } })),
        )
        .await
        .expect("create service account");
    let token = support::service_account_token(&ns.client, &ns.name, account).await;
    let mut config = support::admin_config().await;
    config.auth_info = AuthInfo {
        token: Some(token.into()),
        ..AuthInfo::default()
    };
    Client::try_from(config).expect("token client")
}

fn sleeper_pod(name: &str) -> Pod {
    from_json(json!({
        "metadata": { "name": name },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "main", "image": "example.invalid/sleeper:1" }]
        }
    }))
}

#[tokio::test]
async fn rbac_refuses_an_unbound_service_account_and_admits_a_bound_one() {
    let ns = TestNamespace::new().await;

    let nobody = client_as(&ns, "nobody").await;
    let err = Api::<Pod>::namespaced(nobody, &ns.name)
        .list(&ListParams::default())
        .await
        .expect_err("a service account with no binding must not list pods");
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403, "expected Forbidden, got {status:?}")
        }
        other => panic!("expected a 403 from the apiserver, got {other}"),
    }

    ns.api::<Role>()
        .create(
            &PostParams::default(),
            &from_json(json!({
                "metadata": { "name": "pod-reader" },
                "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["list"] }]
            })),
        )
        .await
        .expect("create role");
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &from_json(json!({
            "metadata": { "name": "reader-reads-pods" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader" },
            "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns.name }]
        })))
        .await
        .expect("create role binding");
    let reader = client_as(&ns, "reader").await;
    let pods = Api::<Pod>::namespaced(reader.clone(), &ns.name);
    // RBAC authorizers see new bindings through an informer: allow a moment.
    eventually(
        Duration::from_secs(10),
        "the bound account to list pods",
        || {
            let pods = pods.clone();
            async move { pods.list(&ListParams::default()).await.ok() }
        },
    )
    .await;
    // The binding grants exactly `list`: reading another resource stays forbidden.
    let err = Api::<ConfigMap>::namespaced(reader, &ns.name)
        .list(&ListParams::default())
        .await
        .expect_err("the role grants pods only");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "got {err}"
    );
}

#[tokio::test]
async fn garbage_collection_deletes_pods_of_a_deleted_owner() {
    let ns = TestNamespace::new().await;
    let owners: Api<ConfigMap> = ns.api();
    let owner = owners
        .create(
            &PostParams::default(),
            &from_json(json!({ "metadata": { "name": "owner" } })),
        )
        .await
        .expect("create owner");
    let mut pod = sleeper_pod("owned");
    pod.metadata.owner_references = Some(vec![from_json(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
        "uid": owner.metadata.uid.clone().unwrap(), "controller": true
    }))]);
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create owned pod");

    owners
        .delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    eventually(
        Duration::from_secs(60),
        "the garbage collector to delete the owned pod",
        || {
            let pods = pods.clone();
            async move {
                pods.get_opt("owned")
                    .await
                    .ok()
                    .and_then(|p| p.is_none().then_some(()))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_pod_is_scheduled_onto_a_fake_node_and_runs() {
    let ns = TestNamespace::new().await;
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &sleeper_pod("runner"))
        .await
        .expect("create pod");
    let pod = eventually(Duration::from_secs(60), "the pod to be Running", || {
        let pods = pods.clone();
        async move {
            let pod = pods.get("runner").await.ok()?;
            (pod.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(pod)
        }
    })
    .await;
    let node = pod
        .spec
        .unwrap()
        .node_name
        .expect("a running pod is bound to a node");
    assert!(
        node.starts_with("kwok-node-"),
        "scheduled onto {node}, not a fake node"
    );
    let running = &pod.status.unwrap().container_statuses.unwrap()[0];
    assert!(
        running.state.as_ref().unwrap().running.is_some(),
        "container is running: {running:?}"
    );
}

#[tokio::test]
async fn a_test_can_play_the_kubelet_through_pods_status() {
    let ns = TestNamespace::new().await;
    let pods: Api<Pod> = ns.api();
    // Bound to a node no kubelet manages, so nothing but this test writes its status.
    let mut pod = sleeper_pod("played");
    pod.spec.as_mut().unwrap().node_name = Some("played-by-test".into());
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");

    let status = json!({
        "status": {
            "phase": "Failed",
            "containerStatuses": [{
                "name": "main", "image": "example.invalid/sleeper:1", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": { "terminated": {
                    "exitCode": 137, "reason": "OOMKilled", "message": "out of memory: 512Mi",
                    "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:05:00Z"
                }}
            }]
        }
    });
    pods.patch_status(
        "played",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&status),
    )
    .await
    .expect("write pod status");

    let read = pods.get_status("played").await.expect("read pod status");
    let status = read.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    let terminated = status.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(terminated.exit_code, 137);
    assert_eq!(terminated.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(terminated.message.as_deref(), Some("out of memory: 512Mi"));
    assert_eq!(
        terminated.started_at.unwrap().0.to_string(),
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(
        terminated.finished_at.unwrap().0.to_string(),
        "2026-01-01T00:05:00Z"
    );
}

#[test]
fn a_second_make_tools_builds_nothing() {
    let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/hack/tools.sh"))
        .output()
        .expect("run hack/tools.sh");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "hack/tools.sh failed:\n{log}");
    let tools = [
        "etcd",
        "kwok",
        "helm",
        "prometheus",
        "kubernetes",
        "agent-sandbox",
        "node",
    ];
    for tool in tools {
        assert!(
            log.contains(&format!("==> {tool} v")) && !log.contains(&format!("{tool}: ")),
            "{log}"
        );
    }
    assert_eq!(
        log.matches("cached in").count(),
        tools.len(),
        "every tool comes from the cache:\n{log}"
    );
    assert!(!log.contains("building"), "nothing is rebuilt:\n{log}");
    assert!(
        log.contains("real node packages: installed") && !log.contains("built ("),
        "the real node's packages and images are in place, no image rebuilt:\n{log}"
    );
}

#[test]
fn a_cluster_comes_up_again_after_it_was_taken_down() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join(format!("target/cycle-test-{}", std::process::id()));
    let cluster = |args: &[&str]| {
        let out = std::process::Command::new(root.join("hack/cluster.sh"))
            .args(args)
            .arg("--dir")
            .arg(&dir)
            .output()
            .expect("run hack/cluster.sh");
        assert!(
            out.status.success(),
            "cluster.sh {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let ready = || {
        let out = support::tool("kubectl")
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .args(["get", "--raw=/readyz"])
            .output()
            .expect("run kubectl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // What of its real node is left on this machine: processes, mounts, cgroups, iptables
    // rules, interfaces (`hack/node.sh left`).
    let left = || {
        let out = std::process::Command::new(root.join("hack/node.sh"))
            .args(["left", "--dir"])
            .arg(&dir)
            .output()
            .expect("run hack/node.sh left");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let real_node = || {
        let out = support::tool("kubectl")
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .args([
                "get",
                "node",
                "real-node",
                "-o=jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ])
            .output()
            .expect("run kubectl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    cluster(&["up"]);
    assert_eq!(ready(), "ok");
    assert_eq!(real_node(), "True", "the real node is Ready");
    assert!(
        left().contains("process: kubelet"),
        "left sees a running node: {}",
        left()
    );
    assert!(
        cluster(&["up"]).contains("already up"),
        "a second up is a no-op"
    );
    cluster(&["down"]);
    assert!(
        !dir.join("kubeconfig").exists(),
        "down removes the cluster's data"
    );
    assert_eq!(left(), "", "down leaves nothing of the real node behind");
    cluster(&["up"]);
    assert_eq!(ready(), "ok");
    cluster(&["down"]);
    assert_eq!(left(), "", "down leaves nothing of the real node behind");
    let _ = std::fs::remove_dir_all(&dir);
}
