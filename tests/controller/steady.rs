//! Steady state is silent: when nothing changes, the operator writes nothing.

use std::time::Duration;

use agent_supervisor::api::Phase;
use serde_json::json;

use crate::setup;
use crate::support::{OPERATOR_USER_AGENT, TestNamespace, eventually, kubeconfig};

const AGENTS: usize = 50;
const QUIET: Duration = Duration::from_secs(60);

/// Write requests the operator made in `namespace` at or after `since`, by verb, from the API
/// server's audit log.
fn operator_writes(namespace: &str, since: jiff::Timestamp) -> Vec<String> {
    let log = kubeconfig()
        .parent()
        .expect("kubeconfig has a directory")
        .join("logs/audit.log");
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| {
        panic!(
            "this test counts requests in the local control plane's audit log {}: {e}",
            log.display()
        )
    });
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| {
            e["userAgent"] == OPERATOR_USER_AGENT && e["objectRef"]["namespace"] == namespace
        })
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .filter(|e| {
            e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                >= Some(since)
        })
        .map(|e| {
            format!(
                "{} {}/{}",
                e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"]
            )
        })
        .collect()
}

#[tokio::test]
async fn fifty_healthy_agents_cause_no_writes_for_a_minute() {
    let (ns, _operator) = setup().await;
    let started = jiff::Timestamp::now();
    for i in 0..AGENTS {
        ns.create_agent(&format!("quiet-{i}"), json!({ "heartbeat": null }))
            .await;
    }
    all_running(&ns).await;
    // The operator did write while starting them: the audit log sees it.
    assert!(
        !operator_writes(&ns.name, started).is_empty(),
        "the audit log shows the operator's writes"
    );

    // Let the last status writes and their echoes settle, then listen.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let quiet_from = jiff::Timestamp::now();
    tokio::time::sleep(QUIET).await;
    // The audit log is written asynchronously: give it a moment to catch up.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = operator_writes(&ns.name, quiet_from);
    eprintln!(
        "steady state: {} write requests by the operator in {QUIET:?} with {AGENTS} healthy agents",
        writes.len()
    );
    assert!(
        writes.is_empty(),
        "the operator wrote in steady state: {writes:?}"
    );
}

async fn all_running(ns: &TestNamespace) {
    let api = ns.api::<agent_supervisor::api::Agent>();
    eventually(Duration::from_secs(120), "all agents Running", || {
        let api = api.clone();
        async move {
            let agents = api.list(&Default::default()).await.ok()?;
            let running = agents
                .items
                .iter()
                .filter(|a| a.status.as_ref().and_then(|s| s.phase) == Some(Phase::Running))
                .count();
            (running == AGENTS).then_some(())
        }
    })
    .await;
}
