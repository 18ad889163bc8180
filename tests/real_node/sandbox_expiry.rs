//! A Sandbox that reaches its `shutdownTime` (`shutdownPolicy: Retain`): its controller deletes
//! the pod and makes none; the operator does not restart it, says why, and runs it again once
//! the time moves later.

use std::time::Duration;

use agent_supervisor::api::Phase;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::sandboxes::{REAL, create_sandbox, operating_mode, sandboxes, setup};
use crate::support::eventually;

/// How far ahead the first shutdownTime is: time for the pod to start and be adopted first.
const LIFETIME: Duration = Duration::from_secs(20);

fn at(from_now: Duration) -> String {
    let when = jiff::Timestamp::now() + jiff::SignedDuration::try_from(from_now).unwrap();
    when.round(jiff::Unit::Second).unwrap().to_string()
}

#[tokio::test]
async fn an_expired_sandbox_is_not_restarted_until_its_shutdown_time_moves_later() {
    let (ns, operator) = setup().await;
    create_sandbox(&ns, "expiring", "sleep 3600", Some("Never")).await;
    let expiry = json!({ "spec": { "shutdownTime": at(LIFETIME), "shutdownPolicy": "Retain" } });
    sandboxes(&ns)
        .patch("expiring", &PatchParams::default(), &Patch::Merge(&expiry))
        .await
        .expect("set the Sandbox's shutdownTime");
    ns.create_agent("expiring", json!({ "sandboxRef": { "name": "expiring" } }))
        .await;
    let running = ns
        .wait_status_for(REAL, "expiring", "its pod adopted and running", |s| {
            s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(running.attempt, 1);
    let first = ns.api::<Pod>().get("expiring").await.expect("its pod");

    // Expired: the pod deleted by the Sandbox's controller, no attempt started after it.
    let expired = ns
        .wait_status_for(REAL, "expiring", "the expiry said", |s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "SandboxExpired")
        })
        .await;
    assert_eq!(expired.attempt, 1, "{expired:?}");
    let note = ns.wait_event("expiring", "SandboxExpired").await;
    assert!(note.contains("shutdownTime"), "{note}");
    eventually(REAL, "the expired Sandbox's pod gone", || async {
        ns.api::<Pod>()
            .get_opt("expiring")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let status = ns.decided_again("expiring").await;
    assert_eq!(status.attempt, 1, "not restarted: {status:?}");
    assert_ne!(
        operating_mode(&ns, "expiring").await.as_deref(),
        Some("Suspended"),
        "the operator suspends nothing for it"
    );

    // The time moved later: the Sandbox's controller makes a pod, adopted as attempt 2.
    let later = json!({ "spec": { "shutdownTime": at(Duration::from_secs(3600)) } });
    sandboxes(&ns)
        .patch("expiring", &PatchParams::default(), &Patch::Merge(&later))
        .await
        .expect("move the shutdownTime later");
    let again = ns
        .wait_status_for(REAL, "expiring", "running again", |s| {
            s.attempt == 2 && s.phase == Some(Phase::Running)
        })
        .await;
    let second = ns.api::<Pod>().get("expiring").await.expect("the new pod");
    assert_ne!(second.uid(), first.uid(), "{again:?}");
    operator.stop().await;
}
