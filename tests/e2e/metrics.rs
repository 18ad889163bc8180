//! After a scripted scenario, /metrics counts exactly what happened.

use agent_supervisor::api::Phase;
use serde_json::json;

use crate::process::OperatorProcess;
use crate::support::{self, TestNamespace};

/// The value of the sample `name{labels}` (labels exactly as exported), or 0 when absent.
pub fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

#[tokio::test]
async fn metrics_match_a_scripted_scenario() {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let kubeconfig = support::kubeconfig().to_path_buf();
    let mut operator = OperatorProcess::start(
        &kubeconfig,
        "metrics-test",
        &[&format!("--namespaces={}", ns.name), "--leader-elect=false"],
    );
    operator.ready().await;

    ns.create_policy(
        "p",
        json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 2, "openDuration": "1h" } }),
    )
    .await;
    for name in ["twice", "oom", "done", "idle"] {
        ns.create_agent(name, json!({ "restartPolicyRef": { "name": "p" } }))
            .await;
        ns.wait_running(&format!("{name}-1")).await;
    }
    // twice: crashes, is restarted, crashes again and trips the breaker.
    ns.terminate("twice-1", 1, "Error", "boom").await;
    ns.wait_running("twice-2").await;
    // Recovered (it counts in time_to_recovery) once the operator has seen it run: on a loaded
    // machine it may otherwise see only the second crash.
    ns.wait_status("twice", "Running again", |s| {
        s.phase == Some(Phase::Running) && s.attempt == 2
    })
    .await;
    ns.terminate("twice-2", 1, "Error", "boom").await;
    ns.wait_status("twice", "CircuitOpen", |s| {
        s.phase == Some(Phase::CircuitOpen)
    })
    .await;
    // oom: killed for memory, restarted.
    ns.terminate("oom-1", 137, "OOMKilled", "").await;
    ns.wait_running("oom-2").await;
    ns.wait_status("oom", "Running again", |s| {
        s.phase == Some(Phase::Running) && s.attempt == 2
    })
    .await;
    // done: a voluntary shutdown.
    ns.terminate("done-1", 0, "Completed", "").await;
    ns.wait_status("done", "Shutdown", |s| s.phase == Some(Phase::Shutdown))
        .await;
    ns.wait_status("idle", "Running", |s| s.phase == Some(Phase::Running))
        .await;

    let expect = [
        (
            r#"agent_supervisor_restarts_total{reason="Error",class="Transient",trigger="Failure"}"#,
            1.0,
        ),
        (
            r#"agent_supervisor_restarts_total{reason="OOMKilled",class="Transient",trigger="Failure"}"#,
            1.0,
        ),
        (
            r#"agent_supervisor_crashes_total{reason="Error",class="Transient"}"#,
            2.0,
        ),
        (
            r#"agent_supervisor_crashes_total{reason="OOMKilled",class="Transient"}"#,
            1.0,
        ),
        (
            r#"agent_supervisor_crashes_total{reason="Completed",class="Shutdown"}"#,
            1.0,
        ),
        ("agent_supervisor_breaker_trips_total", 1.0),
        (r#"agent_supervisor_agents{phase="CircuitOpen"}"#, 1.0),
        (r#"agent_supervisor_agents{phase="Running"}"#, 2.0),
        (r#"agent_supervisor_agents{phase="Shutdown"}"#, 1.0),
        (r#"agent_supervisor_agents{phase="Stopped"}"#, 0.0),
        (r#"agent_supervisor_breakers{state="Open"}"#, 1.0),
        (r#"agent_supervisor_breakers{state="Closed"}"#, 3.0),
        ("agent_supervisor_time_to_recovery_seconds_count", 2.0),
        ("agent_supervisor_restart_delay_seconds_count", 3.0),
    ];
    // The operator updates its metrics just after it writes the status the test waited for:
    // scrape until they agree (its counters only grow, so one that went past never agrees).
    let deadline = tokio::time::Instant::now() + support::kubelet::REACT;
    let m = loop {
        let m = operator.metrics().await;
        let wrong: Vec<String> = expect
            .iter()
            .filter(|(series, want)| sample(&m, series) != *want)
            .map(|(series, want)| format!("{series} = {} (want {want})", sample(&m, series)))
            .collect();
        if wrong.is_empty() {
            break m;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "metrics differ from what happened:\n{}\n\n{m}",
            wrong.join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert!(sample(&m, "agent_supervisor_reconcile_duration_seconds_count") > 0.0);
    // Every reason a reconcile can fail for is exported, from zero.
    for reason in agent_supervisor::controller::Error::REASONS {
        let series = format!("agent_supervisor_reconcile_errors_total{{reason=\"{reason}\"}} ");
        assert!(m.contains(&series), "{series}is not exported:\n{m}");
    }
    assert!(!m.contains("agent=\""), "no per-agent labels by default");
    // The dashboard and the alerts query only what this scrape exports.
    crate::dashboard::check_against(&m);
}
