//! examples/python-agent/ and examples/langgraph-agent/: their manifests, applied as they are,
//! need no RBAC of their own: each pod runs as the ServiceAccount the operator makes for its
//! Agent, which may renew that Agent's Lease and no other; the LangGraph agent's SQLite file is
//! on its claim. (Their programs run in sdk/python/tests/test_examples.py, and the LangGraph one
//! beside its pod in `make demo`.)

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use super::{apply, setup};
use crate::support::{self, TestNamespace, env_of};

/// Whether the Agent's own ServiceAccount may `verb` the Lease `lease`.
fn can(ns: &TestNamespace, account: &str, verb: &str, lease: &str) -> bool {
    let out = support::kubectl()
        .args(["auth", "can-i", verb])
        .arg(format!("leases.coordination.k8s.io/{lease}"))
        .args(["-n", &ns.name])
        .arg(format!("--as=system:serviceaccount:{}:{account}", ns.name))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

/// The pod runs as the Agent's managed account, allowed to renew exactly its Lease.
async fn assert_managed_identity(ns: &TestNamespace, agent: &str, pod: &Pod) {
    assert_eq!(
        pod.spec.as_ref().unwrap().service_account_name.as_deref(),
        Some(agent)
    );
    ns.api::<Lease>()
        .get(agent)
        .await
        .expect("the Lease exists");
    let name = format!("{agent}-heartbeat");
    for owners in [
        ns.api::<Role>()
            .get(&name)
            .await
            .unwrap()
            .metadata
            .owner_references,
        ns.api::<RoleBinding>()
            .get(&name)
            .await
            .unwrap()
            .metadata
            .owner_references,
    ] {
        assert_eq!(owners.unwrap()[0].name, agent, "owned by the Agent");
    }
    assert!(
        can(ns, agent, "update", agent) && can(ns, agent, "patch", agent),
        "the agent can renew its Lease"
    );
    assert!(
        !can(ns, agent, "update", "other") && !can(ns, agent, "delete", agent),
        "and nothing more"
    );
}

#[tokio::test]
async fn the_python_agent_runs_as_its_own_account_with_no_rbac_of_its_own() {
    let (ns, _operator) = setup().await;
    apply(&ns, "python-agent/agent.yaml").await;
    let pod = ns.wait_running("python-agent-1").await;
    assert_managed_identity(&ns, "python-agent", &pod).await;
    assert_eq!(env_of(&pod, "AGENT_HEARTBEAT_LEASE"), "python-agent");
    assert_eq!(env_of(&pod, "STEPS"), "100");
}

#[tokio::test]
async fn the_langgraph_agent_keeps_its_checkpoints_on_its_claim() {
    let (ns, _operator) = setup().await;
    let volumes: Api<PersistentVolume> = Api::all(ns.client.clone());
    let name = format!("{}-langgraph", ns.name);
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
            "hostPath": { "path": "/tmp/langgraph-agent" },
            "claimRef": { "namespace": ns.name, "name": "langgraph-agent-checkpoints" },
        }
    }))
    .unwrap();
    volumes
        .create(&PostParams::default(), &volume)
        .await
        .expect("create volume");
    apply(&ns, "langgraph-agent/agent.yaml").await;
    let pod = ns.wait_running("langgraph-agent-1").await;
    assert_managed_identity(&ns, "langgraph-agent", &pod).await;
    let spec = pod.spec.clone().unwrap();
    let claim = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "checkpoints")
        .and_then(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone());
    assert_eq!(claim.as_deref(), Some("langgraph-agent-checkpoints"));
    let mount = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "checkpoints")
        .expect("the claim is mounted")
        .mount_path
        .clone();
    let db = env_of(&pod, "CHECKPOINT_DB");
    assert!(
        db.starts_with(&format!("{mount}/")),
        "the SQLite file {db} is on the claim, mounted at {mount}"
    );
    let _ = volumes.delete(&name, &DeleteParams::default()).await;
}
