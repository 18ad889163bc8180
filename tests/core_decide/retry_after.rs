//! `retryAfter`: the agent asks to be restarted later. The restart waits for it (cut to the
//! policy's `maxRetryAfter`) and counts toward no limit and not toward the breaker.

use agent_supervisor::api::{
    BreakerState, FailureReason, Phase, RestartPolicySpec, ShutdownType, Trigger,
};
use agent_supervisor::supervise::EventReason;
use agent_supervisor::supervise::conditions::READY;

use crate::build::{breaker, condition, fast, named, reasons, secs, strict, time};
use crate::clock::t;
use crate::pods::new_pod;
use crate::sim::Sim;

const RATE_LIMITED: &str = r#"{"retryAfter":"15m","reason":"rate limited"}"#;

#[test]
fn the_restart_waits_as_asked_and_counts_toward_nothing() {
    let mut sim = Sim::running(named(strict()));
    for round in 1..=3 {
        let now = sim.input.now.as_second() - t(0).as_second();
        let failed = now + 60;
        sim.runs(now).exits(1, Some(RATE_LIMITED), failed);
        let plan = sim.at(failed).step();
        let s = &plan.status;
        assert_eq!(s.phase, Some(Phase::BackingOff), "round {round}");
        assert_eq!(s.next_restart_at, Some(time(failed + 900)), "round {round}");
        assert_eq!(s.consecutive_failures, 0, "not a failure that counts");
        assert_eq!(
            breaker(s).state,
            BreakerState::Closed,
            "the breaker is not touched"
        );
        let record = &s.restart_history[0];
        assert_eq!(record.trigger, Trigger::RetryAfter);
        assert_eq!(record.backoff, Some(secs(900)));
        assert_eq!(record.reason, Some(FailureReason::Error));
        assert!(record.fingerprint.is_some());
        assert_eq!(
            reasons(&plan),
            [EventReason::RestartScheduled],
            "no Crashed warning"
        );
        assert!(
            plan.events[0].note.contains("rate limited"),
            "{}",
            plan.events[0].note
        );
        assert_eq!(condition(s, READY).reason, "BackingOff");
        assert_eq!(plan.requeue_at, Some(t(failed + 900)));
        let restarted = sim.restart_when_due();
        assert_eq!(restarted.status.restart_count, round);
        assert!(
            restarted.status.recent_restarts.is_empty(),
            "counted toward no limit"
        );
        assert_eq!(
            restarted.create_pod.as_ref().unwrap().origin.trigger,
            Some(Trigger::RetryAfter)
        );
    }
    // An ordinary failure still counts: with a breaker at 1 it opens at once.
    let now = sim.input.now.as_second() - t(0).as_second();
    sim.crash(now, now + 60);
    assert_eq!(sim.status().phase, Some(Phase::CircuitOpen));
}

#[test]
fn a_long_wait_is_cut_to_the_policys_maximum() {
    let policy = RestartPolicySpec {
        max_retry_after: secs(600),
        ..fast()
    };
    let cases = [
        (r#"{"retryAfter":"48h"}"#, 100 + 600),
        (r#"{"retryAfter":"5m"}"#, 100 + 300),
        // A time: absolute, and cut the same way.
        (r#"{"retryAfter":"2025-06-01T12:03:20Z"}"#, 200),
        (r#"{"retryAfter":"2030-01-01T00:00:00Z"}"#, 100 + 600),
        // Already past (the agent ended late, or its clock is off): now.
        (r#"{"retryAfter":"2025-06-01T11:00:00Z"}"#, 110),
        (r#"{"retryAfter":"0s"}"#, 110),
    ];
    for (message, due) in cases {
        let mut sim = Sim::running(named(policy.clone()));
        sim.runs(5).exits(1, Some(message), 100);
        let plan = sim.at(110).step();
        assert_eq!(plan.status.next_restart_at, Some(time(due)), "{message}");
        assert_eq!(plan.status.phase, Some(Phase::BackingOff), "{message}");
    }
}

#[test]
fn asking_to_retry_is_not_a_shutdown_but_a_shutdown_wins() {
    // Exit code 0 is a voluntary shutdown by default, unless the agent asks to come back.
    let mut sim = Sim::running(named(fast()));
    sim.runs(5).exits(0, Some(r#"{"retryAfter":"1m"}"#), 100);
    let plan = sim.at(100).step();
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.shutdown, None);
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::RetryAfter);

    let mut sim = Sim::running(named(fast()));
    let both = r#"{"shutdown":"economic","reason":"budget exhausted","retryAfter":"1m"}"#;
    sim.runs(5).exits(1, Some(both), 100);
    let plan = sim.at(100).step();
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert_eq!(
        plan.status.shutdown.as_ref().map(|s| s.kind),
        Some(ShutdownType::Economic)
    );
}

#[test]
fn a_malformed_retry_after_is_an_ordinary_failure() {
    for message in [
        r#"{"retryAfter":"soon"}"#,
        r#"{"retryAfter":"-5m"}"#,
        r#"{"retryAfter":1e308}"#,
    ] {
        let mut sim = Sim::running(named(fast()));
        sim.runs(5).exits(1, Some(message), 100);
        let plan = sim.at(100).step();
        assert_eq!(plan.status.consecutive_failures, 1, "{message}");
        assert_eq!(plan.status.restart_history[0].trigger, Trigger::Failure);
        assert_eq!(
            plan.status.next_restart_at,
            Some(time(110)),
            "the policy's backoff"
        );
        assert_eq!(reasons(&plan), [EventReason::Crashed]);
    }
}

#[test]
fn a_restart_asked_for_and_adopted_after_a_lost_write_counts_toward_nothing() {
    let mut sim = Sim::running(named(strict()));
    sim.runs(5).exits(1, Some(RATE_LIMITED), 100);
    sim.at(100).step();
    let before = sim.input.clone();
    let plan = sim.restart_when_due();
    // The status write after the create is lost: the next decision adopts the pod.
    sim.input.status = before.status.clone();
    sim.input.pod = Some(new_pod(
        plan.create_pod.as_ref().unwrap(),
        "h1",
        sim.input.now,
        Some("ContainerCreating"),
    ));
    let adopted = sim.step();
    assert_eq!(adopted.create_pod, None);
    assert_eq!(adopted.status.restart_count, 1);
    assert!(adopted.status.recent_restarts.is_empty());
    assert_eq!(adopted.status.attempt, 2);
}
