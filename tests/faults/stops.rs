//! The scenarios of an agent that stops and resumes: a shutdown it says or someone else writes,
//! and attempts resumed from checkpoints until one is poisoned.

use agent_supervisor::api::Phase;
use serde_json::json;

use crate::normal::End;
use crate::scenarios::{Scenario, as_waited, fast_policy};
use crate::steps::Run;

pub const SHUTDOWN_MESSAGE: Scenario = Scenario {
    name: "shutdown-termination-message",
    agents: &["spender"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(shutdown_message(run)),
    expect: as_waited,
};

/// The agent says it is out of budget: left alone; cleared by a person: resumed.
async fn shutdown_message(run: &Run) {
    run.create_policy(fast_policy()).await;
    run.create_agent(json!({})).await;
    run.end(
        1,
        1,
        "Error",
        r#"{"shutdown":"economic","reason":"budget exhausted"}"#,
    )
    .await;
    run.until("Shutdown", |s| {
        s.phase == Some(Phase::Shutdown) && s.shutdown.is_some()
    })
    .await;
    run.patch_status(json!({ "status": { "shutdown": null } }))
        .await;
    run.running(2).await;
}

pub const SHUTDOWN_EXTERNAL: Scenario = Scenario {
    name: "shutdown-by-status-patch",
    agents: &["managed"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(shutdown_external(run)),
    expect: as_waited,
};

/// An economy service shuts the agent down; its pod then crashes (not the operator's business
/// while shut down); the shutdown is cleared: supervision resumes with the next attempt.
async fn shutdown_external(run: &Run) {
    run.create_policy(fast_policy()).await;
    run.create_agent(json!({})).await;
    run.running(1).await;
    run.patch_status(json!({ "status": { "shutdown": {
        "type": "Economic", "reason": "monthly budget spent" } } }))
        .await;
    run.until("Shutdown", |s| s.phase == Some(Phase::Shutdown))
        .await;
    let current = run.status().await.attempt;
    run.ns
        .terminate(&run.pod(current), 1, "Error", "crash while shut down")
        .await;
    run.patch_status(json!({ "status": { "shutdown": null } }))
        .await;
    run.running(2).await;
}

pub const CHECKPOINTS: Scenario = Scenario {
    name: "checkpoint-resume-poison",
    agents: &["resumer"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(checkpoints(run)),
    expect: resumed_and_poisoned,
};

/// Attempt 1 reports two checkpoints on its Lease and crashes; attempts 2 and 3 resume from the
/// newer one and crash before reporting anything: it is poisoned, and attempt 4 resumes from
/// the older one.
async fn checkpoints(run: &Run) {
    run.create_policy(json!({
        "backoff": { "type": "Immediate" },
        "circuitBreaker": { "failureThreshold": 0 },
        "resetAfter": "10m",
        "checkpoints": { "maxFailures": 2 },
    }))
    .await;
    // A long heartbeat: the story reports when it likes and is never taken for hung.
    run.create_agent(json!({ "heartbeat": { "timeout": "5m" } }))
        .await;
    run.running(1).await;
    for (progress, checkpoint) in [("10", "step-1"), ("20", "step-2")] {
        run.report(1, progress, checkpoint).await;
        run.until(&format!("{checkpoint} recorded"), |s| {
            s.checkpoints
                .first()
                .is_some_and(|c| c.reference == checkpoint)
        })
        .await;
    }
    for attempt in 1..=3 {
        run.end(attempt, 1, "Error", "boom").await;
    }
    run.running(4).await;
    run.until("step-2 poisoned", |s| {
        s.checkpoints.first().is_some_and(|c| c.poisoned)
    })
    .await;
}

fn resumed_and_poisoned(end: &End) -> Vec<String> {
    let agent = end.agent("resumer");
    let mut wrong = Vec::new();
    let marks = vec![
        ("step-2".to_string(), 1, Some(20), 2, true),
        ("step-1".to_string(), 1, Some(10), 0, false),
    ];
    if agent.checkpoints != marks {
        wrong.push(format!("checkpoints {:?}", agent.checkpoints));
    }
    if agent.resumed_from.as_deref() != Some("step-1") {
        wrong.push(format!("attempt 4 resumed from {:?}", agent.resumed_from));
    }
    let resumed: Vec<_> = agent
        .history
        .iter()
        .map(|r| (r.attempt, r.checkpoint.as_deref()))
        .collect();
    if resumed != [(3, Some("step-2")), (2, Some("step-2")), (1, None)] {
        wrong.push(format!("history resumed from {resumed:?}"));
    }
    wrong
}
