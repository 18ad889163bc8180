//! The circuit breaker: it opens, probes once, closes after a healthy probe, and opens again
//! for longer after a failed one.

use agent_supervisor::api::{BreakerState, CircuitBreakerStatus, Phase};
use agent_supervisor::supervise::conditions::{CIRCUIT_BREAKER_OPEN, READY};
use agent_supervisor::supervise::{EventReason, PolicyResolution};

use crate::build::{breaker, breaker_policy, condition, reasons, secs, time};
use crate::clock::t;
use crate::sim::{Sim, fail_times};

#[test]
fn the_breaker_opens_probes_once_and_closes_after_a_healthy_probe() {
    let mut sim = Sim::running(breaker_policy());
    let plan = fail_times(&mut sim, 3, 200);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::CircuitOpen));
    assert_eq!(s.consecutive_failures, 3);
    assert_eq!(
        breaker(s),
        CircuitBreakerStatus {
            state: BreakerState::Open,
            trips: 1,
            opened_at: Some(time(200)),
            half_open_at: Some(time(260)),
        }
    );
    assert_eq!(plan.create_pod, None);
    assert_eq!(s.next_restart_at, None);
    assert_eq!(plan.requeue_at, Some(t(260)));
    assert_eq!(
        reasons(&plan),
        [EventReason::Crashed, EventReason::CircuitOpened]
    );
    assert!(plan.events[1].warning());
    assert_eq!(s.restart_history[0].backoff, Some(secs(60)));
    let open = condition(s, CIRCUIT_BREAKER_OPEN);
    assert_eq!(open.status, "True");
    assert_eq!(open.last_transition_time, time(200));
    assert_eq!(condition(s, READY).reason, "CircuitOpen");

    // No pod until halfOpenAt.
    for now in [201, 230, 259] {
        let plan = sim.at(now).step();
        assert_eq!(plan.create_pod, None, "at {now}");
        assert!(plan.events.is_empty(), "at {now}");
        assert_eq!(plan.requeue_at, Some(t(260)));
    }

    // At halfOpenAt: exactly one probe.
    let probe = sim.at(260).step();
    assert_eq!(probe.create_pod.as_ref().map(|p| p.attempt), Some(4));
    assert_eq!(breaker(&probe.status).state, BreakerState::HalfOpen);
    assert_eq!(
        reasons(&probe),
        [EventReason::CircuitHalfOpen, EventReason::Restarted]
    );
    assert_eq!(
        condition(&probe.status, CIRCUIT_BREAKER_OPEN).status,
        "False"
    );
    for now in [260, 261, 300] {
        let again = sim.at(now).step();
        assert_eq!(again.create_pod, None, "one probe only, at {now}");
        assert_eq!(breaker(&again.status).state, BreakerState::HalfOpen);
    }

    // The probe runs: it must run for resetAfter before the breaker closes.
    sim.runs(300);
    let running = sim.at(899).step();
    assert_eq!(breaker(&running.status).state, BreakerState::HalfOpen);
    assert_eq!(running.requeue_at, Some(t(900)));
    assert_eq!(running.status.consecutive_failures, 3);
    let closed = sim.at(900).step();
    assert_eq!(
        breaker(&closed.status),
        CircuitBreakerStatus::default(),
        "Closed, trips cleared"
    );
    assert_eq!(closed.status.consecutive_failures, 0);
    assert_eq!(reasons(&closed), [EventReason::CircuitClosed]);
    assert_eq!(closed.create_pod, None);
    let open = condition(&closed.status, CIRCUIT_BREAKER_OPEN);
    assert_eq!(open.status, "False");

    // The count starts again: one failure is a backoff, not a trip.
    let plan = sim.crash(300, 1000);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.consecutive_failures, 1);
}

#[test]
fn a_failed_probe_opens_the_breaker_again_for_longer() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    sim.at(260).step();
    let plan = sim.crash(265, 300);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::CircuitOpen));
    assert_eq!(s.consecutive_failures, 4);
    assert_eq!(
        breaker(s),
        CircuitBreakerStatus {
            state: BreakerState::Open,
            trips: 2,
            opened_at: Some(time(300)),
            half_open_at: Some(time(420)),
        }
    );
    assert_eq!(
        reasons(&plan),
        [EventReason::Crashed, EventReason::CircuitOpened]
    );
    assert_eq!(plan.create_pod, None);

    assert_eq!(sim.at(419).step().create_pod, None);
    let probe = sim.at(420).step();
    assert_eq!(probe.create_pod.as_ref().map(|p| p.attempt), Some(5));
    sim.crash(421, 430);
    assert_eq!(
        breaker(sim.status()).half_open_at,
        Some(time(430 + 240)),
        "60s, 120s, 240s"
    );
    assert_eq!(breaker(sim.status()).trips, 3);
}

#[test]
fn a_probe_that_ran_for_reset_after_before_failing_closed_the_breaker() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    sim.at(260).step();
    // Nobody looked while the probe ran for more than resetAfter; then it crashed.
    let plan = sim.crash(265, 265 + 700);
    let s = &plan.status;
    assert_eq!(breaker(s).state, BreakerState::Closed);
    assert_eq!(breaker(s).trips, 0);
    assert_eq!(s.consecutive_failures, 1, "a new count");
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert!(
        reasons(&plan).contains(&EventReason::CircuitClosed),
        "the probe ran for resetAfter: the breaker closed, and says so: {:?}",
        plan.events
    );
}

#[test]
fn a_zero_threshold_disables_the_breaker() {
    let policy = match breaker_policy() {
        PolicyResolution::Named(name, mut p) => {
            p.circuit_breaker.failure_threshold = 0;
            PolicyResolution::Named(name, p)
        }
        other => other,
    };
    let mut sim = Sim::running(policy);
    let plan = fail_times(&mut sim, 10, 1000);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(breaker(&plan.status).state, BreakerState::Closed);
}
