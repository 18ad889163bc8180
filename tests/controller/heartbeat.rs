//! Heartbeats: an agent is alive iff it recently proved it, by renewing its Lease.

use std::time::Duration;

use agent_supervisor::api::{FailureReason, Phase, Trigger};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::setup;
use crate::support::TestNamespace;

/// Renews the agent's Lease as `holder`, as the agent process would.
async fn renew(ns: &TestNamespace, lease: &str, holder: &str) {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let patch = json!({ "spec": { "holderIdentity": holder, "renewTime": now } });
    ns.api::<Lease>()
        .patch(lease, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("renew the lease");
}

fn heartbeat_agent() -> serde_json::Value {
    json!({
        "restartPolicyRef": { "name": "p" },
        "heartbeat": { "timeout": "3s", "gracePeriod": "3s" },
    })
}

async fn setup_heartbeat(name: &str) -> (TestNamespace, crate::support::Operator) {
    let (ns, operator) = setup().await;
    ns.create_policy(
        "p",
        json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    ns.create_agent(name, heartbeat_agent()).await;
    (ns, operator)
}

#[tokio::test]
async fn a_renewing_agent_stays_and_a_silent_one_is_restarted() {
    let (ns, _operator) = setup_heartbeat("beater").await;
    let pod = ns.wait_running("beater-1").await;
    let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
    let lease_name = env
        .iter()
        .find(|e| e.name == "AGENT_HEARTBEAT_LEASE")
        .and_then(|e| e.value.clone());
    assert_eq!(
        lease_name.as_deref(),
        Some("beater"),
        "the pod is told its Lease"
    );
    let lease = ns
        .api::<Lease>()
        .get("beater")
        .await
        .expect("the operator created the Lease");
    let owner = &lease.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Agent", "beater")
    );

    // Renewing for three timeouts keeps it alive.
    for _ in 0..9 {
        renew(&ns, "beater", "beater-1").await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let status = ns.status("beater").await;
    assert_eq!(
        (status.attempt, status.phase),
        (1, Some(Phase::Running)),
        "a renewing agent is left running"
    );

    // Silence: hung. Deleted, recorded as HeartbeatLost, restarted.
    let status = ns
        .wait_status("beater", "a HeartbeatLost failure", |s| {
            s.last_failure.is_some()
        })
        .await;
    let failure = status.last_failure.unwrap();
    assert_eq!(failure.reason, FailureReason::HeartbeatLost);
    assert_eq!(status.restart_history[0].trigger, Trigger::HeartbeatLost);
    ns.wait_event("beater", "HeartbeatLost").await;
    ns.wait_gone("beater-1").await;
    ns.wait_running("beater-2").await;
}

#[tokio::test]
async fn renewal_by_a_stale_holder_does_not_count() {
    let (ns, _operator) = setup_heartbeat("haunted").await;
    ns.wait_running("haunted-1").await;
    // A process from an earlier attempt keeps renewing: it is not the current pod.
    let stale = tokio::spawn({
        let client = ns.client.clone();
        let namespace = ns.name.clone();
        async move {
            let leases: kube::Api<Lease> = kube::Api::namespaced(client, &namespace);
            for _ in 0..20 {
                let now = jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
                    .to_string();
                let patch = json!({ "spec": { "holderIdentity": "haunted-0", "renewTime": now } });
                let _ = leases
                    .patch("haunted", &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    });
    let status = ns
        .wait_status("haunted", "a HeartbeatLost failure", |s| {
            s.last_failure.is_some()
        })
        .await;
    stale.abort();
    let failure = status.last_failure.unwrap();
    assert_eq!(failure.reason, FailureReason::HeartbeatLost);
    assert!(
        failure.message.unwrap_or_default().contains("haunted-0"),
        "the message names the stale holder"
    );
}
