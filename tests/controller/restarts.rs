//! Crashes of every kind, and how each is restarted.

use agent_supervisor::api::{FailureClass, FailureReason, Phase, Trigger};
use k8s_openapi::api::core::v1::Pod;
use kube::api::EvictParams;
use serde_json::json;

use crate::{fast_policy, setup};

fn secs(n: i64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_secs(n)
}

#[tokio::test]
async fn a_crash_is_restarted_after_the_backoff_delay() {
    // A backoff within the status interval is merged with its restart: written at once here.
    let (ns, _operator) = crate::setup_prompt().await;
    ns.create_policy("fast", fast_policy("5s")).await;
    // BackingOff lasts five seconds from the crash: a poll on a loaded machine may miss it, the
    // watch does not.
    let versions = ns.record_agent("crasher").await;
    ns.create_agent("crasher", json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;

    ns.wait_running("crasher-1").await;
    ns.wait_status("crasher", "phase Running", |s| {
        s.phase == Some(Phase::Running)
    })
    .await;
    ns.terminate("crasher-1", 1, "Error", "boom: model API returned 500")
        .await;

    let backing_off = versions
        .wait_for("agent crasher: phase BackingOff", |a| {
            a.status.as_ref().and_then(|s| s.phase) == Some(Phase::BackingOff)
        })
        .await
        .status
        .expect("a status");
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
    // Scheduled the backoff after the failure, counted from when the attempt ended (so that a
    // successor deciding it again gives the same instant). Status times are whole seconds.
    let next = backing_off
        .next_restart_at
        .clone()
        .expect("nextRestartAt set")
        .0;
    assert_eq!(
        next,
        failure.time.0 + secs(5),
        "restart scheduled 5s after the failure at {}",
        failure.time.0
    );

    // Eventually restarted, and never before the scheduled time.
    let restarted = ns.wait_running("crasher-2").await;
    let created = restarted.metadata.creation_timestamp.clone().unwrap().0;
    assert!(
        created >= next,
        "replacement created at {created}, before the scheduled {next}"
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
    assert_eq!(record.backoff.map(|b| b.to_string()).as_deref(), Some("5s"));
    assert_eq!(record.failed_at.as_ref(), Some(&failure.time));
    let restarted_at = record.restarted_at.clone().expect("restartedAt recorded").0;
    assert!(
        restarted_at >= next && restarted_at <= created,
        "restartedAt {restarted_at}: not between the scheduled {next} and the pod's creation {created}"
    );

    // The environment tells the new attempt it was restarted, and why.
    let env = restarted.spec.unwrap().containers[0].env.clone().unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(var("AGENT_RESTART_COUNT").as_deref(), Some("1"));
    assert_eq!(var("AGENT_LAST_FAILURE_REASON").as_deref(), Some("Error"));
    let last: serde_json::Value =
        serde_json::from_str(&var("AGENT_LAST_FAILURE").expect("AGENT_LAST_FAILURE"))
            .expect("AGENT_LAST_FAILURE is JSON");
    assert_eq!(
        last,
        json!({ "attempt": 1, "reason": "Error", "class": "Transient", "exitCode": 1,
                "message": "boom: model API returned 500" })
    );
    assert_eq!(var("AGENT_POD_NAME").as_deref(), Some("crasher-2"));
    assert_eq!(var("AGENT_NAME").as_deref(), Some("crasher"));

    for reason in ["Crashed", "Restarted", "PodCreated"] {
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

#[tokio::test]
async fn old_pods_are_removed_together_and_a_lookalike_is_left_alone() {
    let (ns, _operator) = setup().await;
    ns.create_policy(
        "now",
        json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    // Someone else's pod with the agent's labels (an attempt the agent will have), finished:
    // only which object it is tells it from the agent's own old pods.
    let lookalike: Pod = serde_json::from_value(json!({
        "metadata": { "name": "lookalike", "labels": {
            "supervisor.dev/agent": "looper", "supervisor.dev/attempt": "2" } },
        "spec": { "containers": [{ "name": "c", "image": "example.invalid/other:1" }] }
    }))
    .unwrap();
    let lookalike = ns
        .api::<Pod>()
        .create(&kube::api::PostParams::default(), &lookalike)
        .await
        .expect("create the lookalike");
    ns.wait_running("lookalike").await;
    ns.terminate("lookalike", 1, "Error", "not an agent").await;
    ns.create_agent("looper", json!({ "restartPolicyRef": { "name": "now" } }))
        .await;
    // Attempt 7, recorded at the latest with the fifth crash not yet written, leaves attempts 1
    // to 5 older than the previous one: five, removed together.
    for attempt in 1..=6 {
        let pod = format!("looper-{attempt}");
        ns.wait_running(&pod).await;
        ns.terminate(&pod, 1, "Error", "crash").await;
    }
    ns.wait_running("looper-7").await;
    for attempt in 1..=5 {
        ns.wait_gone(&format!("looper-{attempt}")).await;
    }
    // Removed in the one request that removed them: the lookalike was in its reach, and stays.
    let pods = ns.api::<Pod>();
    let still = pods
        .get_opt("lookalike")
        .await
        .expect("read the lookalike")
        .expect("the lookalike is left alone");
    assert_eq!(still.metadata.uid, lookalike.metadata.uid);
    let kept = pods
        .get("looper-6")
        .await
        .expect("the previous attempt is kept for kubectl logs");
    assert_eq!(kept.status.and_then(|s| s.phase).as_deref(), Some("Failed"));
}
