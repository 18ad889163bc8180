//! The restart limit: more restarts than `maxRestarts` within the window give up.

use agent_supervisor::api::Phase;
use agent_supervisor::supervise::EventReason;
use agent_supervisor::supervise::conditions::READY;

use crate::build::{condition, limited, reasons, time};
use crate::clock::t;
use crate::sim::Sim;

#[test]
fn more_restarts_than_the_limit_within_the_window_give_up() {
    let mut sim = Sim::running(limited(2, 3600));
    sim.crash(5, 100);
    sim.restart_when_due();
    sim.crash(120, 200);
    sim.restart_when_due();
    assert_eq!(sim.status().restart_count, 2);

    let plan = sim.crash(240, 300);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Stopped));
    assert_eq!(plan.create_pod, None);
    assert_eq!(s.next_restart_at, None);
    assert_eq!(
        reasons(&plan),
        [EventReason::Crashed, EventReason::RestartLimitExceeded]
    );
    assert!(plan.events[1].warning());
    let ready = condition(s, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "RestartLimitExceeded")
    );
    assert_eq!(
        s.last_failure.as_ref().map(|f| f.time.clone()),
        Some(time(300)),
        "the failure that gave up is still recorded"
    );

    // Stopped stays stopped, and says so once.
    let later = sim.at(100_000).step();
    assert_eq!(later.create_pod, None);
    assert!(later.events.is_empty());
    assert_eq!(
        condition(&later.status, READY).reason,
        "RestartLimitExceeded"
    );
}

#[test]
fn restarts_outside_the_window_do_not_count() {
    let mut sim = Sim::running(limited(2, 3600));
    sim.crash(5, 100);
    let first = sim.restart_when_due();
    let first_restart = first.status.restart_history[0]
        .restarted_at
        .clone()
        .unwrap();
    sim.crash(2000, 2050);
    sim.restart_when_due();
    // The first restart is now more than an hour ago: only one restart is within the window.
    let crash_at = first_restart.0.as_second() - t(0).as_second() + 3601;
    let plan = sim.crash(crash_at - 60, crash_at);
    assert_eq!(
        plan.status.phase,
        Some(Phase::BackingOff),
        "{:?}",
        plan.events
    );
    sim.restart_when_due();
    // Two restarts within the hour now.
    let plan = sim.crash(crash_at + 60, crash_at + 120);
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert!(reasons(&plan).contains(&EventReason::RestartLimitExceeded));
}

#[test]
fn zero_max_restarts_is_unlimited() {
    let mut sim = Sim::running(limited(0, 3600));
    let mut now = 100;
    for _ in 0..20 {
        let plan = sim.crash(now - 10, now);
        assert_eq!(plan.status.phase, Some(Phase::BackingOff));
        sim.restart_when_due();
        now = sim.input.now.as_second() - t(0).as_second() + 30;
    }
    assert_eq!(sim.status().restart_count, 20);
}
