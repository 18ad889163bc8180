//! Progress as a judge: a running agent whose reported progress stops growing is stopped as
//! `NoProgress`, and with `progress.requiredForReset` a long run resets nothing unless it got
//! somewhere.

use agent_supervisor::api::{
    FailureClass, FailureReason, Heartbeat, Phase, ProgressPolicy, RestartPolicySpec, Rule,
    RuleAction, Trigger,
};
use agent_supervisor::supervise::{EventReason, PolicyResolution};

use crate::build::{fast, named, reasons, secs, time};
use crate::clock::t;
use crate::sim::Sim;

/// Stuck after 120 s without progress; a heartbeat every 30 s at most, 60 s of grace.
fn stalls_after(stall: u64) -> PolicyResolution {
    named(RestartPolicySpec {
        progress: Some(ProgressPolicy {
            stall_timeout: Some(secs(stall)),
            required_for_reset: false,
            max_extension: None,
        }),
        ..fast()
    })
}

/// An agent with a heartbeat under `policy`, its first pod running since t(5).
fn beating(policy: PolicyResolution) -> Sim {
    let mut sim = Sim::new(policy);
    sim.input.agent.heartbeat = Some(Heartbeat {
        timeout: secs(30),
        grace_period: Some(secs(60)),
    });
    sim.step();
    sim.runs(5);
    sim.at(10).step();
    sim
}

#[test]
fn a_step_said_to_be_slow_is_waited_for_up_to_max_extension() {
    // Progress 10 at t(20): stuck at t(140) unless it said otherwise. It says a step runs until
    // t(1000): waited for until then, not longer.
    let mut sim = beating(stalls_after(120));
    sim.at(20).reports(Some("10"), None).step();
    let slow = |sim: &mut Sim, at: i64, until: i64| {
        sim.at(at).reports(Some("10"), None);
        sim.input.lease.as_mut().unwrap().expect_slow_until = Some(t(until));
        sim.step()
    };
    for at in [130, 140, 500] {
        let plan = slow(&mut sim, at, 1000);
        assert_eq!(plan.delete_pod, None, "t({at})");
        assert!(
            plan.requeue_at <= Some(t(1000)),
            "looks again by the time it is due"
        );
    }
    let plan = slow(&mut sim, 999, 1000);
    assert_eq!(plan.delete_pod, None, "not before it is due");
    let plan = slow(&mut sim, 1000, 1000);
    assert_eq!(
        plan.delete_pod.as_deref(),
        Some("researcher-1"),
        "due, and still no progress"
    );
    assert_eq!(
        plan.status.last_failure.map(|f| f.reason),
        Some(FailureReason::NoProgress)
    );

    // Capped by maxExtension (here 300 s past its last progress at t(20)): a promise of a day
    // is held to t(320).
    let mut sim = beating(named(RestartPolicySpec {
        progress: Some(ProgressPolicy {
            stall_timeout: Some(secs(120)),
            required_for_reset: false,
            max_extension: Some(secs(300)),
        }),
        ..fast()
    }));
    sim.at(20).reports(Some("10"), None).step();
    assert_eq!(slow(&mut sim, 130, 86_400).delete_pod, None);
    assert_eq!(slow(&mut sim, 319, 86_400).delete_pod, None);
    assert!(
        slow(&mut sim, 320, 86_400).delete_pod.is_some(),
        "the cap holds"
    );
}

#[test]
fn a_run_whose_progress_stops_growing_is_stopped_as_no_progress() {
    let mut sim = beating(stalls_after(120));
    sim.at(20).reports(Some("10"), None).step();
    assert_eq!(sim.status().progress.as_ref().unwrap().at, time(20));
    // It renews its Lease on time, and reports the same progress each time.
    for at in [50, 80, 110, 139] {
        let plan = sim.at(at).reports(Some("10"), None).step();
        assert_eq!(plan.delete_pod, None, "t({at})");
        assert_eq!(plan.status.phase, Some(Phase::Running));
        assert!(plan.requeue_at <= Some(t(140)), "look again by then");
    }
    let plan = sim.at(140).reports(Some("10"), None).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        plan.create_pod, None,
        "a live pod goes before its replacement"
    );
    let s = &plan.status;
    let failure = s.last_failure.clone().unwrap();
    assert_eq!(failure.reason, FailureReason::NoProgress);
    assert_eq!(failure.class, FailureClass::Transient);
    assert_eq!(failure.ran_for, Some(secs(135)));
    let message = failure.message.unwrap();
    assert!(
        message.contains("progress stayed at 10 for 120s"),
        "{message}"
    );
    let record = &s.restart_history[0];
    assert_eq!(record.trigger, Trigger::Failure);
    assert_eq!(record.reason, Some(FailureReason::NoProgress));
    assert_eq!(record.progress, Some(10), "how far it got");
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert_eq!(s.consecutive_failures, 1);
    assert_eq!(reasons(&plan), [EventReason::NoProgress]);
    assert!(plan.events[0].warning());
    assert!(
        plan.events[0].note.contains("made no progress"),
        "{:?}",
        plan.events[0]
    );

    let next = sim.restart_when_due();
    assert_eq!(next.create_pod.as_ref().map(|p| p.attempt), Some(2));
    assert_eq!(next.create_pod.as_ref().unwrap().progress, Some(10));
}

