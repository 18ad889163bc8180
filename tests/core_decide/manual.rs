//! Manual restart and reset requests: each value handled once, counted toward nothing.

use agent_supervisor::api::{CircuitBreakerStatus, Phase, Trigger};
use agent_supervisor::supervise::EventReason;
use agent_supervisor::supervise::conditions::{CIRCUIT_BREAKER_OPEN, READY};

use crate::build::{breaker, breaker_policy, condition, fast, limited, named, reasons, time};
use crate::sim::{Sim, fail_times};

#[test]
fn a_restart_request_restarts_once_per_value_without_counting() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    sim.restart_when_due();
    sim.runs(60);
    sim.at(70).step();
    assert_eq!(sim.status().consecutive_failures, 1);
    let recent = sim.status().recent_restarts.clone();

    for (i, value) in ["2025-06-01T12:01:00Z", "again", "and again"]
        .into_iter()
        .enumerate()
    {
        let now = 100 + 50 * i as i64;
        let attempt = sim.status().attempt;
        let restarts = sim.status().restart_count;
        sim.input.agent.restart_requested = Some(value.to_string());
        let (killed, plan) = sim.at(now).restart_at_once();
        let pod = format!("researcher-{attempt}");
        assert_eq!(killed.delete_pod.as_deref(), Some(pod.as_str()), "{value}");
        let validated = killed
            .validate_pod
            .as_ref()
            .expect("the replacement is validated");
        assert_eq!(validated.attempt, attempt + 1);
        assert_eq!(validated.origin.trigger, Some(Trigger::Manual));
        assert_eq!(validated.origin.handled_restart.as_deref(), Some(value));
        assert_eq!(reasons(&killed), [EventReason::ManualRestart]);
        assert_eq!(
            killed.status.handled_restart_request.as_deref(),
            Some(value),
            "the request is recorded with the kill"
        );
        let created = plan.create_pod.as_ref().expect("created");
        assert_eq!(created.attempt, attempt + 1);
        assert_eq!(created.origin.trigger, Some(Trigger::Manual));
        assert_eq!(created.origin.handled_restart.as_deref(), Some(value));
        assert_eq!(reasons(&plan), [EventReason::Restarted]);
        let s = &plan.status;
        assert_eq!(s.handled_restart_request.as_deref(), Some(value));
        assert_eq!(s.restart_count, restarts + 1);
        assert_eq!(s.consecutive_failures, 1, "not a failure");
        assert_eq!(s.recent_restarts, recent, "not counted toward the limit");
        let record = &s.restart_history[0];
        assert_eq!(record.trigger, Trigger::Manual);
        assert_eq!(record.attempt, attempt);
        assert_eq!(record.restarted_at, Some(time(now)));
        assert_eq!(record.reason, None);

        // The same value again: nothing.
        sim.runs(now + 5);
        let again = sim.at(now + 10).step();
        assert_eq!(again.create_pod, None, "{value} is handled once");
        assert_eq!(again.delete_pod, None);
        assert!(again.events.is_empty());
    }

    // The one crash-restart used the limit of one per hour: the next crash gives up.
    let plan = sim.crash(300, 310);
    assert_eq!(
        plan.status.phase,
        Some(Phase::Stopped),
        "one counted restart is the limit"
    );
    assert!(reasons(&plan).contains(&EventReason::RestartLimitExceeded));
    // Manual restarts alone never reach the limit: after three, a crash still restarts.
    let mut sim = Sim::running(limited(1, 3600));
    for i in 0..3 {
        sim.input.agent.restart_requested = Some(format!("r{i}"));
        sim.at(20 + i).restart_at_once();
    }
    sim.runs(30);
    let plan = sim.crash(30, 40);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
}

#[test]
fn a_restart_request_while_backing_off_restarts_now() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.input.agent.restart_requested = Some("now".to_string());
    let plan = sim.at(51).step();
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(2));
    assert!(reasons(&plan).contains(&EventReason::ManualRestart));
    assert_eq!(plan.status.restart_history[0].restarted_at, Some(time(51)));
}

#[test]
fn a_reset_request_closes_the_breaker_and_restarts_now() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    assert_eq!(sim.status().phase, Some(Phase::CircuitOpen));
    sim.input.agent.reset_requested = Some("1".to_string());
    let plan = sim.at(210).step();
    let s = &plan.status;
    assert_eq!(breaker(s), CircuitBreakerStatus::default());
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(4));
    assert_eq!(s.handled_reset_request.as_deref(), Some("1"));
    assert_eq!(reasons(&plan)[0], EventReason::Reset);
    let open = condition(s, CIRCUIT_BREAKER_OPEN);
    assert_eq!(
        (open.status.as_str(), open.last_transition_time.clone()),
        ("False", time(210))
    );

    // Handled once.
    sim.runs(215);
    let again = sim.at(220).step();
    assert!(again.events.is_empty());
    assert_eq!(again.create_pod, None);
}

#[test]
fn a_reset_request_resumes_a_stopped_agent() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    sim.restart_when_due();
    let stopped = sim.crash(60, 70);
    assert_eq!(stopped.status.phase, Some(Phase::Stopped));
    assert_eq!(sim.at(1000).step().create_pod, None);

    sim.input.agent.reset_requested = Some("please".to_string());
    let plan = sim.at(1010).step();
    let s = &plan.status;
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(3));
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.phase, Some(Phase::Pending));
    assert!(reasons(&plan).contains(&EventReason::Reset));
    assert_eq!(condition(s, READY).reason, "PodPending");
    // The limit starts afresh: the next crash restarts again.
    let plan = sim.crash(1020, 1030);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
}

#[test]
fn a_reset_request_on_a_healthy_agent_clears_the_count_and_starts_nothing() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 40);
    sim.restart_when_due();
    sim.runs(60);
    sim.input.agent.reset_requested = Some("x".to_string());
    let plan = sim.at(70).step();
    assert_eq!(plan.status.consecutive_failures, 0);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None);
    assert_eq!(reasons(&plan), [EventReason::Reset]);
}
