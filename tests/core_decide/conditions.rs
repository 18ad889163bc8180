//! The conditions' transition times, and a steady state that writes nothing.

use agent_supervisor::api::Heartbeat;
use agent_supervisor::supervise::LeaseFacts;
use agent_supervisor::supervise::conditions::{CIRCUIT_BREAKER_OPEN, POLICY_RESOLVED, READY};

use crate::build::{breaker_policy, condition, fast, named, secs, time};
use crate::clock::t;
use crate::sim::{Sim, fail_times};

#[test]
fn conditions_keep_their_transition_time_unless_the_status_flips() {
    let mut sim = Sim::new(named(fast()));
    let first = sim.step();
    assert_eq!(
        condition(&first.status, READY).last_transition_time,
        time(0)
    );
    // Placed at once and still pending at t(30): nothing flipped.
    sim.placed(0).at(30).step();
    assert_eq!(condition(sim.status(), READY).last_transition_time, time(0));
    sim.runs(40);
    sim.at(50).step();
    let ready = condition(sim.status(), READY).clone();
    assert_eq!(
        (ready.status.as_str(), ready.last_transition_time),
        ("True", time(50))
    );
    sim.at(500).step();
    assert_eq!(
        condition(sim.status(), READY).last_transition_time,
        time(50)
    );
    // The reason changes, the status does not: the time stays.
    sim.crash(10, 600);
    let ready = condition(sim.status(), READY).clone();
    assert_eq!(ready.last_transition_time, time(600));
    assert_eq!(ready.reason, "BackingOff");
    sim.restart_when_due();
    let ready = condition(sim.status(), READY).clone();
    assert_eq!(ready.reason, "PodPending");
    assert_eq!(ready.last_transition_time, time(600), "still False");
    // PolicyResolved has been True since the first write.
    assert_eq!(
        condition(sim.status(), POLICY_RESOLVED).last_transition_time,
        time(0)
    );
    assert_eq!(
        condition(sim.status(), CIRCUIT_BREAKER_OPEN).last_transition_time,
        time(0)
    );
}

#[test]
fn steady_state_is_silent() {
    let mut hb = Sim::new(named(fast()));
    hb.input.agent.heartbeat = Some(Heartbeat {
        timeout: secs(60),
        grace_period: None,
    });
    hb.step();
    hb.runs(5);
    hb.input.lease = Some(LeaseFacts {
        expect_slow_until: None,
        holder: Some("researcher-1".to_string()),
        renew_time: Some(t(100)),
        reported: Default::default(),
    });
    let cases = [
        ("running", Sim::running(named(fast()))),
        ("running with a heartbeat", hb),
        ("pending", {
            let mut sim = Sim::new(named(fast()));
            sim.step();
            sim.placed(1);
            sim
        }),
        ("backing off", {
            let mut sim = Sim::running(named(fast()));
            sim.crash(5, 100);
            sim
        }),
        ("circuit open", {
            let mut sim = Sim::running(breaker_policy());
            fail_times(&mut sim, 3, 100);
            sim
        }),
        ("shut down", {
            let mut sim = Sim::running(named(fast()));
            sim.runs(5).exits(0, None, 100);
            sim.at(100).step();
            sim
        }),
    ];
    for (name, mut sim) in cases {
        let first = sim.at(102).step();
        let second = sim.at(103).decide();
        assert_eq!(second.status, first.status, "{name}: nothing to write");
        assert_eq!(second.create_pod, None, "{name}");
        assert_eq!(second.delete_pod, None, "{name}");
        assert_eq!(second.record_shutdown, None, "{name}");
        assert!(second.events.is_empty(), "{name}: {:?}", second.events);
    }
}
