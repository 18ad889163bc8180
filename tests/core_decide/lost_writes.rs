//! Surviving lost writes: a status or pod action that did not land is picked up and finished
//! by the next decision, never repeated.

use agent_supervisor::api::{
    BreakerState, CircuitBreakerPolicy, FailureClass, FailureReason, Heartbeat, Phase,
    RestartPolicySpec, Time,
};
use agent_supervisor::supervise::conditions::CIRCUIT_BREAKER_OPEN;
use agent_supervisor::supervise::{EventReason, PolicyResolution};

use crate::build::{
    breaker, breaker_policy, condition, economy_shutdown, fast, limited, named, reasons, secs, time,
};
use crate::clock::t;
use crate::pods::new_pod;
use crate::sim::{Sim, fail_times};

#[test]
fn a_lost_status_write_after_a_restart_adopts_the_pod() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    let due = sim.status().next_restart_at.clone().unwrap().0;
    sim.input.now = due;
    let plan = sim.decide();
    // The pod was created; the status write that followed was lost.
    let created = new_pod(
        plan.create_pod.as_ref().unwrap(),
        "h1",
        due,
        Some("ContainerCreating"),
    );
    sim.input.pod = Some(created);
    let plan = sim.at(60).step();
    assert_eq!(plan.create_pod, None, "never a second pod for the attempt");
    let s = &plan.status;
    assert_eq!(s.attempt, 2);
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.restart_history[0].restarted_at, Some(Time(due)));
    // The restart counts toward the limit as if nothing had been lost.
    let plan = sim.crash(65, 80);
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert!(reasons(&plan).contains(&EventReason::RestartLimitExceeded));
}

#[test]
fn a_lost_status_write_after_a_probe_keeps_the_breaker_half_open() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    sim.input.now = t(260);
    let plan = sim.decide();
    sim.input.pod = Some(new_pod(
        plan.create_pod.as_ref().unwrap(),
        "h1",
        t(260),
        Some("ContainerCreating"),
    ));
    let plan = sim.at(270).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(breaker(&plan.status).state, BreakerState::HalfOpen);
    assert_eq!(
        condition(&plan.status, CIRCUIT_BREAKER_OPEN).status,
        "False"
    );
    // The probe proves itself: the breaker closes.
    sim.runs(270);
    let plan = sim.at(870).step();
    assert_eq!(breaker(&plan.status).state, BreakerState::Closed);
    assert!(reasons(&plan).contains(&EventReason::CircuitClosed));
}

#[test]
fn resuming_never_bypasses_an_open_breaker() {
    for resume in ["suspend", "shutdown"] {
        let mut sim = Sim::running(breaker_policy());
        fail_times(&mut sim, 3, 200);
        assert_eq!(breaker(sim.status()).half_open_at, Some(time(260)));
        match resume {
            "suspend" => sim.input.agent.suspend = true,
            _ => sim.input.status.shutdown = Some(economy_shutdown()),
        }
        sim.at(210).step();
        match resume {
            "suspend" => sim.input.agent.suspend = false,
            _ => sim.input.status.shutdown = None,
        }
        let plan = sim.at(220).step();
        assert_eq!(plan.create_pod, None, "{resume}: the breaker is still open");
        assert_eq!(plan.status.phase, Some(Phase::CircuitOpen), "{resume}");
        assert_eq!(breaker(&plan.status).state, BreakerState::Open, "{resume}");
        assert_eq!(plan.requeue_at, Some(t(260)), "{resume}");
        let probe = sim.at(260).step();
        assert_eq!(
            probe.create_pod.as_ref().map(|p| p.attempt),
            Some(4),
            "{resume}"
        );
        assert_eq!(
            breaker(&probe.status).state,
            BreakerState::HalfOpen,
            "{resume}"
        );
    }
}

#[test]
fn a_disrupted_pod_that_is_still_live_is_deleted_as_it_is_replaced() {
    let mut sim = Sim::running(named(fast()));
    // The eviction is approved (DisruptionTarget=True) but the pod has no deletionTimestamp yet.
    sim.pod().disruption = Some("EvictionByEvictionAPI".to_string());
    let (killed, plan) = sim.at(50).restart_at_once();
    assert_eq!(killed.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        killed.validate_pod, None,
        "a disrupted pod goes whatever its replacement"
    );
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
    assert_eq!(
        plan.status.last_failure.as_ref().map(|f| f.reason),
        Some(FailureReason::Evicted)
    );
    assert_eq!(plan.status.consecutive_failures, 0);
}

#[test]
fn the_history_keeps_the_newest_entries_up_to_the_limit() {
    let policy = RestartPolicySpec {
        history_limit: 3,
        circuit_breaker: CircuitBreakerPolicy {
            failure_threshold: 0,
            ..CircuitBreakerPolicy::default()
        },
        ..fast()
    };
    let mut sim = Sim::running(named(policy));
    let mut now = 100;
    for _ in 0..5 {
        sim.crash(now - 10, now);
        sim.restart_when_due();
        now = sim.input.now.as_second() - t(0).as_second() + 30;
    }
    let attempts: Vec<u32> = sim
        .status()
        .restart_history
        .iter()
        .map(|r| r.attempt)
        .collect();
    assert_eq!(attempts, [5, 4, 3], "newest first");
    assert_eq!(sim.status().restart_count, 5, "restartCount is not bounded");

    // A lowered limit applies at the next decision, not only at the next restart.
    if let PolicyResolution::Named(_, p) = &mut sim.input.policy {
        p.history_limit = 1;
    }
    let plan = sim.at(now).step();
    assert_eq!(plan.create_pod, None);
    let attempts: Vec<u32> = plan
        .status
        .restart_history
        .iter()
        .map(|r| r.attempt)
        .collect();
    assert_eq!(attempts, [5]);
}

#[test]
fn a_restart_never_leaves_the_replaced_pod_live() {
    // A hung pod was to be deleted, but only the status write landed: the agent is backing off
    // while the old pod still runs. The restart deletes it as it creates the next one.
    let mut sim = Sim::new(named(fast()));
    sim.input.agent.heartbeat = Some(Heartbeat {
        timeout: secs(30),
        grace_period: None,
    });
    sim.step();
    sim.runs(5);
    let hung = sim.at(100).decide();
    assert_eq!(hung.delete_pod.as_deref(), Some("researcher-1"));
    sim.input.status = hung.status.clone();
    assert!(sim.pod().is_live(), "the delete was lost");

    let plan = sim.restart_when_due();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
}

#[test]
fn an_own_shutdown_whose_second_write_was_lost_records_the_attempt_then() {
    let mut sim = Sim::running(named(fast()));
    sim.runs(5)
        .exits(1, Some(r#"{"shutdown":"economic","reason":"budget"}"#), 40);
    let decided = sim.at(40).decide();
    let recorded = decided
        .record_shutdown
        .clone()
        .expect("a shutdown recorded");
    // Only the first write (the shutdown field) landed.
    sim.input.status.shutdown = Some(recorded);
    let plan = sim.at(45).step();
    let failure = plan
        .status
        .last_failure
        .clone()
        .expect("the ending is recorded");
    assert_eq!(Some(&failure), decided.status.last_failure.as_ref());
    assert_eq!(failure.class, FailureClass::Shutdown);
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert_eq!(reasons(&plan), [EventReason::ShutdownRespected]);
    assert_eq!(plan.create_pod, None);
    // Once recorded, nothing more.
    let again = sim.at(50).step();
    assert!(again.events.is_empty());
    assert_eq!(again.status.last_failure, Some(failure));
}
