//! Spend, as the agent reports it: on its Lease while it runs, in its termination message when it
//! ends; each attempt's last report counted once, kept across restarts, and a report going
//! backwards set aside and said.

use serde_json::json;

use crate::{fast_policy, setup_prompt};
use kube::api::{Patch, PatchParams};

#[tokio::test]
async fn each_attempts_last_report_is_counted_once_across_restarts() {
    let (ns, _operator) = setup_prompt().await;
    ns.create_policy("p", fast_policy("1s")).await;
    ns.create_agent(
        "spender",
        json!({ "restartPolicyRef": { "name": "p" }, "heartbeat": { "timeout": "5m" } }),
    )
    .await;
    ns.wait_running("spender-1").await;
    ns.report_spend(
        "spender",
        "spender-1",
        r#"{"cost": "0.10", "tokens": 1000}"#,
    )
    .await;
    ns.wait_status("spender", "the first report counted", |s| {
        s.spend.as_ref().and_then(|s| s.cost.as_deref()) == Some("0.10")
    })
    .await;
    // It grows; then the attempt ends, its last words saying more than its Lease did.
    ns.report_spend(
        "spender",
        "spender-1",
        r#"{"cost": "0.30", "tokens": 3000}"#,
    )
    .await;
    ns.wait_status("spender", "what it grew by", |s| {
        s.spend.as_ref().and_then(|s| s.tokens) == Some(3000)
    })
    .await;
    ns.terminate(
        "spender-1",
        1,
        "Error",
        r#"{"retryAfter": "1s", "spend": {"cost": "0.40", "tokens": 4000}}"#,
    )
    .await;
    ns.wait_running("spender-2").await;
    // The next attempt: the Lease still holds attempt 1's report, not its own: nothing counted
    // twice; then its own reports add to the total.
    let between = ns
        .wait_status("spender", "attempt 1 counted", |s| s.attempt == 2)
        .await;
    let first = between.spend.expect("spend kept");
    assert_eq!(
        (first.cost.as_deref(), first.tokens),
        (Some("0.40"), Some(4000))
    );
    ns.report_spend("spender", "spender-2", r#"{"cost": "0.05"}"#)
        .await;
    let status = ns
        .wait_status("spender", "attempt 2's report", |s| {
            s.spend.as_ref().and_then(|s| s.cost.as_deref()) == Some("0.45")
        })
        .await;
    let spend = status.spend.unwrap();
    assert_eq!(spend.tokens, Some(4000));
    assert_eq!(spend.current.attempt, 2);
    assert_eq!(spend.since, first.since, "counted since the first report");

    // Going backwards within the attempt: set aside, and said once.
    ns.report_spend("spender", "spender-2", r#"{"cost": "0.01"}"#)
        .await;
    let note = ns.wait_event("spender", "ReportIgnored").await;
    assert!(note.contains("0.01") && note.contains("0.05"), "{note}");
    let status = ns.status("spender").await;
    assert_eq!(status.spend.unwrap().cost.as_deref(), Some("0.45"));
}

/// The issue's case: a crash loop reporting 0.40 an attempt under a 2.00 budget stops after its
/// fifth attempt with an Economic shutdown from the budget and never gets a sixth pod; raising
/// the budget to 4.00 resumes it.
#[tokio::test]
async fn a_crash_loop_stops_when_its_budget_is_spent_and_resumes_when_it_is_raised() {
    let (ns, _operator) = setup_prompt().await;
    let pods = ns.record_pods().await;
    let policy = |max: &str| {
        json!({
            "backoff": { "type": "Immediate" },
            "circuitBreaker": { "failureThreshold": 0 },
            "limits": { "maxRestarts": 0 },
            "budget": { "maxCost": max },
        })
    };
    ns.create_policy("p", policy("2.00")).await;
    ns.create_agent("burner", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    for attempt in 1..=5 {
        let pod = format!("burner-{attempt}");
        ns.wait_running(&pod).await;
        ns.terminate(&pod, 1, "Error", r#"{"spend": {"cost": "0.40"}}"#)
            .await;
    }
    let status = ns
        .wait_status("burner", "shut down by its budget", |s| {
            s.phase == Some(agent_supervisor::api::Phase::Shutdown)
        })
        .await;
    let shutdown = status.shutdown.expect("a shutdown");
    assert_eq!(shutdown.kind, agent_supervisor::api::ShutdownType::Economic);
    assert_eq!(shutdown.source.as_deref(), Some("Budget"));
    assert_eq!(
        shutdown.reason.as_deref(),
        Some("spend budget exhausted: 2.00 of 2.00")
    );
    assert_eq!(status.spend.unwrap().cost.as_deref(), Some("2.00"));
    ns.wait_event("burner", "BudgetExhausted").await;
    ns.wait_event("burner", "BudgetLow").await;
    // Made to decide again on everything as it is: still no sixth pod.
    ns.decided_again("burner").await;
    let made: Vec<String> = pods
        .all()
        .into_iter()
        .filter_map(|(_, p)| p.metadata.name)
        .collect();
    assert!(!made.contains(&"burner-6".to_string()), "pods: {made:?}");

    // Raised to 4.00: it resumes with attempt 6.
    ns.api::<agent_supervisor::api::RestartPolicy>()
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "budget": { "maxCost": "4.00" } } })),
        )
        .await
        .expect("raise the budget");
    ns.wait_running("burner-6").await;
    let status = ns
        .wait_status("burner", "resumed", |s| {
            s.shutdown.is_none() && s.attempt == 6
        })
        .await;
    assert_eq!(status.spend.unwrap().cost.as_deref(), Some("2.00"));
}

