//! Steady state is silent: when nothing changes, the operator writes nothing.

use std::time::Duration;

use agent_supervisor::api::Phase;
use serde_json::json;

use crate::setup;
use crate::support::{self, OPERATOR_USER_AGENT, TestNamespace, eventually};

const AGENTS: usize = 50;
const QUIET: Duration = Duration::from_secs(60);

/// Write requests the operator made in `namespace` at or after `since`, by verb, from the API
/// server's audit log.
fn operator_writes(namespace: &str, since: jiff::Timestamp) -> Vec<String> {
    operator_write_log(namespace, since)
        .into_iter()
        .map(|(_, write)| write)
        .collect()
}

/// When the operator wrote in `namespace` at or after `since`.
fn operator_write_times(namespace: &str, since: jiff::Timestamp) -> Vec<jiff::Timestamp> {
    operator_write_log(namespace, since)
        .into_iter()
        .map(|(at, _)| at)
        .collect()
}

/// (time, "verb resource/name") of each write the operator made in `namespace` at or after
/// `since`.
fn operator_write_log(namespace: &str, since: jiff::Timestamp) -> Vec<(jiff::Timestamp, String)> {
    let log = support::audit_log();
    assert!(
        log.exists(),
        "this test counts requests in the local control plane's audit log {}",
        log.display()
    );
    // Only what was written since the test started (the log holds every test's requests).
    let text = support::audit_log_since(log_start());
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
        .filter_map(|e| {
            let at = e["requestReceivedTimestamp"]
                .as_str()?
                .parse::<jiff::Timestamp>()
                .ok()
                .filter(|at| *at >= since)?;
            let write = format!(
                "{} {}/{}",
                e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"]
            );
            Some((at, write))
        })
        .collect()
}

/// Where the audit log ended when this test began.
fn log_start() -> support::AuditPosition {
    static START: std::sync::OnceLock<support::AuditPosition> = std::sync::OnceLock::new();
    *START.get_or_init(support::audit_log_position)
}

#[tokio::test]
async fn fifty_healthy_agents_cause_no_writes_for_a_minute() {
    log_start();
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

    // The operator has finished starting them once it has written its last word on each (Ready)
    // and then stays silent for a while: only then listen.
    all_ready(&ns).await;
    let quiet_from = settled(&ns, started).await;
    tokio::time::sleep(QUIET).await;
    // Everything the operator wrote until now is in the audit log.
    support::audit_log_caught_up(&ns).await;
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

/// Waits until every agent's status says Ready=True for its current generation: the last
/// status the operator writes while starting an agent.
async fn all_ready(ns: &TestNamespace) {
    let api = ns.api::<agent_supervisor::api::Agent>();
    eventually(Duration::from_secs(120), "all agents Ready", || {
        let api = api.clone();
        async move {
            let agents = api.list(&Default::default()).await.ok()?;
            let ready = agents
                .items
                .iter()
                .filter(|a| {
                    a.status.as_ref().is_some_and(|s| {
                        s.observed_generation == a.metadata.generation
                            && s.conditions
                                .iter()
                                .any(|c| c.type_ == "Ready" && c.status == "True")
                    })
                })
                .count();
            (ready == AGENTS).then_some(())
        }
    })
    .await;
}

/// How long the operator must have written nothing before the test counts it as settled.
const SETTLE: Duration = Duration::from_secs(5);

/// Waits until the audit log, caught up to the present, shows no write by the operator for
/// `SETTLE` (its last Events and status writes for the starting agents are done), and returns
/// the time from which it was quiet. An operator that never stops writing never settles.
async fn settled(ns: &TestNamespace, started: jiff::Timestamp) -> jiff::Timestamp {
    let settle = jiff::SignedDuration::try_from(SETTLE).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        support::audit_log_caught_up(ns).await;
        let now = jiff::Timestamp::now();
        let last = operator_write_times(&ns.name, started).into_iter().max();
        let quiet_since = last.unwrap_or(started);
        if now.duration_since(quiet_since) >= settle {
            // From just after the last write (the log has microseconds).
            return quiet_since + jiff::SignedDuration::from_micros(1);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the operator never stopped writing for {SETTLE:?} after starting {AGENTS} agents"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
