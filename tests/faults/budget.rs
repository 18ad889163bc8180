//! A spend budget: a crash loop whose attempts each say they spent 0.40 stops at a 1.20 budget
//! with the operator's own Economic shutdown, and resumes when the budget is raised. An operator
//! killed between any two writes must count every attempt's spend once (never twice, never
//! lost), make no pod after the money is gone, and end as an uninterrupted run does.

use agent_supervisor::api::{Phase, RestartPolicy};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::normal::End;
use crate::scenarios::Scenario;
use crate::steps::Run;

pub const BUDGET: Scenario = Scenario {
    name: "budget-spent-raised",
    agents: &["burner"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(budget(run)),
    expect: spent_once,
};

/// The spend is every attempt's, each once: 3 × 0.40 before the stop, then attempt 4 runs.
fn spent_once(end: &End) -> Vec<String> {
    let (_, agent) = &end.agents[0];
    let mut wrong = Vec::new();
    if agent.spend != Some((Some("1.20".into()), None)) {
        wrong.push(format!("spend {:?}, want 1.20", agent.spend));
    }
    if agent.pods_created.len() != 4 {
        wrong.push(format!("pods {:?}, want four", agent.pods_created));
    }
    wrong
}

/// Restarted at once, no breaker, no limit: only the budget stops it.
fn policy(max_cost: &str) -> serde_json::Value {
    json!({
        "backoff": { "type": "Immediate" },
        "circuitBreaker": { "failureThreshold": 0 },
        "limits": { "maxRestarts": 0 },
        "budget": { "maxCost": max_cost },
    })
}

async fn budget(run: &Run) {
    run.create_policy(policy("1.20")).await;
    run.create_agent(json!({})).await;
    run.focus();
    for attempt in 1..=3 {
        run.end(attempt, 1, "Error", r#"{"spend": {"cost": "0.40"}}"#)
            .await;
    }
    run.until("shut down by its budget", |s| {
        s.phase == Some(Phase::Shutdown)
            && s.shutdown.as_ref().and_then(|s| s.source.as_deref()) == Some("Budget")
    })
    .await;
    run.ns
        .api::<RestartPolicy>()
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "budget": { "maxCost": "2.00" } } })),
        )
        .await
        .expect("raise the budget");
    run.running(4).await;
    run.until("resumed", |s| s.shutdown.is_none()).await;
}
