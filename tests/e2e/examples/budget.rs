//! examples/budget.yaml: a crash loop whose attempts each report 0.40 of spend is stopped by its
//! policy's 1.00 budget after its third attempt (an Economic shutdown from the budget, no fourth
//! pod), warned at half of it, and resumes when the budget is raised, as its comment says.

use std::time::Duration;

use agent_supervisor::api::{Phase, RestartPolicy};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{apply, setup};

#[tokio::test]
async fn a_crash_loop_stops_when_its_budget_is_spent_and_resumes_when_it_is_raised() {
    let (ns, _operator) = setup().await;
    apply(&ns, "budget.yaml").await;
    let agent = "metered-agent";
    let s = ns
        .wait_status_for(
            Duration::from_secs(90),
            agent,
            "stopped by its budget",
            // The phase too: the shutdown field is written a moment before the rest of the
            // status (`controller::status::record`), the attempts it ended with among the rest.
            |s| {
                s.phase == Some(Phase::Shutdown)
                    && (s.shutdown.as_ref()).is_some_and(|d| d.source.as_deref() == Some("Budget"))
            },
        )
        .await;
    let shutdown = s.shutdown.clone().unwrap();
    assert_eq!(
        shutdown.reason.as_deref(),
        Some("spend budget exhausted: 1.20 of 1.00"),
        "{s:?}"
    );
    assert_eq!(s.attempt, 3, "stopped after its third attempt: {s:?}");
    let spend = s.spend.clone().expect("the spend kept");
    assert_eq!(
        (spend.cost.as_deref(), spend.tokens),
        (Some("1.20"), Some(36000))
    );
    let each: Vec<_> = (s.restart_history.iter())
        .map(|r| r.spend.as_ref().and_then(|p| p.cost.clone()))
        .collect();
    // Each crash recorded with what it spent, the third with no restart after it.
    let zero_forty = Some("0.40".to_string());
    assert_eq!(each, [zero_forty.clone(), zero_forty.clone(), zero_forty]);
    assert!(s.restart_history[0].restarted_at.is_none(), "{s:?}");
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == "BudgetLow" && c.status == "True"),
        "warned at half the budget: {:?}",
        s.conditions
    );

    // No fourth pod while the budget is spent; raising it resumes the agent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ns.status(agent).await.attempt, 3, "no pod after exhaustion");
    let patch = json!({ "spec": { "budget": { "maxCost": "2.00" } } });
    ns.api::<RestartPolicy>()
        .patch("metered", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("raise the budget");
    let s = ns
        .wait_status_for(Duration::from_secs(60), agent, "resumed", |s| {
            s.attempt >= 4
        })
        .await;
    assert!(s.shutdown.is_none(), "the budget's shutdown lifted: {s:?}");
    assert_ne!(s.phase, Some(Phase::Shutdown));
}
