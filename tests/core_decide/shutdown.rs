//! A shutdown set by someone else: respected, left as it was, holding every restart.

use agent_supervisor::api::Phase;
use agent_supervisor::supervise::EventReason;
use jiff::SignedDuration;

use crate::build::{economy_shutdown, fast, named, reasons};
use crate::sim::Sim;

#[test]
fn a_shutdown_set_by_someone_else_is_respected_and_left_exactly_as_it_was() {
    let mut sim = Sim::running(named(fast()));
    sim.input.status.shutdown = Some(economy_shutdown());
    let plan = sim.at(50).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(
        plan.delete_pod, None,
        "the running pod is not the operator's to stop"
    );
    assert_eq!(plan.record_shutdown, None, "never written by the operator");
    assert_eq!(plan.status.shutdown, Some(economy_shutdown()));
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert_eq!(reasons(&plan), [EventReason::ShutdownRespected]);
    assert_eq!(plan.status.next_restart_at, None);

    // Once: not again on the next decision.
    let again = sim.at(60).step();
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert_eq!(again.status, plan.status);

    // The pod crashes meanwhile: nothing is counted or restarted.
    let before = sim.status().clone();
    let plan = sim.crash(5, 70);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None);
    assert!(plan.events.is_empty());
    assert_eq!(
        plan.status.consecutive_failures,
        before.consecutive_failures
    );
    assert_eq!(plan.status.last_failure, before.last_failure);
    assert_eq!(plan.status.restart_history, before.restart_history);
    assert_eq!(plan.status.shutdown, Some(economy_shutdown()));

    // Cleared: supervision resumes with a new pod.
    sim.input.status.shutdown = None;
    let plan = sim.at(80).step();
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(2));
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(plan.status.shutdown, None);
}

#[test]
fn a_shutdown_holds_a_scheduled_restart_and_a_manual_one() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    let due = sim.status().next_restart_at.clone().unwrap().0;
    sim.input.status.shutdown = Some(economy_shutdown());
    sim.input.agent.restart_requested = Some("now".to_string());
    sim.input.agent.reset_requested = Some("now".to_string());
    for now in [due, due + SignedDuration::from_secs(3600)] {
        sim.input.now = now;
        let plan = sim.step();
        assert_eq!(plan.create_pod, None);
        assert_eq!(plan.delete_pod, None);
        assert_eq!(plan.status.next_restart_at, None);
        assert_eq!(plan.status.shutdown, Some(economy_shutdown()));
    }
}

#[test]
fn clearing_a_shutdown_while_the_pod_still_runs_adopts_it() {
    let mut sim = Sim::running(named(fast()));
    sim.input.status.shutdown = Some(economy_shutdown());
    sim.at(50).step();
    sim.input.status.shutdown = None;
    let plan = sim.at(60).step();
    assert_eq!(plan.create_pod, None, "the pod is still live");
    assert_eq!(plan.delete_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Running));
}
