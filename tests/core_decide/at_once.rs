//! A restart due at once, made with its failure in one decision, and the same status as when
//! it is made in two.

use agent_supervisor::api::{
    Backoff, BackoffType, FailureReason, Phase, RestartPolicySpec, Trigger,
};
use agent_supervisor::supervise::{EventReason, PolicyResolution};

use crate::build::{breaker_policy, fast, limited, named, reasons, secs, time};
use crate::clock::t;
use crate::sim::Sim;

fn immediate() -> PolicyResolution {
    named(RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Immediate,
            ..fast().backoff
        },
        ..fast()
    })
}

#[test]
fn a_restart_due_at_once_is_made_with_the_failure_in_one_decision() {
    let mut sim = Sim::running(immediate()).at_once();
    let plan = sim.crash(40, 100);
    let new = plan
        .create_pod
        .as_ref()
        .expect("restarted in the same decision");
    assert_eq!((new.name.as_str(), new.attempt), ("researcher-2", 2));
    assert_eq!(new.origin.trigger, Some(Trigger::Failure));
    assert_eq!(plan.delete_pod, None, "the pod has ended");
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!((s.attempt, s.restart_count), (2, 1));
    assert_eq!(s.pod_name.as_deref(), Some("researcher-2"));
    assert_eq!(s.next_restart_at, None);
    assert_eq!(
        s.last_failure.as_ref().map(|f| f.reason),
        Some(FailureReason::Error)
    );
    let record = &s.restart_history[0];
    assert_eq!(record.attempt, 1);
    assert_eq!(record.failed_at, Some(time(100)));
    assert_eq!(record.backoff, Some(secs(0)));
    assert_eq!(record.restarted_at, Some(time(100)));
    assert_eq!(
        s.recent_restarts,
        vec![time(100)],
        "counted toward the limit"
    );
    // One Event tells of both, about the pod that ended.
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert!(plan.events[0].warning());
    assert_eq!(plan.events[0].pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        plan.events[0].note,
        "Pod researcher-1 failed: Error (exit code 1): boom; restarted as pod researcher-2 (attempt 2, restart 1; failure 1 in a row)"
    );
    assert_eq!(plan.requeue_at, Some(t(100 + 600)), "the startup timeout");
}

#[test]
fn made_at_once_or_in_two_decisions_a_restart_leaves_the_same_status() {
    for policy in [immediate(), breaker_policy(), limited(2, 3600)] {
        let mut once = Sim::running(policy.clone()).at_once();
        let mut twice = Sim::running(policy.clone());
        let mut now = 100;
        for failure in 1..=4 {
            let at_once = once.crash(now - 20, now);
            let recorded = twice.crash(now - 20, now);
            if recorded.status.next_restart_at == Some(time(now)) {
                assert!(at_once.create_pod.is_some(), "failure {failure}");
                let created = twice.step();
                assert_eq!(created.create_pod, at_once.create_pod, "failure {failure}");
            } else {
                assert_eq!(
                    at_once.create_pod, None,
                    "failure {failure}: not due at once"
                );
                assert_eq!(reasons(&at_once), reasons(&recorded));
            }
            assert_eq!(once.status(), twice.status(), "failure {failure}");
            if once.status().phase != Some(Phase::Pending) {
                break;
            }
            now += 60;
        }
    }
}

#[test]
fn a_restart_that_waits_is_not_made_with_the_failure() {
    // A backoff: recorded, restarted when due.
    let mut sim = Sim::running(named(fast())).at_once();
    let plan = sim.crash(40, 100);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.next_restart_at, Some(time(110)));
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert!(
        plan.events[0]
            .note
            .ends_with("restarting in 10s at 2025-06-01T12:01:50Z (failure 1 in a row)"),
        "{}",
        plan.events[0].note
    );

    // A member of a group: its group restarts it (and its siblings) together.
    let mut sim = Sim::running(immediate()).at_once();
    sim.input.group = Some(agent_supervisor::supervise::group::Directive {
        group: "crew".to_string(),
        listed: true,
        ..Default::default()
    });
    let plan = sim.crash(40, 100);
    assert_eq!(plan.create_pod, None, "{:?}", plan.events);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));

    // The budget has no token for it: the failure is recorded, the restart stays due.
    let mut sim = Sim::running(immediate());
    let plan = sim.crash(40, 100);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.next_restart_at, Some(time(100)));
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
}

#[test]
fn a_pod_adopted_after_a_lost_write_that_fails_is_restarted_at_once_as_its_own_attempt() {
    // Found by the property test: the status still names attempt 1 (the write that recorded
    // researcher-2 was lost), and researcher-2 has failed too.
    let mut sim = Sim::running(immediate()).at_once();
    let recorded = sim.status().clone();
    let ended = sim.input.pod.clone();
    let first = sim.crash(40, 100);
    assert_eq!(first.create_pod.as_ref().map(|p| p.attempt), Some(2));
    sim.input.status = recorded;
    sim.input.previous = ended;
    let plan = sim.crash(110, 130);
    let new = plan.create_pod.as_ref().expect("restarted at once");
    assert_eq!((new.name.as_str(), new.attempt), ("researcher-3", 3));
    let s = &plan.status;
    assert_eq!((s.attempt, s.restart_count), (3, 2));
    let attempts: Vec<_> = s.restart_history.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [2, 1], "each record is the attempt that ended");
    assert_eq!(s.restart_history[0].failed_at, Some(time(130)));
    assert_eq!(s.restart_history[0].restarted_at, Some(time(130)));
    assert_eq!(
        s.last_failure.as_ref().and_then(|f| f.pod_name.as_deref()),
        Some("researcher-2")
    );
}
