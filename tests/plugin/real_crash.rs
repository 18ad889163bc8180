//! `why` and `history` on a crash the real operator recorded.

use serde_json::json;

use crate::support;
use crate::{assert_says, plugin, setup};

#[tokio::test]
async fn why_reads_a_real_crash_from_the_operator() {
    let ns = setup().await;
    let _operator = support::Operator::start(&ns.name).await;
    ns.create_policy(
        "default",
        json!({ "backoff": { "type": "Linear", "initialDelay": "10m", "maxDelay": "30m", "jitter": 0 } }),
    )
    .await;
    ns.create_agent("real", json!({})).await;
    ns.wait_running("real-1").await;
    ns.terminate("real-1", 7, "Error", "the planner lost its context")
        .await;
    ns.wait_status("real", "backing off", |s| {
        s.phase == Some(agent_supervisor::api::Phase::BackingOff)
    })
    .await;
    let why = plugin(&ns, &["why", "real"]);
    assert_says(
        &why,
        &[
            "Agent real crashed: Error, exit code 7",
            "\"the planner lost its context\"",
            "The operator restarts it in ",
            "after a backoff of 10m, as attempt 2",
            "kubectl agent restart real",
        ],
    );
    assert!(
        why.contains("restarts it in 9m") || why.contains("restarts it in 10m"),
        "{why}"
    );
    let history = plugin(&ns, &["history", "real"]);
    let line = history.lines().nth(2).unwrap_or_default();
    assert!(
        line.starts_with('1') && line.contains("Error (exit 7)") && line.contains("pending"),
        "{history}"
    );
}
