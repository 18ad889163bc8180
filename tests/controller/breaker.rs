//! The circuit breaker and the restart limit.

use agent_supervisor::api::{Agent, AgentStatus, BreakerState, Phase};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::setup;
use crate::support::{Recorder, TestNamespace};

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

/// The first recorded status of the agent that satisfies `check`.
async fn first_status(
    versions: &Recorder<Agent>,
    what: &str,
    check: impl Fn(&AgentStatus) -> bool,
) -> AgentStatus {
    versions
        .wait_for(what, |a| a.status.as_ref().is_some_and(&check))
        .await
        .status
        .expect("a status")
}

/// Two failures open the breaker for 4 s (8 s the second time); a pod that runs `reset_after`
/// is healthy. Each crash of a test must come before its pod has run that long: on a loaded
/// machine 4 s was not always enough.
fn breaker_policy(reset_after: &str) -> serde_json::Value {
    json!({
        "backoff": { "type": "Immediate", "jitter": 0.0 },
        "resetAfter": reset_after,
        "circuitBreaker": { "failureThreshold": 2, "openDuration": "4s", "openDurationMultiplier": 2.0, "maxOpenDuration": "1m" },
    })
}

#[tokio::test]
async fn the_breaker_opens_probes_once_and_closes_after_a_healthy_probe() {
    // Every state and every Event, as they come: HalfOpen lasts less than a status interval.
    let (ns, _operator) = crate::setup_prompt().await;
    ns.create_policy("breaker", breaker_policy("10s")).await;
    // Open and HalfOpen last four seconds each: a poll may miss them, the watches do not.
    let versions = ns.record_agent("flaky").await;
    let pods = ns.record_pods().await;
    ns.create_agent(
        "flaky",
        json!({ "restartPolicyRef": { "name": "breaker" } }),
    )
    .await;

    crash(&ns, "flaky", 1).await;
    crash(&ns, "flaky", 2).await;
    let open = first_status(&versions, "phase CircuitOpen", |s| {
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

    // At halfOpenAt: exactly one probe.
    let probe = ns.wait_running("flaky-3").await;
    let half_open_at = breaker.half_open_at.clone().unwrap().0;
    let created = probe.metadata.creation_timestamp.unwrap().0;
    assert!(created >= half_open_at, "the probe waited for halfOpenAt");
    // No pod while open: of every pod that ever existed (even briefly), none but the two
    // crashed ones was created before halfOpenAt.
    let early: Vec<String> = pods
        .distinct()
        .into_iter()
        .filter(|p| p.metadata.creation_timestamp.as_ref().unwrap().0 < half_open_at)
        .filter_map(|p| p.metadata.name)
        .filter(|name| name != "flaky-1" && name != "flaky-2")
        .collect();
    assert!(
        early.is_empty(),
        "restarted while the breaker was open (until {half_open_at}): {early:?}"
    );
    let half = first_status(&versions, "HalfOpen", |s| {
        s.circuit_breaker
            .as_ref()
            .is_some_and(|b| b.state == BreakerState::HalfOpen)
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
    let ever: Vec<String> = pods
        .distinct()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(ever, ["flaky-1", "flaky-2", "flaky-3"], "exactly one probe");
}

#[tokio::test]
async fn a_failed_probe_opens_the_breaker_again_for_longer() {
    let (ns, _operator) = setup().await;
    ns.create_policy("breaker", breaker_policy("1m")).await;
    // Each Open lasts seconds, then the probe starts: the watch sees every state.
    let versions = ns.record_agent("doomed").await;
    ns.create_agent(
        "doomed",
        json!({ "restartPolicyRef": { "name": "breaker" } }),
    )
    .await;
    crash(&ns, "doomed", 1).await;
    crash(&ns, "doomed", 2).await;
    first_status(&versions, "CircuitOpen", |s| {
        s.phase == Some(Phase::CircuitOpen)
    })
    .await;
    crash(&ns, "doomed", 3).await; // the probe fails
    let reopened = first_status(&versions, "open again", |s| {
        s.circuit_breaker.as_ref().is_some_and(|b| b.trips == 2)
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
    let versions = ns.record_agent("limited").await;
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
    // Stopped means stopped until the reset, over the whole time: the first version of the
    // agent that went past attempt 3 is the one that handled the reset.
    // (Waited for: the read above may run ahead of the recording's watch.)
    let fourth = versions
        .wait_for("attempt 4 recorded", |a| {
            a.status.as_ref().is_some_and(|s| s.attempt > 3)
        })
        .await
        .status
        .expect("a status");
    assert_eq!(
        fourth.handled_reset_request.as_deref(),
        Some("first"),
        "restarted before the reset: {fourth:?}"
    );
}
