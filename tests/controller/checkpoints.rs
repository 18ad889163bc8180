//! Checkpoints against the real API server, the test playing the agent: it reports progress and
//! checkpoints on its heartbeat Lease, crashes, and its next pod is handed the newest good
//! checkpoint; one that keeps failing is poisoned and the one before it is handed out.

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

    let status = ns.status("resumer").await;
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
