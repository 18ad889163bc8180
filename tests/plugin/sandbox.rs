//! A supervised Sandbox as the plugin shows it: `list -o wide` names it, `history` says whose
//! attempts they are, `why` says what blocks it and what to change.

use serde_json::json;

use crate::{agent_with, assert_says, condition, failure, plugin, setup};

#[tokio::test]
async fn the_plugin_shows_the_sandbox_an_agent_supervises() {
    let ns = setup().await;
    let n = ns.name.as_str();
    agent_with(
        &ns,
        "boxed",
        json!({ "sandboxRef": { "name": "research-box" } }),
        json!({
            "phase": "BackingOff", "podName": "research-box", "attempt": 2, "restartCount": 1,
            "consecutiveFailures": 2,
            "lastFailure": failure("Error", 3, "search tool: timed out", 60),
            "conditions": [condition("Ready", "False", "BackingOff", "restart scheduled", -60)],
        }),
    )
    .await;
    let list = plugin(&ns, &["list", "-o", "wide"]);
    assert_says(&list, &["boxed", "sandbox/research-box"]);
    let rows: serde_json::Value =
        serde_json::from_str(&plugin(&ns, &["list", "-o", "json"])).expect("JSON");
    assert_eq!(rows[0]["sandbox"], "research-box", "{rows}");
    let history = plugin(&ns, &["history", "boxed"]);
    assert_says(
        &history,
        &["Agent boxed (Sandbox research-box): BackingOff, attempt 2"],
    );

    let message = "Sandbox loose's pod template has restartPolicy Always: the kubelet would restart its containers in place, unseen; set spec.podTemplate.spec.restartPolicy: Never";
    agent_with(
        &ns,
        "unsupervised",
        json!({ "sandboxRef": { "name": "loose" } }),
        json!({
            "conditions": [condition("Ready", "False", "SandboxRestartPolicy", message, -30)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "unsupervised"]);
    assert_says(
        &why,
        &[
            "Agent unsupervised supervises Sandbox loose: Sandbox loose's pod template has restartPolicy Always",
            "starts no attempt until that changes",
            "Set spec.podTemplate.spec.restartPolicy: Never in Sandbox loose",
            &format!("kubectl edit sandbox loose -n {n}"),
        ],
    );
}
