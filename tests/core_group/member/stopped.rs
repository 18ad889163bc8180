//! Stopped and shut down by the group: a member of a group that gave up or shut down stops,
//! records a shutdown, and starts again once its group is reset or restarts it.

use agent_supervisor::api::{Phase, Shutdown, ShutdownType, StopReason, Time};
use agent_supervisor::supervise::group::Directive;
use agent_supervisor::supervise::{EventReason, pod_name};

use super::{AGENT, member, ready, reasons, running, stop};
use crate::build::{listed, t};

#[test]
fn a_group_that_gave_up_stops_its_member() {
    let mut sim = running();
    sim.group().stop = stop(StopReason::GaveUp, None, "group team gave up");
    let plan = sim.at(100).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 1)));
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    let (status, reason, message) = ready(&plan.status);
    assert_eq!(
        (status.as_str(), reason.as_str(), message.as_str()),
        ("False", "GroupGaveUp", "group team gave up")
    );
    assert_eq!(reasons(&plan), [EventReason::GroupGaveUp]);
    assert!(plan.events[0].warning());
    assert_eq!(
        plan.events[0].note,
        "group team gave up: stopping pod researcher-1"
    );
    // Said once; nothing starts, not even when a restart order for its attempt is due.
    sim.group().restart = Some((1, t(100)));
    let plan = sim.at(200).step();
    assert_eq!(plan.events, []);
    assert_eq!((plan.create_pod, plan.delete_pod), (None, None));
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
}

#[test]
fn a_crashed_member_whose_group_gave_up_stops_and_resumes_once_reset() {
    let mut sim = running();
    sim.crashes(100);
    // Its crash made the group give up: taken in (an order), and a stop.
    *sim.group() = Directive {
        restart: Some((1, t(110))),
        stop: stop(StopReason::GaveUp, None, "group team gave up"),
        ..listed("team")
    };
    let plan = sim.at(101).step();
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert_eq!(plan.events[0].note, "group team gave up: no pod is started");
    assert_eq!(sim.at(300).step().create_pod, None);

    // The group is reset: the reset is applied once, and it restarts.
    *sim.group() = Directive {
        restart: Some((1, t(110))),
        reset: Some("uid-team/r1".to_string()),
        ..listed("team")
    };
    let plan = sim.at(400).step();
    assert_eq!(reasons(&plan)[0], EventReason::Reset);
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(2));
    let s = &plan.status;
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(
        s.group.as_ref().and_then(|g| g.handled_reset.as_deref()),
        Some("uid-team/r1")
    );
    let plan = sim.runs(405).at(410).step();
    assert!(!reasons(&plan).contains(&EventReason::Reset), "once");
}

#[test]
fn a_group_that_shut_down_stops_its_member_then_records_its_shutdown() {
    let mut sim = running();
    let why = "group team shut down: significant member planner shut down";
    sim.group().stop = stop(StopReason::Shutdown, Some(ShutdownType::Economic), why);
    // First the pod is stopped gracefully...
    let plan = sim.at(100).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 1)));
    assert_eq!(plan.record_shutdown, None);
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert_eq!(ready(&plan.status).1, "GroupShutdown");
    assert_eq!(reasons(&plan), [EventReason::GroupShutdown]);
    // ...then, the pod gone, the shutdown is recorded, with source Group.
    let plan = sim.at(110).step();
    let expected = Shutdown {
        kind: ShutdownType::Economic,
        reason: Some(why.to_string()),
        message: None,
        at: Some(Time(t(110))),
        source: Some("Group".to_string()),
    };
    assert_eq!(plan.record_shutdown.as_ref(), Some(&expected));
    assert_eq!(plan.status.shutdown.as_ref(), Some(&expected));
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert_eq!(reasons(&plan), [EventReason::GroupShutdown]);
    assert_eq!(plan.delete_pod, None);
    // Left alone from then on.
    let plan = sim.at(500).step();
    assert_eq!(plan.events, []);
    assert_eq!((plan.create_pod, plan.delete_pod), (None, None));
    assert_eq!(plan.record_shutdown, None);
}

#[test]
fn a_member_stopped_before_it_ever_started_starts_when_its_group_restarts_it() {
    // Held (Sequential) when its group gave up: stopped in attempt 0.
    let mut sim = member(Directive {
        waiting_for: Some("planner".to_string()),
        ..listed("team")
    });
    sim.step();
    *sim.group() = Directive {
        stop: stop(StopReason::GaveUp, None, "group team gave up"),
        ..listed("team")
    };
    let plan = sim.at(10).step();
    assert_eq!(
        (plan.status.phase, plan.status.attempt),
        (Some(Phase::Stopped), 0)
    );
    // Its group's parent restarts the group: every member is ordered to end its current
    // attempt, here attempt 0, and start the next at t(50).
    *sim.group() = Directive {
        restart: Some((0, t(50))),
        ..listed("team")
    };
    let plan = sim.at(20).step();
    assert_eq!(plan.create_pod, None, "not before the order is due");
    assert_eq!(plan.requeue_at, Some(t(50)));
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(
        ready(&plan.status),
        (
            "False".to_string(),
            "WaitingForGroup".to_string(),
            "group team restarts it at 2025-06-01T12:00:50Z".to_string()
        )
    );
    let plan = sim.at(50).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(1));
    assert_eq!(plan.status.restart_history, [], "a first start");
    assert_eq!(plan.status.restart_count, 0);
}