/// A group's budget: its members' spend summed; used up, every member shuts down (even one
/// that spent nothing), and raising it resumes them all.
#[tokio::test]
async fn a_groups_budget_stops_all_its_members_and_raising_it_resumes_them() {
    let (ns, _operator) = setup_prompt().await;
    ns.create_policy(
        "p",
        json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    for name in ["writer", "editor", "idle"] {
        ns.create_agent(name, json!({ "restartPolicyRef": { "name": "p" } }))
            .await;
    }
    let members: Vec<_> = ["writer", "editor", "idle"]
        .iter()
        .map(|a| json!({ "agent": a }))
        .collect();
    ns.create_group(
        "team",
        json!({ "members": members, "budget": { "maxCost": "1.00" } }),
    )
    .await;
    ns.wait_running("writer-1").await;
    ns.terminate("writer-1", 1, "Error", r#"{"spend": {"cost": "0.60"}}"#)
        .await;
    ns.wait_running("writer-2").await;
    ns.wait_running("editor-1").await;
    ns.terminate("editor-1", 1, "Error", r#"{"spend": {"cost": "0.50"}}"#)
        .await;
    for name in ["writer", "editor", "idle"] {
        let status = ns
            .wait_status(name, "shut down by the group's budget", |s| {
                s.phase == Some(agent_supervisor::api::Phase::Shutdown)
            })
            .await;
        let shutdown = status.shutdown.expect("a shutdown");
        assert_eq!(shutdown.source.as_deref(), Some("GroupBudget"), "{name}");
        assert_eq!(shutdown.kind, agent_supervisor::api::ShutdownType::Economic);
        assert!(
            shutdown.reason.unwrap_or_default().contains("1.10 of 1.00"),
            "{name}"
        );
    }
    let group = ns.group_status("team").await;
    assert_eq!(group.spend.and_then(|s| s.cost).as_deref(), Some("1.10"));
    ns.wait_group_event("team", "BudgetExhausted").await;

    ns.api::<agent_supervisor::api::AgentGroup>()
        .patch(
            "team",
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "budget": { "maxCost": "5.00" } } })),
        )
        .await
        .expect("raise the group's budget");
    for name in ["writer", "editor", "idle"] {
        ns.wait_status(name, "resumed", |s| {
            s.shutdown.is_none() && s.phase == Some(agent_supervisor::api::Phase::Running)
        })
        .await;
    }
}

/// A group's budget window: once it has run, the count begins again and the members resume,
/// with no change to wake the group but the window's end.
#[tokio::test]
async fn a_groups_budget_window_lets_its_members_resume_once_it_has_moved_on() {
    let (ns, _operator) = setup_prompt().await;
    ns.create_policy("p", json!({ "backoff": { "type": "Immediate" } }))
        .await;
    for name in ["scout", "idle"] {
        ns.create_agent(name, json!({ "restartPolicyRef": { "name": "p" } }))
            .await;
    }
    ns.create_group(
        "crew",
        json!({
            "members": [{ "agent": "scout" }, { "agent": "idle" }],
            "budget": { "maxCost": "1.00", "window": "20s" },
        }),
    )
    .await;
    ns.wait_running("scout-1").await;
    ns.terminate("scout-1", 1, "Error", r#"{"spend": {"cost": "1.25"}}"#)
        .await;
    for name in ["scout", "idle"] {
        let status = ns
            .wait_status(name, "shut down by the group's budget", |s| {
                s.phase == Some(agent_supervisor::api::Phase::Shutdown)
            })
            .await;
        let source = status.shutdown.and_then(|s| s.source);
        assert_eq!(source.as_deref(), Some("GroupBudget"), "{name}");
    }
    let spent = ns
        .group_status("crew")
        .await
        .spend
        .expect("the group's spend");
    assert_eq!(spent.cost.as_deref(), Some("1.25"));
    let since = spent.since.expect("since when it counts").0;

    // The window runs 20 s from the first spend counted: then the count is 0 and both resume.
    for name in ["scout", "idle"] {
        ns.wait_status(name, "resumed once the group's window moved on", |s| {
            s.shutdown.is_none() && s.phase == Some(agent_supervisor::api::Phase::Running)
        })
        .await;
    }
    let spent = ns
        .group_status("crew")
        .await
        .spend
        .expect("the group's spend");
    assert_eq!(spent.cost.as_deref(), Some("0.00"));
    let begun = spent.since.expect("the new window's start").0;
    assert!(
        begun.duration_since(since) >= jiff::SignedDuration::from_secs(20),
        "the new window began {begun}, the first at {since}"
    );
}
