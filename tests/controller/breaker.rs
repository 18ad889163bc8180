//! The circuit breaker and the restart limit.

use agent_supervisor::api::{BreakerState, Phase};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::setup;
use crate::support::TestNamespace;

/// Crashes the current pod of `agent` (attempt `attempt`) once it runs.
async fn crash(ns: &TestNamespace, agent: &str, attempt: u32) {
    let pod = format!("{agent}-{attempt}");
    ns.wait_running(&pod).await;
    ns.terminate(&pod, 1, "Error", "crash").await;
}

async fn pod_names(ns: &TestNamespace) -> Vec<String> {
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default())
        .await
        .expect("list pods");
    pods.items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect()
}

fn breaker_policy() -> serde_json::Value {
    json!({
        "backoff": { "type": "Immediate", "jitter": 0.0 },
        "resetAfter": "4s",
        "circuitBreaker": { "failureThreshold": 2, "openDuration": "4s", "openDurationMultiplier": 2.0, "maxOpenDuration": "1m" },
    })
}

#[tokio::test]
async fn the_breaker_opens_probes_once_and_closes_after_a_healthy_probe() {
    let (ns, _operator) = setup().await;
    ns.create_policy("breaker", breaker_policy()).await;
    ns.create_agent(
        "flaky",
        json!({ "restartPolicyRef": { "name": "breaker" } }),
    )
    .await;

    crash(&ns, "flaky", 1).await;
    crash(&ns, "flaky", 2).await;
    let open = ns
        .wait_status("flaky", "phase CircuitOpen", |s| {
            s.phase == Some(Phase::CircuitOpen)
        })
        .await;
    let breaker = open.circuit_breaker.clone().unwrap();
    assert_eq!(breaker.state, BreakerState::Open);
    assert_eq!(breaker.trips, 1);
    let open_for = breaker.half_open_at.clone().unwrap().0 - breaker.opened_at.clone().unwrap().0;
    assert_eq!(open_for.get_seconds(), 4);
    let condition = open
        .conditions
        .iter()
        .find(|c| c.type_ == "CircuitBreakerOpen")
        .expect("condition set");
    assert_eq!(condition.status, "True");
    ns.wait_event("flaky", "CircuitOpened").await;

    // No pod while open.
    assert!(
        !pod_names(&ns).await.contains(&"flaky-3".to_string()),
        "no restart while the breaker is open"
    );
    // At halfOpenAt: exactly one probe.
    let probe = ns.wait_running("flaky-3").await;
    let created = probe.metadata.creation_timestamp.unwrap().0;
    assert!(
        created >= breaker.half_open_at.clone().unwrap().0,
        "the probe waited for halfOpenAt"
    );
    let half = ns
        .wait_status("flaky", "HalfOpen", |s| {
            s.circuit_breaker.as_ref().unwrap().state == BreakerState::HalfOpen
        })
        .await;
    assert_eq!(half.attempt, 3);
    ns.wait_event("flaky", "CircuitHalfOpen").await;

    // The probe stays healthy for resetAfter: the breaker closes.
    let closed = ns
        .wait_status("flaky", "Closed after resetAfter", |s| {
            s.circuit_breaker.as_ref().unwrap().state == BreakerState::Closed
                && s.consecutive_failures == 0
        })
        .await;
    assert_eq!(closed.attempt, 3, "closing the breaker restarts nothing");
    ns.wait_event("flaky", "CircuitClosed").await;
    let names = pod_names(&ns).await;
    assert!(
        !names.contains(&"flaky-4".to_string()),
        "exactly one probe: {names:?}"
    );
}

#[tokio::test]
async fn a_failed_probe_opens_the_breaker_again_for_longer() {
    let (ns, _operator) = setup().await;
    ns.create_policy("breaker", breaker_policy()).await;
    ns.create_agent(
        "doomed",
        json!({ "restartPolicyRef": { "name": "breaker" } }),
    )
    .await;
    crash(&ns, "doomed", 1).await;
    crash(&ns, "doomed", 2).await;
    ns.wait_status("doomed", "CircuitOpen", |s| {
        s.phase == Some(Phase::CircuitOpen)
    })
    .await;
    crash(&ns, "doomed", 3).await; // the probe fails
    let reopened = ns
        .wait_status("doomed", "open again", |s| {
            s.circuit_breaker.as_ref().unwrap().trips == 2
        })
        .await;
    let breaker = reopened.circuit_breaker.unwrap();
    assert_eq!(breaker.state, BreakerState::Open);
    assert_eq!(reopened.phase, Some(Phase::CircuitOpen));
    let open_for = breaker.half_open_at.unwrap().0 - breaker.opened_at.unwrap().0;
    assert_eq!(
        open_for.get_seconds(),
        8,
        "the second trip stays open twice as long"
    );
}

#[tokio::test]
async fn exceeding_the_restart_limit_stops_the_agent_until_reset() {
    let (ns, _operator) = setup().await;
    ns.create_policy(
        "limited",
        json!({
            "backoff": { "type": "Immediate" },
            "limits": { "maxRestarts": 2, "window": "1h" },
            "circuitBreaker": { "failureThreshold": 0 },
        }),
    )
    .await;
    ns.create_agent(
        "limited",
        json!({ "restartPolicyRef": { "name": "limited" } }),
    )
    .await;
    crash(&ns, "limited", 1).await;
    crash(&ns, "limited", 2).await;
    crash(&ns, "limited", 3).await;
    let stopped = ns
        .wait_status("limited", "Stopped", |s| s.phase == Some(Phase::Stopped))
        .await;
    assert_eq!(stopped.restart_count, 2);
    let ready = stopped
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason, "RestartLimitExceeded");
    ns.wait_event("limited", "RestartLimitExceeded").await;
    assert!(!pod_names(&ns).await.contains(&"limited-4".to_string()));

    let patch =
        json!({ "metadata": { "annotations": { "supervisor.dev/reset-requested-at": "first" } } });
    ns.api::<agent_supervisor::api::Agent>()
        .patch("limited", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
    ns.wait_running("limited-4").await;
    let resumed = ns
        .wait_status("limited", "resumed", |s| s.phase == Some(Phase::Running))
        .await;
    assert_eq!(resumed.consecutive_failures, 0);
    assert_eq!(resumed.handled_reset_request.as_deref(), Some("first"));
    ns.wait_event("limited", "Reset").await;
}
