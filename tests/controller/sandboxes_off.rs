//! Sandboxes not watched (`--sandboxes=false`, as the chart runs it by default, or agent-sandbox
//! not installed: the same path): an Agent with `sandboxRef` says why nothing is supervised, and
//! every other Agent runs as before.

use agent_supervisor::api::Phase;
use agent_supervisor::controller::Config;
use serde_json::json;

use crate::support::{Operator, TestNamespace};

#[tokio::test]
async fn without_sandboxes_a_sandbox_agent_says_why_and_the_rest_run_as_before() {
    let ns = TestNamespace::new().await;
    crate::support::install_crds(&ns.client).await;
    let config = Config {
        sandboxes: false,
        ..crate::support::operator::prompt(&ns.name)
    };
    let operator = Operator::start_with_config(Operator::admin_client().await, config);
    ns.create_agent("boxed", json!({ "sandboxRef": { "name": "box" } }))
        .await;
    ns.create_agent("plain", json!({})).await;

    let status = ns
        .wait_status("boxed", "Sandboxes unavailable said", |s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "SandboxesUnavailable")
        })
        .await;
    assert_eq!(status.attempt, 0, "nothing started: {status:?}");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert!(ready.message.contains("--sandboxes"), "{}", ready.message);
    let note = ns.wait_event("boxed", "SandboxesUnavailable").await;
    assert!(note.contains("agent-sandbox"), "{note}");

    ns.wait_running("plain-1").await;
    ns.wait_status("plain", "running", |s| s.phase == Some(Phase::Running))
        .await;
    operator.stop().await;
}
