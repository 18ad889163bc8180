//! Restarted with a sibling: a member its group restarts for another's crash is stopped and
//! started again without counting it, and stale orders are ignored.

use agent_supervisor::api::{
    Backoff, BackoffType, Duration, Phase, RestartPolicySpec, RestartRecord, Time, Trigger,
};
use agent_supervisor::supervise::group::Directive;
use agent_supervisor::supervise::{EventReason, pod_name};

use super::{AGENT, fast, member_with, ready, reasons, running};
use crate::build::{listed, t};

#[test]
fn a_running_sibling_is_stopped_and_restarted_without_counting_it() {
    let mut sim = running();
    // One crash of its own first, so there are counts to keep.
    sim.crashes(100);
    sim.group().restart = Some((1, t(110)));
    sim.at(110).step();
    sim.runs(115).at(120).step();
    let before = sim.status().clone();
    assert_eq!(before.consecutive_failures, 1);
    assert_eq!(before.recent_restarts.len(), 1);

    // A sibling crashed: the group restarts attempt 2 at t(200).
    sim.group().restart = Some((2, t(200)));
    let plan = sim.at(150).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 2)));
    assert_eq!(plan.create_pod, None);
    let s = &plan.status;
    assert_eq!(
        s.restart_history[0],
        RestartRecord {
            attempt: 2,
            trigger: Trigger::Group,
            failed_at: None,
            reason: None,
            class: None,
            exit_code: None,
            signal: None,
            message: None,
            ran_for: None,
            fingerprint: None,
            backoff: Some(Duration::from_secs(50)),
            restarted_at: None,
            checkpoint: None,
            progress: None,
            spend: None,
        }
    );
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert_eq!(s.next_restart_at, Some(Time(t(200))));
    assert_eq!(plan.requeue_at, Some(t(200)));
    assert_eq!(reasons(&plan), [EventReason::RestartScheduled]);
    assert_eq!(
        plan.events[0].note,
        "Group team restarts it: stopping pod researcher-2; starting again at \
         2025-06-01T12:03:20Z"
    );
    assert_eq!(s.consecutive_failures, before.consecutive_failures);
    assert_eq!(s.recent_restarts, before.recent_restarts);
    assert_eq!(s.circuit_breaker, before.circuit_breaker);

    // Its pod is going; nothing more until t(200).
    let plan = sim.at(160).step();
    assert_eq!((plan.create_pod, plan.delete_pod), (None, None));
    let plan = sim.at(200).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(3));
    let s = &plan.status;
    assert_eq!(s.restart_history[0].restarted_at, Some(Time(t(200))));
    assert_eq!(s.restart_count, before.restart_count + 1);
    assert_eq!(s.consecutive_failures, before.consecutive_failures);
    assert_eq!(
        s.recent_restarts, before.recent_restarts,
        "not toward its limit"
    );

    // The order names attempt 2, now past: attempt 3 runs on.
    let plan = sim.runs(205).at(210).step();
    assert_eq!(plan.delete_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.status.restart_history.len(), 2);
}

#[test]
fn a_stale_order_is_ignored() {
    let mut sim = running();
    sim.group().restart = Some((0, t(50)));
    let plan = sim.at(60).step();
    assert_eq!((plan.delete_pod, plan.create_pod), (None, None));
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.status.restart_history, []);
}

#[test]
fn a_sibling_restarted_under_sequential_waits_for_the_member_before_it() {
    let mut sim = running();
    *sim.group() = Directive {
        restart: Some((1, t(100))),
        waiting_for: Some("planner".to_string()),
        ..listed("team")
    };
    let plan = sim.at(100).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 1)), "stopped at once");
    let plan = sim.at(101).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(ready(&plan.status).1, "WaitingForGroup");
    sim.group().waiting_for = None;
    assert_eq!(sim.at(130).step().create_pod.map(|p| p.attempt), Some(2));
}

#[test]
fn a_member_its_own_policy_gave_up_on_is_restarted_by_its_group() {
    let never = RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Never,
            ..fast().backoff
        },
        ..fast()
    };
    let mut sim = member_with(never, listed("team"));
    sim.step();
    sim.runs(5).at(10).step();
    assert_eq!(sim.crashes(100).status.phase, Some(Phase::Stopped));
    sim.group().restart = Some((1, t(150)));
    let plan = sim.at(150).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(2));
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::Group);
}
