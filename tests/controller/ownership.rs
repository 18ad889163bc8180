//! What belongs to an Agent: a foreign pod is never touched, and deleting an Agent removes the
//! pods, claims and Lease it owns.

use std::time::Duration;

use agent_supervisor::api::Agent;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::support::{Change, eventually};
use crate::{fast_policy, setup};

#[tokio::test]
async fn foreign_pods_are_never_touched_and_deleting_an_agent_removes_what_it_owns() {
    let (ns, _operator) = setup().await;
    crate::support::wait_for_garbage_collection_of_agents(&ns).await;
    ns.create_policy("p", fast_policy("1s")).await;
    let pods = ns.record_pods().await;
    // A pod with the agent label that no Agent controls.
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": { "name": "keeper-1", "labels": { "supervisor.dev/agent": "keeper", "supervisor.dev/attempt": "1" } },
        "spec": { "containers": [{ "name": "c", "image": "example.invalid/other:1" }] }
    }))
    .unwrap();
    let foreign = ns
        .api::<Pod>()
        .create(&PostParams::default(), &foreign)
        .await
        .expect("create foreign pod");
    let claim = json!({ "metadata": { "name": "memory" }, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } } });
    ns.create_agent(
        "keeper",
        json!({
            "restartPolicyRef": { "name": "p" },
            "heartbeat": { "timeout": "1h" },
            "volumeClaimTemplates": [claim],
        }),
    )
    .await;
    // The name of attempt 1 is taken by the foreign pod: the operator reports it, touches nothing.
    let note = ns.wait_event("keeper", "NameTaken").await;
    assert!(
        note.contains("Pod keeper-1") && note.contains("not controlled by this Agent"),
        "{note}"
    );
    let still = ns
        .api::<Pod>()
        .get("keeper-1")
        .await
        .expect("the foreign pod is still there");
    assert_eq!(
        still.metadata.uid, foreign.metadata.uid,
        "the foreign pod was not replaced"
    );
    assert_eq!(
        still.metadata.labels, foreign.metadata.labels,
        "nor patched"
    );
    assert!(still.metadata.owner_references.is_none());

    // A second agent with its own pods, claim and Lease. This cluster has no storage
    // provisioner: a volume made for the claim stands in for one.
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": format!("{}-owner-memory", ns.name) },
        "spec": {
            "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
            "hostPath": { "path": "/tmp/agent-memory" },
            "claimRef": { "namespace": ns.name, "name": "owner-memory" },
        }
    }))
    .unwrap();
    let volumes: kube::Api<PersistentVolume> = kube::Api::all(ns.client.clone());
    volumes
        .create(&PostParams::default(), &volume)
        .await
        .expect("create volume");
    ns.create_agent(
        "owner",
        json!({
            "restartPolicyRef": { "name": "p" },
            "heartbeat": { "timeout": "1h" },
            "volumeClaimTemplates": [claim],
        }),
    )
    .await;
    let pod = ns.wait_running("owner-1").await;
    let volumes = pod.spec.unwrap().volumes.unwrap_or_default();
    let memory = volumes
        .iter()
        .find(|v| v.name == "memory")
        .expect("the claim is mounted");
    assert_eq!(
        memory.persistent_volume_claim.as_ref().unwrap().claim_name,
        "owner-memory"
    );
    ns.api::<PersistentVolumeClaim>()
        .get("owner-memory")
        .await
        .expect("the claim exists");
    ns.api::<Lease>()
        .get("owner")
        .await
        .expect("the lease exists");

    ns.api::<Agent>()
        .delete("owner", &DeleteParams::background())
        .await
        .expect("delete agent");
    ns.wait_gone("owner-1").await;
    let claims = ns.api::<PersistentVolumeClaim>();
    let leases = ns.api::<Lease>();
    eventually(
        Duration::from_secs(60),
        "the claim and Lease to be collected",
        || {
            let (claims, leases) = (claims.clone(), leases.clone());
            async move {
                let claim_gone = claims.get_opt("owner-memory").await.ok()?.is_none()
                    || claims
                        .get("owner-memory")
                        .await
                        .ok()?
                        .metadata
                        .deletion_timestamp
                        .is_some();
                let lease_gone = leases.get_opt("owner").await.ok()?.is_none();
                (claim_gone && lease_gone).then_some(())
            }
        },
    )
    .await;
    assert!(
        ns.api::<Pod>().get_opt("keeper-1").await.unwrap().is_some(),
        "the foreign pod survives"
    );
    // Over the whole test, not only at the end: never deleted, relabelled or adopted.
    for (change, pod) in pods.all() {
        if pod.metadata.name.as_deref() != Some("keeper-1") {
            continue;
        }
        assert_ne!(change, Change::Deleted, "the foreign pod was deleted");
        assert_eq!(
            pod.metadata.uid, foreign.metadata.uid,
            "the foreign pod was replaced"
        );
        assert_eq!(
            pod.metadata.labels, foreign.metadata.labels,
            "the foreign pod was patched"
        );
        assert!(
            pod.metadata.owner_references.is_none(),
            "the foreign pod was adopted"
        );
    }
}
