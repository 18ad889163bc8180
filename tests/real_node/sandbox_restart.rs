//! An operator killed while it restarts a Sandbox (its ended pod deleted, the next not yet
//! adopted): its successor adopts the pod agent-sandbox's controller made, once, as the next
//! attempt, at the time that was scheduled.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::json;

use crate::sandboxes::{REAL, create_sandbox, setup};
use crate::support::{Operator, eventually};

#[tokio::test]
async fn an_operator_killed_mid_restart_adopts_the_next_pod_once_and_keeps_the_time() {
    let (ns, operator) = setup().await;
    ns.create_policy(
        "steady",
        json!({ "backoff": { "type": "Linear", "initialDelay": "8s", "maxDelay": "8s", "jitter": 0.0 },
                "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    create_sandbox(&ns, "phoenix", "sleep 1; exit 3", Some("Never")).await;
    ns.create_agent(
        "phoenix",
        json!({ "sandboxRef": { "name": "phoenix" }, "restartPolicyRef": { "name": "steady" } }),
    )
    .await;
    let failed = ns
        .wait_status_for(REAL, "phoenix", "attempt 1's end recorded", |s| {
            s.restart_history.first().is_some_and(|r| r.attempt == 1)
        })
        .await;
    let due = failed
        .next_restart_at
        .clone()
        .expect("a restart scheduled")
        .0;
    // Killed the moment its restart deletes the ended pod: before it adopts the next.
    let pods = ns.api::<Pod>();
    eventually(REAL, "the restart deleting attempt 1's pod", || async {
        let pod = pods.get_opt("phoenix").await.ok()?;
        let attempt = pod
            .as_ref()
            .and_then(|p| p.labels().get("supervisor.dev/attempt").cloned());
        let deleting = pod
            .as_ref()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some());
        (deleting || attempt.is_none()).then_some(())
    })
    .await;
    operator.kill().await;
    let successor = Operator::start_prompt(&ns.name).await;
    // Attempt 2 may have ended too by the time this looks (it crashes a second after it
    // starts): what matters is that attempt 1's restart was made once, when it was due.
    let restarted = ns
        .wait_status_for(
            REAL,
            "phoenix",
            "attempt 1's restart made by the successor",
            |s| {
                s.attempt >= 2
                    && s.restart_history
                        .iter()
                        .any(|r| r.attempt == 1 && r.restarted_at.is_some())
            },
        )
        .await;
    let first = restarted
        .restart_history
        .iter()
        .find(|r| r.attempt == 1)
        .expect("attempt 1's record");
    let at = first.restarted_at.clone().expect("restarted").0;
    assert!(
        at >= due,
        "restarted at {at}, due at {due}: the time was kept"
    );
    // The pod the Sandbox's controller makes next is adopted as a later attempt (each restart
    // deletes the ended pod first: between the two, the pod is a fresh one of no attempt yet).
    eventually(REAL, "a later attempt's pod", || async {
        let pod = pods.get_opt("phoenix").await.ok()??;
        let attempt: u32 = pod.labels().get("supervisor.dev/attempt")?.parse().ok()?;
        (attempt >= 2).then_some(())
    })
    .await;
    // Decided on once more: each attempt recorded once, every restart made counted once.
    let again = ns.decided_again("phoenix").await;
    let mut attempts: Vec<u32> = again.restart_history.iter().map(|r| r.attempt).collect();
    attempts.dedup();
    assert_eq!(
        attempts.len(),
        again.restart_history.len(),
        "{:?}",
        again.restart_history
    );
    let made = again
        .restart_history
        .iter()
        .filter(|r| r.restarted_at.is_some())
        .count();
    assert_eq!(again.restart_count as usize, made, "{again:?}");
    assert_eq!(
        again.restart_history.last().map(|r| r.attempt),
        Some(1),
        "{again:?}"
    );
    successor.stop().await;
}
