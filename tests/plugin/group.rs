//! `why` and `tree` on the members of an AgentGroup.

use serde_json::{Value, json};

use crate::support;
use crate::{
    agent_with, assert_says, at, condition, failure, group_with, plugin, plugin_with, setup,
};

#[tokio::test]
async fn group_members_are_explained_and_drawn_as_a_tree() {
    let ns = setup().await;
    group_with(
        &ns,
        "crew",
        json!({ "strategy": "OneForAll", "members": [{ "agent": "planner" }, { "agent": "tools" }] }),
        json!({
            "phase": "Restarting", "ready": "1/2", "restartCount": 1,
            "members": [
                { "name": "planner", "kind": "Agent", "phase": "Running" },
                { "name": "tools", "kind": "Agent", "phase": "BackingOff", "waitingFor": "planner" }
            ]
        }),
    )
    .await;
    agent_with(
        &ns,
        "planner",
        json!({}),
        json!({
            "phase": "Running", "podName": "planner-1", "attempt": 1, "group": { "name": "crew" },
            "conditions": [condition("Ready", "True", "PodReady", "pod planner-1", -60)],
        }),
    )
    .await;
    agent_with(
        &ns,
        "tools",
        json!({}),
        json!({
            "phase": "BackingOff", "attempt": 2, "restartCount": 1, "consecutiveFailures": 1,
            "nextRestartAt": at(-2), "group": { "name": "crew" },
            "lastFailure": failure("Error", 3, "tool server crashed", 10),
            "conditions": [condition("Ready", "False", "WaitingForGroup",
                "waiting for planner to be running (group crew starts its members in order)", -10)],
        }),
    )
    .await;
    agent_with(
        &ns,
        "loner",
        json!({}),
        json!({ "phase": "Pending", "attempt": 1, "podName": "loner-1" }),
    )
    .await;

    let why = plugin(&ns, &["why", "tools"]);
    assert_says(
        &why,
        &[
            "Agent tools crashed: Error, exit code 3",
            "Its group decides when: waiting for planner to be running (group crew starts its members in order).",
            "It is a member of AgentGroup crew (one-for-all: a crash restarts every member)",
        ],
    );

    let tree = plugin(&ns, &["tree"]);
    let lines: Vec<&str> = tree.lines().collect();
    assert!(
        lines[0].starts_with("group/crew  OneForAll  Restarting  ready 1/2  1 restart"),
        "{tree}"
    );
    assert!(
        lines[1].starts_with("├── planner  Running  0 restarts"),
        "{tree}"
    );
    assert!(
        lines[2].starts_with("└── tools  BackingOff  1 restart"),
        "{tree}"
    );
    assert!(lines[2].ends_with("(waiting for planner)"), "{tree}");
    assert!(tree.contains("Not in any group (1): loner"), "{tree}");

    let json: Value = serde_json::from_str(&plugin(&ns, &["tree", "crew", "-o", "json"])).unwrap();
    assert_eq!(json[0]["name"], "crew");
    assert_eq!(json[0]["members"][1]["name"], "tools");
    assert_eq!(json[0]["members"][1]["phase"], "BackingOff");

    let run = plugin_with(support::kubeconfig(), &["tree", "nope", "-n", &ns.name]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("agentgroup \"nope\" not found"),
        "{}",
        run.stderr
    );
}
