//! Crashes of every kind, and how each is restarted.

use agent_supervisor::api::{FailureClass, FailureReason, Phase, Trigger};
use k8s_openapi::api::core::v1::Pod;
use kube::api::EvictParams;
use serde_json::json;

use crate::{fast_policy, setup};

#[tokio::test]
async fn a_crash_is_restarted_after_the_backoff_delay() {
    let (ns, _operator) = setup().await;
    ns.create_policy("fast", fast_policy("3s")).await;
    ns.create_agent("crasher", json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;

    ns.wait_running("crasher-1").await;
    ns.wait_status("crasher", "phase Running", |s| {
        s.phase == Some(Phase::Running)
    })
    .await;
    ns.terminate("crasher-1", 1, "Error", "boom: model API returned 500")
        .await;
    let crashed_at = jiff::Timestamp::now();

    let backing_off = ns
        .wait_status("crasher", "phase BackingOff", |s| {
            s.phase == Some(Phase::BackingOff)
        })
        .await;
    let failure = backing_off
        .last_failure
        .clone()
        .expect("lastFailure recorded");
    assert_eq!(failure.reason, FailureReason::Error);
    assert_eq!(failure.class, FailureClass::Transient);
    assert_eq!(failure.exit_code, Some(1));
    assert_eq!(
        failure.message.as_deref(),
        Some("boom: model API returned 500")
    );
    assert_eq!(failure.container.as_deref(), Some("agent"));
    assert_eq!(failure.pod_name.as_deref(), Some("crasher-1"));
    assert_eq!(backing_off.consecutive_failures, 1);
    let next = backing_off
        .next_restart_at
        .clone()
        .expect("nextRestartAt set")
        .0;
    let scheduled_in = (next - failure.time.0).get_seconds();
    assert!(
        (3..=4).contains(&scheduled_in),
        "restart scheduled {scheduled_in}s after the failure, want 3s"
    );

    let restarted = ns.wait_running("crasher-2").await;
    let created = restarted.metadata.creation_timestamp.unwrap().0;
    let waited = (created - crashed_at)
        .total(jiff::Unit::Millisecond)
        .unwrap()
        / 1000.0;
    assert!(
        (2.0..6.0).contains(&waited),
        "replacement created {waited:.1}s after the crash, want about 3s"
    );

    let status = ns
        .wait_status("crasher", "restartCount 1 and Running", |s| {
            s.restart_count == 1 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(status.pod_name.as_deref(), Some("crasher-2"));
    assert_eq!(status.restart_history.len(), 1);
    let record = &status.restart_history[0];
    assert_eq!(record.attempt, 1);
    assert_eq!(record.trigger, Trigger::Failure);
    assert_eq!(record.reason, Some(FailureReason::Error));
    assert_eq!(record.exit_code, Some(1));
    assert_eq!(record.backoff.map(|b| b.to_string()).as_deref(), Some("3s"));
    assert!(record.restarted_at.is_some(), "restartedAt recorded");

    // The environment tells the new attempt it was restarted, and why.
    let env = restarted.spec.unwrap().containers[0].env.clone().unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(var("AGENT_RESTART_COUNT").as_deref(), Some("1"));
    assert_eq!(var("AGENT_LAST_FAILURE_REASON").as_deref(), Some("Error"));
    assert_eq!(var("AGENT_POD_NAME").as_deref(), Some("crasher-2"));
    assert_eq!(var("AGENT_NAME").as_deref(), Some("crasher"));

    for reason in ["Crashed", "RestartScheduled", "Restarted", "PodCreated"] {
        ns.wait_event("crasher", reason).await;
    }
}

/// Ends attempt 1 of a fresh agent as given and returns the recorded failure.
async fn first_failure(
    name: &str,
    exit_code: i32,
    reason: &str,
    message: &str,
) -> agent_supervisor::api::Failure {
    let (ns, _operator) = setup().await;
    ns.create_policy("fast", fast_policy("1s")).await;
    ns.create_agent(name, json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;
    let pod = format!("{name}-1");
    ns.wait_running(&pod).await;
    ns.terminate(&pod, exit_code, reason, message).await;
    let status = ns
        .wait_status(name, "a restart", |s| s.restart_count == 1)
        .await;
    ns.wait_running(&format!("{name}-2")).await;
    status.last_failure.expect("lastFailure recorded")
}

#[tokio::test]
async fn an_oom_kill_is_classified_and_restarted() {
    let failure = first_failure("oom", 137, "OOMKilled", "").await;
    assert_eq!(failure.reason, FailureReason::OomKilled);
    assert_eq!(failure.class, FailureClass::Transient);
    assert_eq!(failure.exit_code, Some(137));
    assert_eq!(
        failure.signal, None,
        "an OOM kill is reported as such, not as a signal"
    );
}

#[tokio::test]
async fn a_signal_is_classified_with_its_number() {
    let failure = first_failure("sigterm", 143, "Error", "terminated").await;
    assert_eq!(failure.reason, FailureReason::Signal);
    assert_eq!(failure.signal, Some(15));
    assert_eq!(failure.exit_code, Some(143));
}

#[tokio::test]
async fn a_pod_that_never_runs_times_out_and_is_replaced() {
    let (ns, _operator) = setup().await;
    ns.create_policy(
        "slow-start",
        json!({ "startupTimeout": "3s", "backoff": { "initialDelay": "1s", "jitter": 0.0 } }),
    )
    .await;
    // No node matches: the pod stays Pending, Unschedulable.
    let template = json!({ "spec": {
        "nodeSelector": { "supervisor.dev/test": "no-such-node" },
        "containers": [{ "name": "agent", "image": "example.invalid/agent:1" }],
    }});
    ns.create_agent(
        "stuck",
        json!({ "restartPolicyRef": { "name": "slow-start" }, "template": template }),
    )
    .await;
    let status = ns
        .wait_status("stuck", "a StartupTimeout", |s| s.last_failure.is_some())
        .await;
    let failure = status.last_failure.unwrap();
    assert_eq!(failure.reason, FailureReason::StartupTimeout);
    assert!(
        failure
            .message
            .as_deref()
            .unwrap_or("")
            .contains("Unschedulable"),
        "{:?}",
        failure.message
    );
    ns.wait_gone("stuck-1").await;
    ns.wait_status("stuck", "attempt 2", |s| s.attempt == 2)
        .await;
}

#[tokio::test]
async fn an_evicted_agent_is_restarted_at_once_without_counting() {
    let (ns, _operator) = setup().await;
    ns.create_policy(
        "slow",
        json!({ "backoff": { "initialDelay": "5m", "maxDelay": "5m" } }),
    )
    .await;
    ns.create_agent("evictee", json!({ "restartPolicyRef": { "name": "slow" } }))
        .await;
    ns.wait_running("evictee-1").await;
    ns.wait_status("evictee", "Running", |s| s.phase == Some(Phase::Running))
        .await;
    ns.api::<Pod>()
        .evict("evictee-1", &EvictParams::default())
        .await
        .expect("evict");

    // Restarted at once, although the policy's backoff is five minutes.
    ns.wait_running("evictee-2").await;
    let status = ns
        .wait_status("evictee", "the restart recorded", |s| s.restart_count == 1)
        .await;
    assert_eq!(
        status.consecutive_failures, 0,
        "a disruption counts toward nothing"
    );
    let failure = status.last_failure.unwrap();
    assert_eq!(failure.reason, FailureReason::Evicted);
    assert_eq!(failure.class, FailureClass::Disruption);
    assert_eq!(status.restart_history[0].trigger, Trigger::Disruption);
    assert!(
        status.recent_restarts.is_empty(),
        "not counted toward the restart limit"
    );
}
