//! Starting and restarting: the first pod, a crash's jittered exponential backoff, and the
//! failure count and backoff reset once an agent has run for `resetAfter`.

use agent_supervisor::api::{
    Backoff, BreakerState, Failure, FailureClass, FailureReason, Phase, RestartRecord, Time,
    Trigger,
};
use agent_supervisor::supervise::backoff;
use agent_supervisor::supervise::conditions::{CIRCUIT_BREAKER_OPEN, POLICY_RESOLVED, READY};
use agent_supervisor::supervise::fingerprint::fingerprint;
use agent_supervisor::supervise::{EventReason, LastFailure, NewPod, PodOrigin, PolicyResolution};
use jiff::{SignedDuration, Timestamp};

use crate::build::{UID, breaker, condition, fast, limited, named, reasons, secs, time};
use crate::clock::t;
use crate::sim::Sim;

/// Rounds up to a whole second: status times are stored to the second.
fn ceil_second(ts: Timestamp) -> Timestamp {
    let down = Timestamp::from_second(ts.as_second()).unwrap();
    if down == ts {
        ts
    } else {
        down + SignedDuration::from_secs(1)
    }
}

// --- Starting and restarting -----------------------------------------------------------------

#[test]
fn first_start_creates_attempt_one() {
    let mut sim = Sim::new(PolicyResolution::BuiltIn);
    let plan = sim.step();
    assert_eq!(
        plan.create_pod,
        Some(NewPod {
            name: "researcher-1".to_string(),
            attempt: 1,
            restart_count: 0,
            last_failure_reason: None,
            last_failure: None,
            progress: None,
            origin: PodOrigin::default(),
        })
    );
    assert_eq!(plan.delete_pod, None);
    assert_eq!(plan.record_shutdown, None);
    assert_eq!(reasons(&plan), [EventReason::PodCreated]);
    assert!(!plan.events[0].warning());

    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!(s.pod_name.as_deref(), Some("researcher-1"));
    assert_eq!(s.attempt, 1);
    assert_eq!(s.restart_count, 0);
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.next_restart_at, None);
    assert_eq!(s.last_failure, None);
    assert!(s.restart_history.is_empty());
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(breaker(s).state, BreakerState::Closed);
    let ready = condition(s, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PodPending")
    );
    assert_eq!(ready.observed_generation, Some(1));
    assert_eq!(condition(s, POLICY_RESOLVED).status, "True");
    assert_eq!(condition(s, CIRCUIT_BREAKER_OPEN).status, "False");
}

#[test]
fn a_running_ready_pod_makes_the_agent_running_and_ready() {
    let mut sim = Sim::new(PolicyResolution::BuiltIn);
    sim.step();
    let plan = sim.runs(5).at(10).step();
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None);
    assert!(plan.events.is_empty(), "{:?}", plan.events);
    let ready = condition(&plan.status, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "PodReady")
    );

    // Running but not ready.
    sim.pod().ready = false;
    let plan = sim.at(11).step();
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(condition(&plan.status, READY).status, "False");
}

#[test]
fn a_crash_decided_again_later_keeps_its_restart_time() {
    // A successor deciding the same failure 3 s later (the first decision's write waited, and
    // the process died) schedules the very same instant.
    let decide_at = |now: Timestamp| {
        let mut sim = Sim::running(PolicyResolution::BuiltIn);
        sim.runs(5).exits(1, Some("boom"), 65);
        sim.input.now = now;
        sim.step().status.next_restart_at
    };
    let first = decide_at(t(66));
    assert!(first.is_some());
    assert_eq!(decide_at(t(69) + SignedDuration::from_millis(700)), first);
    // Decided only after it was due: the restart is due at once, not a backoff later.
    let mut sim = Sim::running(PolicyResolution::BuiltIn);
    sim.runs(5).exits(1, Some("boom"), 65);
    sim.input.now = t(95);
    let plan = sim.step();
    assert!(plan.status.next_restart_at.is_some_and(|at| at.0 <= t(95)));
    assert!(sim.step().create_pod.is_some(), "restarted at once");
}

