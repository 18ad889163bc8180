//! Spend budgets: a crash loop whose attempts each report spend stops when the money is gone,
//! whatever its restart limits say; `BudgetLow` at `warnAt`; raising the budget or the window
//! moving on resumes; a shutdown written by anyone else is never lifted.

use agent_supervisor::api::{Backoff, BackoffType, Budget, Phase, RestartPolicySpec, ShutdownType};
use agent_supervisor::supervise::EventReason;

use crate::build::{condition, economy_shutdown, named, reasons, secs};
use crate::sim::Sim;

fn budget(max_cost: &str, window: Option<u64>) -> Budget {
    Budget {
        max_cost: Some(max_cost.to_string()),
        max_tokens: None,
        window: window.map(secs),
        warn_at: 0.8,
    }
}

/// Restarted at once, no breaker, no limit: only the budget can stop it.
fn immediate(budget: Budget) -> RestartPolicySpec {
    RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Immediate,
            initial_delay: secs(0),
            max_delay: secs(0),
            multiplier: 2.0,
            jitter: 0.0,
        },
        circuit_breaker: agent_supervisor::api::CircuitBreakerPolicy {
            failure_threshold: 0,
            ..Default::default()
        },
        budget: Some(budget),
        ..RestartPolicySpec::default()
    }
}

/// Runs the current attempt from `at`, which crashes 5 s later saying it spent 0.40; returns
/// the plan that judged the crash (and, with an immediate restart, the one after it).
fn spend_and_crash(sim: &mut Sim, at: i64) -> Vec<agent_supervisor::supervise::Plan> {
    sim.runs(at)
        .exits(1, Some(r#"{"spend": {"cost": "0.40"}}"#), at + 5);
    let judged = sim.at(at + 5).step();
    let mut plans = vec![judged.clone()];
    if judged.status.phase == Some(Phase::BackingOff) {
        plans.push(sim.step());
    }
    plans
}

#[test]
fn a_crash_loop_spending_each_attempt_stops_when_the_budget_is_used_up() {
    let mut sim = Sim::running(named(immediate(budget("2.00", None))));
    let mut low = 0;
    for attempt in 1..=4 {
        let plans = spend_and_crash(&mut sim, attempt * 10);
        let created = plans.iter().find_map(|p| p.create_pod.as_ref());
        assert_eq!(
            created.map(|p| p.attempt),
            Some(attempt as u32 + 1),
            "attempt {attempt}"
        );
        low += plans
            .iter()
            .flat_map(reasons)
            .filter(|r| *r == EventReason::BudgetLow)
            .count();
    }
    assert_eq!(low, 1, "BudgetLow once, when 1.60 crossed 80%");
    assert_eq!(condition(sim.status(), "BudgetLow").status, "True");
    // The fifth attempt's 0.40 makes 2.00: shut down, never a sixth pod.
    let plans = spend_and_crash(&mut sim, 50);
    assert!(plans.iter().all(|p| p.create_pod.is_none()), "{plans:?}");
    let plan = &plans[0];
    let shutdown = plan
        .record_shutdown
        .clone()
        .expect("the operator records it");
    assert_eq!(shutdown.kind, ShutdownType::Economic);
    assert_eq!(shutdown.source.as_deref(), Some("Budget"));
    assert_eq!(
        shutdown.reason.as_deref(),
        Some("spend budget exhausted: 2.00 of 2.00")
    );
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert!(reasons(plan).contains(&EventReason::BudgetExhausted));
    assert_eq!(
        plan.status.restart_history[0].attempt, 5,
        "the crash is in the history"
    );
    // Later decisions keep it so.
    assert_eq!(sim.at(60).step().create_pod, None);

    // Raised to 4.00: the operator's own shutdown is lifted, and it resumes.
    let mut raised = immediate(budget("4.00", None));
    raised.budget.as_mut().unwrap().warn_at = 0.8;
    sim.input.policy = named(raised);
    let plan = sim.at(70).step();
    assert!(plan.clear_shutdown);
    assert_eq!(plan.status.shutdown, None);
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(6));
    assert_eq!(
        condition(&plan.status, "BudgetLow").status,
        "False",
        "2.00 of 4.00"
    );
}

#[test]
fn a_running_agent_reaching_its_budget_is_stopped_and_the_window_moving_on_resumes_it() {
    let mut sim = Sim::running(named(immediate(budget("1.00", Some(3600)))));
    sim.runs(0).reports(None, None);
    sim.input.lease.as_mut().unwrap().reported.spend = Some(r#"{"cost": "1.20"}"#.into());
    let plan = sim.at(30).step();
    assert_eq!(
        plan.delete_pod.as_deref(),
        Some("researcher-1"),
        "stopped gracefully"
    );
    assert_eq!(plan.create_pod, None);
    let shutdown = plan.record_shutdown.expect("recorded before the kill");
    assert_eq!(
        shutdown.reason.as_deref(),
        Some("spend budget exhausted: 1.20 of 1.00")
    );
    let since = plan.status.spend.clone().unwrap().since.0;
    assert_eq!(
        plan.requeue_at,
        Some(since + jiff::SignedDuration::from_secs(3600))
    );
    // Before the window ends: still shut down.
    sim.exits(143, None, 31);
    assert_eq!(sim.at(1800).step().create_pod, None);
    // A new window: counted from zero, and it resumes.
    let plan = sim.at(30 + 3600).step();
    assert!(plan.clear_shutdown);
    assert_eq!(plan.status.spend.unwrap().cost.as_deref(), Some("0.00"));
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(2));
}

#[test]
fn a_shutdown_written_by_anyone_else_is_never_lifted_by_the_budget() {
    let mut sim = Sim::running(named(immediate(budget("100", None))));
    sim.input.status.shutdown = Some(economy_shutdown());
    let plan = sim.at(50).step();
    assert!(!plan.clear_shutdown);
    assert_eq!(plan.status.shutdown, Some(economy_shutdown()));
    assert_eq!(plan.create_pod, None);
}

#[test]
fn a_report_left_on_the_lease_by_an_earlier_attempt_is_not_counted_again() {
    let mut sim = Sim::running(named(immediate(budget("10.00", None))));
    // Attempt 1 reports 1.50 on its Lease, then crashes without last words.
    sim.runs(0).reports(None, None);
    let lease = sim.input.lease.as_mut().unwrap();
    lease.reported.spend = Some(r#"{"cost": "1.50", "pod": "researcher-1"}"#.into());
    sim.at(10).step();
    sim.exits(1, None, 12);
    let recorded = sim.at(12).step();
    assert_eq!(recorded.status.spend.unwrap().cost.as_deref(), Some("1.50"));
    let created = sim.step();
    assert_eq!(created.create_pod.map(|p| p.attempt), Some(2));
    // Attempt 2 holds the Lease, which still carries attempt 1's report (its clearing
    // renewal was lost): not this attempt's spend.
    sim.runs(13).reports(None, None);
    let lease = sim.input.lease.as_mut().unwrap();
    assert_eq!(lease.holder.as_deref(), Some("researcher-2"));
    lease.reported.spend = Some(r#"{"cost": "1.50", "pod": "researcher-1"}"#.into());
    let plan = sim.at(20).step();
    assert_eq!(
        plan.status.spend.clone().unwrap().cost.as_deref(),
        Some("1.50")
    );
    // Its own report counts.
    let lease = sim.input.lease.as_mut().unwrap();
    lease.reported.spend = Some(r#"{"cost": "0.25", "pod": "researcher-2"}"#.into());
    let plan = sim.at(25).step();
    assert_eq!(plan.status.spend.unwrap().cost.as_deref(), Some("1.75"));
}
