//! The operator against the real API server; the test plays the kubelet.

mod support;

use std::time::Duration;

use agent_supervisor::api::{FailureClass, FailureReason, Phase, Trigger};
use serde_json::json;
use support::{Operator, TestNamespace};

async fn setup() -> (TestNamespace, Operator) {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let operator = Operator::start(&ns.name).await;
    (ns, operator)
}

/// A policy with exact, short delays: no jitter.
fn fast_policy(initial: &str) -> serde_json::Value {
    json!({ "backoff": { "type": "Exponential", "initialDelay": initial, "maxDelay": "1m", "jitter": 0.0 } })
}

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
    tokio::time::sleep(Duration::from_millis(10)).await;
}