#[test]
fn each_growth_is_recorded_and_restarts_the_clock() {
    let mut sim = beating(stalls_after(120));
    sim.at(20).reports(Some("10"), None).step();
    // 11 at t(30), ten seconds later: recorded as it comes (the status writer merges writes).
    let grew = sim.at(30).reports(Some("11"), None).step();
    let progress = grew.status.progress.clone().unwrap();
    assert_eq!((progress.value, progress.at), (11, time(30)));
    sim.at(149).reports(Some("11"), None);
    assert_eq!(sim.step().delete_pod, None, "judged from t(30), not t(20)");
    let plan = sim.at(150).reports(Some("11"), None).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        plan.status.last_failure.unwrap().reason,
        FailureReason::NoProgress
    );
}

#[test]
fn an_agent_that_never_reports_is_judged_after_its_grace_period() {
    let mut sim = beating(stalls_after(120));
    // Renewing its Lease, reporting nothing: stuck 60 s (grace) + 120 s after it started.
    let alive = sim.at(184).reports(None, None).step();
    assert_eq!(alive.delete_pod, None);
    assert!(alive.requeue_at <= Some(t(185)));
    let plan = sim.at(185).reports(None, None).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    let message = plan.status.last_failure.unwrap().message.unwrap();
    assert!(
        message.contains("no progress reported within 1m + 2m"),
        "{message}"
    );
    assert_eq!(plan.status.restart_history[0].progress, None);
}

#[test]
fn a_resumed_attempt_must_grow_past_where_it_resumed() {
    let mut sim = beating(stalls_after(120));
    sim.at(20).reports(Some("10"), None).step();
    sim.at(140).reports(Some("10"), None).step(); // NoProgress
    sim.restart_when_due();
    sim.runs(155);
    // Attempt 2 resumed at 10 and reports 10 again: that is no growth.
    for at in [160, 200, 240, 274] {
        let plan = sim.at(at).reports(Some("10"), None).step();
        assert_eq!(plan.delete_pod, None, "t({at})");
    }
    let plan = sim.at(335).reports(Some("10"), None).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-2"));
    let message = plan.status.last_failure.unwrap().message.unwrap();
    assert!(message.contains("did not grow past 10"), "{message}");
    assert_eq!(plan.status.consecutive_failures, 2);
}

#[test]
fn steady_progress_is_never_a_stall() {
    let mut sim = beating(stalls_after(120));
    // A step every 100 s, renewing every 25 s: slow, but within the timeout each time.
    for at in (20..2000).step_by(25) {
        let value = (at / 100).to_string();
        let plan = sim.at(at).reports(Some(&value), None).step();
        assert_eq!(plan.delete_pod, None, "t({at})");
        assert_eq!(plan.status.phase, Some(Phase::Running), "t({at})");
    }
    assert_eq!(sim.status().restart_count, 0);
    assert_eq!(sim.status().progress.as_ref().unwrap().value, 19);
}

#[test]
fn without_a_heartbeat_there_is_nothing_to_judge() {
    let mut sim = Sim::running(stalls_after(120));
    let plan = sim.at(10_000).step();
    assert_eq!(plan.delete_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.requeue_at, None);
}

#[test]
fn rules_can_match_no_progress() {
    let mut policy = stalls_after(120);
    if let PolicyResolution::Named(_, spec) = &mut policy {
        spec.rules = vec![Rule {
            exit_codes: None,
            reasons: vec![FailureReason::NoProgress],
            action: RuleAction::Stop,
        }];
    }
    let mut sim = beating(policy);
    let plan = sim.at(185).reports(None, None).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert_eq!(
        plan.status.last_failure.unwrap().class,
        FailureClass::Permanent
    );
}

/// `fast`, healthy again after 60 s, with or without progress required for that.
fn resets_after_a_minute(required: bool) -> PolicyResolution {
    named(RestartPolicySpec {
        reset_after: secs(60),
        progress: Some(ProgressPolicy {
            stall_timeout: None,
            required_for_reset: required,
            max_extension: None,
        }),
        ..fast()
    })
}

/// Attempt 1 crashed at t(15); attempt 2 runs from t(30).
fn second_attempt(required: bool) -> Sim {
    let mut sim = Sim::running(resets_after_a_minute(required));
    sim.crash(5, 15);
    sim.restart_when_due();
    sim.runs(30);
    sim.at(40).reports(None, None).step();
    assert_eq!(sim.status().consecutive_failures, 1);
    sim
}

#[test]
fn a_long_run_without_progress_resets_nothing_when_progress_is_required() {
    let mut loose = second_attempt(false);
    loose.at(100).step();
    assert_eq!(
        loose.status().consecutive_failures,
        0,
        "not required: reset"
    );

    let mut sim = second_attempt(true);
    let plan = sim.at(100).reports(None, None).step();
    assert_eq!(plan.status.consecutive_failures, 1, "no progress: no reset");
    // It gets somewhere: now the run counts.
    let plan = sim.at(110).reports(Some("1"), None).step();
    assert_eq!(plan.status.consecutive_failures, 0);
}

#[test]
fn a_failure_after_a_long_run_without_progress_keeps_counting() {
    let mut loose = second_attempt(false);
    let plan = loose.crash(30, 200);
    assert_eq!(plan.status.consecutive_failures, 1, "a new count");
    assert_eq!(plan.status.restart_history[0].backoff, Some(secs(10)));

    let mut sim = second_attempt(true);
    sim.input.lease = None;
    let plan = sim.crash(30, 200);
    assert_eq!(plan.status.consecutive_failures, 2, "the loop goes on");
    assert_eq!(plan.status.restart_history[0].backoff, Some(secs(20)));

    // Progress in its last words counts: the run got somewhere.
    let mut sim = second_attempt(true);
    sim.input.lease = None;
    sim.runs(30).exits(1, Some(r#"{"progress": 4}"#), 200);
    let plan = sim.at(200).step();
    assert_eq!(plan.status.consecutive_failures, 1);
}
