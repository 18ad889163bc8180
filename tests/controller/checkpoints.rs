//! Progress and checkpoints against the real API server, the test playing the agent: it reports
//! progress and checkpoints on its heartbeat Lease, crashes, and its next pod is handed the
//! newest good checkpoint; one that keeps failing is poisoned and the one before it is handed
//! out. An agent alive on its Lease but getting nowhere is stopped as `NoProgress`; one that is
//! slow but steady is left alone.

use std::time::Duration;

use serde_json::json;

use crate::setup;
use crate::support::env_of;
use crate::support::kubelet::REACT;

#[tokio::test]
async fn a_checkpoint_reported_on_the_lease_is_resumed_from_until_it_is_poisoned() {
    let (ns, _operator) = setup().await;
    ns.create_policy(
        "p",
        json!({
            "backoff": { "type": "Immediate" },
            "circuitBreaker": { "failureThreshold": 0 },
            "checkpoints": { "maxFailures": 2 },
        }),
    )
    .await;
    // A long heartbeat: the test reports when it likes, and is never taken for hung.
    ns.create_agent(
        "resumer",
        json!({ "restartPolicyRef": { "name": "p" }, "heartbeat": { "timeout": "5m" } }),
    )
    .await;
    let first = ns.wait_running("resumer-1").await;
    assert_eq!(
        env_of(&first, "AGENT_CHECKPOINT"),
        "",
        "a first start is from scratch"
    );

    for (progress, checkpoint) in [("10", "step-1"), ("20", "step-2")] {
        ns.report_on_lease("resumer", "resumer-1", progress, checkpoint)
            .await;
        ns.wait_status_for(REACT, "resumer", checkpoint, |s| {
            s.checkpoints
                .first()
                .is_some_and(|c| c.reference == checkpoint)
        })
        .await;
    }
    ns.terminate("resumer-1", 1, "Error", "boom").await;
    let second = ns.wait_running("resumer-2").await;
    assert_eq!(env_of(&second, "AGENT_CHECKPOINT"), "step-2");
    assert_eq!(env_of(&second, "AGENT_PROGRESS"), "20");

    // Two resumes from step-2 fail before reporting anything newer: it is poisoned.
    ns.terminate("resumer-2", 1, "Error", "boom").await;
    let third = ns.wait_running("resumer-3").await;
    assert_eq!(env_of(&third, "AGENT_CHECKPOINT"), "step-2");
    ns.terminate("resumer-3", 1, "Error", "boom").await;
    let fourth = ns.wait_running("resumer-4").await;
    assert_eq!(env_of(&fourth, "AGENT_CHECKPOINT"), "step-1");
    let note = ns.wait_event("resumer", "CheckpointPoisoned").await;
    assert!(note.contains("step-2"), "{note}");

    // The Event goes at once; the status within the interval.
    let status = ns
        .wait_status("resumer", "the poisoned checkpoint recorded", |s| {
            s.attempt == 4 && s.checkpoints.first().is_some_and(|c| c.poisoned)
        })
        .await;
    let marks: Vec<_> = status
        .checkpoints
        .iter()
        .map(|c| (c.reference.as_str(), c.failures, c.poisoned))
        .collect();
    assert_eq!(marks, vec![("step-2", 2, true), ("step-1", 0, false)]);
    let resumed: Vec<_> = status
        .restart_history
        .iter()
        .map(|r| (r.attempt, r.checkpoint.as_deref(), r.progress))
        .collect();
    assert_eq!(
        resumed,
        vec![
            (3, Some("step-2"), Some(20)),
            (2, Some("step-2"), Some(20)),
            (1, None, Some(20)),
        ]
    );
}

#[tokio::test]
async fn an_agent_that_renews_its_lease_but_makes_no_progress_is_stopped() {
    let (ns, _operator) = setup().await;
    ns.create_policy(
        "judged",
        json!({ "backoff": { "type": "Immediate" }, "progress": { "stallTimeout": "4s" } }),
    )
    .await;
    ns.create_agent(
        "looper",
        json!({ "restartPolicyRef": { "name": "judged" }, "heartbeat": { "timeout": "5m" } }),
    )
    .await;
    ns.wait_running("looper-1").await;
    // It reports once, and from then on only renews its Lease (which stays good for 5m).
    ns.report_on_lease("looper", "looper-1", "7", "").await;
    let status = ns
        .wait_status_for(REACT, "looper", "a NoProgress failure", |s| {
            s.last_failure.as_ref().map(|f| f.reason)
                == Some(agent_supervisor::api::FailureReason::NoProgress)
        })
        .await;
    let failure = status.last_failure.expect("a failure");
    assert_eq!(failure.pod_name.as_deref(), Some("looper-1"));
    let ran = failure.ran_for.expect("it ran").as_millis();
    assert!(
        ran >= 4_000,
        "stopped after {ran} ms, before its stallTimeout"
    );
    let message = failure.message.as_deref().unwrap_or_default();
    assert!(message.contains("progress stayed at 7"), "{message}");
    let note = ns.wait_event("looper", "NoProgress").await;
    assert!(note.contains("looper-1 made no progress"), "{note}");
    ns.wait_gone("looper-1").await;
    let next = ns.wait_running("looper-2").await;
    assert_eq!(env_of(&next, "AGENT_PROGRESS"), "7");
    let status = ns.status("looper").await;
    let record = &status.restart_history[0];
    assert_eq!(
        (record.attempt, record.progress, record.reason),
        (
            1,
            Some(7),
            Some(agent_supervisor::api::FailureReason::NoProgress)
        )
    );
}

#[tokio::test]
async fn a_slow_but_steady_agent_is_left_alone() {
    let (ns, _operator) = setup().await;
    ns.create_policy("judged", json!({ "progress": { "stallTimeout": "10s" } }))
        .await;
    ns.create_agent(
        "steady",
        json!({ "restartPolicyRef": { "name": "judged" }, "heartbeat": { "timeout": "5m" } }),
    )
    .await;
    ns.wait_running("steady-1").await;
    // One step every 2 s for 24 s: more than twice the stallTimeout, never standing still for it.
    for step in 1..=12 {
        ns.report_on_lease("steady", "steady-1", &step.to_string(), "")
            .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // Growth between writes is recorded when the operator judges it (at each stallTimeout):
    // seeing a late step recorded shows it judged the agent again and again, and let it be.
    let status = ns
        .wait_status_for(REACT, "steady", "a late step recorded", |s| {
            s.progress.as_ref().is_some_and(|p| p.value >= 8)
        })
        .await;
    assert_eq!(status.attempt, 1, "{status:?}");
    assert_eq!(status.restart_count, 0);
    assert_eq!(status.last_failure, None);
    assert_eq!(status.phase, Some(agent_supervisor::api::Phase::Running));
}
