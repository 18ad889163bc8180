//! Suspend: the pod stops once, a scheduled restart is cancelled, resume starts a new pod.

use agent_supervisor::api::Phase;
use agent_supervisor::supervise::EventReason;
use agent_supervisor::supervise::conditions::READY;
use agent_supervisor::supervise::input::PodPhase;

use crate::build::{condition, fast, named, reasons};
use crate::sim::Sim;

#[test]
fn suspend_stops_the_pod_once_and_resume_starts_a_new_one() {
    let mut sim = Sim::running(named(fast()));
    sim.input.agent.suspend = true;
    let plan = sim.at(50).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Suspended));
    assert_eq!(reasons(&plan), [EventReason::Suspended]);
    assert_eq!(condition(&plan.status, READY).reason, "Suspended");

    // The pod is going, then gone: nothing more to do, and nothing more said.
    let again = sim.at(60).step();
    assert_eq!(again.delete_pod, None);
    assert!(again.events.is_empty());
    sim.pod().phase = PodPhase::Failed;
    let again = sim.at(70).step();
    assert_eq!(again.delete_pod, None);
    assert_eq!(again.create_pod, None);
    assert!(again.events.is_empty());
    assert_eq!(
        again.status.last_failure, None,
        "a suspension is not a failure"
    );
    assert_eq!(again.status.consecutive_failures, 0);

    sim.input.agent.suspend = false;
    let plan = sim.at(80).step();
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(plan.status.last_failure, None);
}

#[test]
fn suspending_a_backing_off_agent_cancels_the_restart() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.input.agent.suspend = true;
    let plan = sim.at(55).step();
    assert_eq!(plan.delete_pod, None, "the crashed pod is not live");
    assert_eq!(plan.status.next_restart_at, None);
    assert_eq!(plan.status.phase, Some(Phase::Suspended));
    assert_eq!(sim.at(10_000).step().create_pod, None);
}
