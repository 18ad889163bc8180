//! Heartbeats and startup in the decision (a hung pod, a pod that never starts), and when a
//! replacement counts as running: once it has stayed up.

use agent_supervisor::api::{
    FailureClass, FailureReason, Heartbeat, Phase, RestartPolicySpec, Trigger,
};
use agent_supervisor::supervise::conditions::READY;
use agent_supervisor::supervise::input::ContainerPhase;
use agent_supervisor::supervise::{EventReason, LeaseFacts, SETTLE};

use crate::build::{condition, fast, named, reasons, secs, time};
use crate::clock::t;
use crate::sim::Sim;

// --- Heartbeats and startup in the decision ----------------------------------------------------

#[test]
fn a_hung_pod_is_deleted_and_restarted_as_heartbeat_lost() {
    let mut sim = Sim::new(named(fast()));
    sim.input.agent.heartbeat = Some(Heartbeat {
        timeout: secs(30),
        grace_period: Some(secs(60)),
    });
    sim.step();
    sim.runs(5);
    sim.input.lease = Some(LeaseFacts {
        expect_slow_until: None,
        holder: Some("researcher-1".to_string()),
        renew_time: Some(t(100)),
        reported: Default::default(),
    });
    let alive = sim.at(110).step();
    assert_eq!(alive.status.phase, Some(Phase::Running));
    assert_eq!(alive.requeue_at, Some(t(130)), "look again when it expires");
    assert_eq!(alive.delete_pod, None);

    let plan = sim.at(131).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(plan.create_pod, None);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert_eq!(s.next_restart_at, Some(time(141)));
    let failure = s.last_failure.clone().unwrap();
    assert_eq!(failure.reason, FailureReason::HeartbeatLost);
    assert_eq!(failure.class, FailureClass::Transient);
    assert_eq!(failure.ran_for, Some(secs(126)));
    assert_eq!(s.restart_history[0].trigger, Trigger::HeartbeatLost);
    assert_eq!(reasons(&plan), [EventReason::HeartbeatLost]);
    assert!(plan.events[0].warning());

    // The deleted pod is going: the restart still happens when due, and once.
    let plan = sim.restart_when_due();
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(2));
    assert_eq!(plan.delete_pod, None);
}

#[test]
fn a_pod_that_never_starts_is_deleted_and_restarted_as_startup_timeout() {
    let policy = RestartPolicySpec {
        startup_timeout: secs(120),
        ..fast()
    };
    let mut sim = Sim::new(named(policy));
    let plan = sim.step();
    assert_eq!(plan.requeue_at, Some(t(120)), "the startup timeout");
    let placed = sim.placed(0).at(1).step();
    assert_eq!(placed.requeue_at, Some(t(120)));
    let recorded = sim.at(30).step();
    assert_eq!(recorded.status.phase, Some(Phase::Pending));
    assert_eq!(recorded.requeue_at, Some(t(120)));
    sim.pod().containers[0].state = ContainerPhase::Waiting {
        reason: Some("ImagePullBackOff".to_string()),
        message: None,
    };
    let waiting = sim.at(119).step();
    assert_eq!(waiting.status.phase, Some(Phase::Pending));
    assert_eq!(waiting.delete_pod, None);
    let plan = sim.at(121).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    let failure = plan.status.last_failure.clone().unwrap();
    assert_eq!(failure.reason, FailureReason::StartupTimeout);
    assert!(failure.message.unwrap().contains("ImagePullBackOff"));
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
}

// --- Running after a failure: once it has stayed up -----------------------------------------

const SETTLE_S: i64 = SETTLE.as_secs() as i64;

#[test]
fn a_first_pod_counts_as_running_as_soon_as_it_runs() {
    let mut sim = Sim::new(named(fast()));
    sim.step();
    sim.runs(5);
    let plan = sim.at(5).step();
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(condition(&plan.status, READY).status, "True");
}

#[test]
fn after_a_failure_the_replacement_counts_as_running_once_it_has_stayed_up() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    let restarted = sim.status().clone();
    assert_eq!(restarted.phase, Some(Phase::Pending));
    sim.runs(61);
    let early = sim.at(61 + SETTLE_S - 1).step();
    assert_eq!(early.status, restarted, "nothing new to write yet");
    assert_eq!(
        early.requeue_at,
        Some(t(61 + SETTLE_S)),
        "looked at again once settled"
    );
    let up = sim.at(61 + SETTLE_S).step();
    assert_eq!(up.status.phase, Some(Phase::Running));
    let ready = condition(&up.status, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "PodReady")
    );
}

#[test]
fn a_replacement_that_crashes_before_it_settles_was_never_running() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    sim.runs(61);
    sim.at(62).step();
    let plan = sim.crash(61, 61 + SETTLE_S - 1);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.consecutive_failures, 2);
    let ready = condition(&plan.status, READY);
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.last_transition_time,
        time(50),
        "Ready never flipped in between"
    );
    assert_eq!(
        plan.status.restart_history.len(),
        2,
        "both crashes recorded"
    );
}
