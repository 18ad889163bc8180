//! `restart`, `reset`, `suspend` and `resume`: the changes each makes to the Agent.

use agent_supervisor::api::Agent;
use serde_json::json;

use crate::{agent_with, plugin, setup};

#[tokio::test]
async fn actions_write_what_kubectl_would() {
    let ns = setup().await;
    agent_with(
        &ns,
        "a",
        json!({}),
        json!({ "phase": "Running", "attempt": 1, "podName": "a-1" }),
    )
    .await;
    let get = || async { ns.api::<Agent>().get("a").await.unwrap() };
    let annotation = |agent: &Agent, key: &str| {
        agent
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key).cloned())
    };

    let out = plugin(&ns, &["restart", "a"]);
    assert_eq!(out, "agent/a restart requested\n");
    let first = annotation(&get().await, "supervisor.dev/restart-requested-at")
        .expect("restart annotation");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    plugin(&ns, &["restart", "a"]);
    let second = annotation(&get().await, "supervisor.dev/restart-requested-at").unwrap();
    assert_ne!(first, second, "each request is a new value, acted on once");

    plugin(&ns, &["reset", "a"]);
    assert!(annotation(&get().await, "supervisor.dev/reset-requested-at").is_some());

    let out = plugin(&ns, &["suspend", "a"]);
    assert!(out.starts_with("agent/a suspended"), "{out}");
    assert!(get().await.spec.suspend);
    let out = plugin(&ns, &["restart", "a"]);
    assert!(
        out.contains("it is suspended"),
        "a restart of a suspended agent says it waits:\n{out}"
    );
    plugin(&ns, &["resume", "a"]);
    assert!(!get().await.spec.suspend);
}