#[test]
fn a_crash_schedules_a_jittered_exponential_restart() {
    let mut sim = Sim::running(PolicyResolution::BuiltIn);
    sim.runs(5).exits(1, Some("RuntimeError: boom"), 65);
    // The operator's clock is not on a whole second.
    sim.input.now = t(70) + SignedDuration::from_millis(400);
    let plan = sim.step();

    // The built-in backoff: 10s × 2^0, jitter ±25%, fixed for this agent and attempt.
    let delay = backoff::delay(&Backoff::default(), 1, UID, 1).expect("a delay");
    assert!(
        (7_500..=12_500).contains(&delay.as_millis()),
        "10s ± 25%: {delay}"
    );
    assert_eq!(
        backoff::delay(&Backoff::default(), 1, UID, 1),
        Some(delay),
        "the same each time"
    );
    // Counted from when the attempt ended (65), not from when the operator saw it.
    let due = ceil_second(t(65) + SignedDuration::from_millis(delay.as_millis() as i64));
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert_eq!(s.next_restart_at, Some(Time(due)));
    assert_eq!(plan.requeue_at, Some(due));
    assert_eq!(s.consecutive_failures, 1);
    assert_eq!(s.restart_count, 0);
    assert_eq!(s.attempt, 1);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None, "a finished pod needs no deleting");
    let print = fingerprint(
        FailureReason::Error,
        Some(1),
        Some("RuntimeError: boom"),
        &[],
    );
    assert_eq!(
        s.last_failure,
        Some(Failure {
            time: time(65),
            reason: FailureReason::Error,
            class: FailureClass::Transient,
            exit_code: Some(1),
            signal: None,
            message: Some("RuntimeError: boom".into()),
            container: Some("agent".to_string()),
            pod_name: Some("researcher-1".to_string()),
            ran_for: Some(secs(60)),
            fingerprint: Some(print.clone()),
        })
    );
    assert_eq!(
        s.restart_history,
        [RestartRecord {
            attempt: 1,
            trigger: Trigger::Failure,
            failed_at: Some(time(65)),
            reason: Some(FailureReason::Error),
            class: Some(FailureClass::Transient),
            exit_code: Some(1),
            signal: None,
            message: Some("RuntimeError: boom".into()),
            ran_for: Some(secs(60)),
            fingerprint: Some(print.clone()),
            backoff: Some(delay),
            restarted_at: None,
            checkpoint: None,
            progress: None,
            spend: None,
        }]
    );
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert!(plan.events[0].warning());
    assert!(
        plan.events[0].note.contains("exit code 1"),
        "{:?}",
        plan.events[0]
    );
    assert!(plan.events[0].note.contains("RuntimeError: boom"));
    assert!(
        plan.events[0]
            .note
            .contains(&format!("restarting in {delay} at ")),
        "one Event says what happens next: {:?}",
        plan.events[0]
    );
    let ready = condition(s, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "BackingOff")
    );

    // A second before it is due: nothing happens, and the operator comes back when it is.
    sim.input.now = due - SignedDuration::from_secs(1);
    let early = sim.decide();
    assert_eq!(early.create_pod, None);
    assert!(early.events.is_empty());
    assert_eq!(early.status, sim.input.status);
    assert_eq!(early.requeue_at, Some(due));

    // When due: attempt 2, which knows it was restarted and why.
    let plan = sim.restart_when_due();
    assert_eq!(
        plan.create_pod,
        Some(NewPod {
            name: "researcher-2".to_string(),
            attempt: 2,
            restart_count: 1,
            last_failure_reason: Some(FailureReason::Error),
            last_failure: Some(LastFailure {
                attempt: Some(1),
                reason: FailureReason::Error,
                class: FailureClass::Transient,
                exit_code: Some(1),
                message: Some("RuntimeError: boom".into()),
            }),
            progress: None,
            origin: PodOrigin {
                trigger: Some(Trigger::Failure),
                ..PodOrigin::default()
            },
        })
    );
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.attempt, 2);
    assert_eq!(s.pod_name.as_deref(), Some("researcher-2"));
    assert_eq!(s.next_restart_at, None);
    assert_eq!(s.consecutive_failures, 1, "not healthy yet");
    assert_eq!(s.restart_history.len(), 1);
    assert_eq!(s.restart_history[0].restarted_at, Some(Time(due)));
    assert_eq!(reasons(&plan), [EventReason::Restarted]);
}

#[test]
fn consecutive_failures_grow_the_delay_exponentially_to_the_cap() {
    // No breaker in the way.
    let mut sim = Sim::running(limited(0, 3600));
    let mut now = 100;
    let mut delays = Vec::new();
    for _ in 0..7 {
        let plan = sim.crash(now - 50, now);
        assert_eq!(plan.status.phase, Some(Phase::BackingOff), "{plan:?}");
        let due = plan.status.next_restart_at.clone().unwrap().0;
        delays.push((due - t(now)).get_seconds());
        sim.restart_when_due();
        now = due.as_second() - t(0).as_second() + 60;
    }
    assert_eq!(delays, [10, 20, 40, 80, 160, 300, 300]);
}

#[test]
fn a_restarted_pod_that_vanished_is_replaced_at_once_as_a_disruption() {
    let mut sim = Sim::running(named(fast()));
    sim.input.pod = None;
    let (_, plan) = sim.at(50).restart_at_once();
    let s = &plan.status;
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
    assert_eq!(
        s.last_failure.as_ref().map(|f| f.reason),
        Some(FailureReason::NodeLost)
    );
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.restart_history[0].trigger, Trigger::Disruption);
}

// --- Healthy again ---------------------------------------------------------------------------

#[test]
fn running_for_reset_after_resets_the_failure_count_and_the_backoff() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    sim.crash(70, 100);
    sim.restart_when_due();
    assert_eq!(sim.status().consecutive_failures, 2);
    sim.runs(200);
    let not_yet = sim.at(799).step();
    assert_eq!(not_yet.status.consecutive_failures, 2);
    assert_eq!(not_yet.requeue_at, Some(t(800)));
    let healthy = sim.at(800).step();
    assert_eq!(healthy.status.consecutive_failures, 0);
    assert!(healthy.events.is_empty());
    // The next failure waits the first delay again.
    let plan = sim.crash(200, 900);
    assert_eq!(plan.status.next_restart_at, Some(time(910)));
}

#[test]
fn a_failure_after_reset_after_starts_a_new_count_even_unobserved() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    // It ran 20 minutes; nobody looked in between.
    let plan = sim.crash(100, 1300);
    assert_eq!(plan.status.consecutive_failures, 1);
    assert_eq!(plan.status.next_restart_at, Some(time(1310)));
}
