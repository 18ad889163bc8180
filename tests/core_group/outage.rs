//! A member held by its policy's outage holds its group's restart too: the group hears of the
//! crash only when the outage lets the member go, and then restarts by its strategy without
//! counting toward its intensity (as for a disruption).

use agent_supervisor::api::{GroupTrigger, Phase, Strategy, Trigger};
use agent_supervisor::supervise::group::{AgentView, Crash, MemberState};

use super::build::*;
use super::lifecycle::{agent, backing_off, pending_record};

#[test]
fn a_held_member_is_no_crash_for_its_group_until_it_is_let_go() {
    let held_record = pending_record(
        1,
        Trigger::Outage,
        agent_supervisor::api::FailureReason::Error,
    );
    let mut held = backing_off(1, held_record.clone());
    held.phase = Some(Phase::CircuitOpen);
    held.next_restart_at = None;
    let view = agent_supervisor::controller::facts::agent_view(&agent(false, Some(held)));
    assert_eq!(view.crash, None, "held: the group waits");
    assert_eq!(view.phase, Some(Phase::CircuitOpen));

    // Let go (the outage ended, or it is the probe): a restart due now, counted toward nothing.
    let released = backing_off(1, held_record);
    let view = agent_supervisor::controller::facts::agent_view(&agent(false, Some(released)));
    assert_eq!(
        view.crash,
        Some(Crash {
            attempt: 1,
            reason: "Error".to_string(),
            trigger: GroupTrigger::Outage,
            due: Some(t(110)),
            counted: false,
        })
    );
    // A restart the agent asked to wait for is likewise counted toward nothing.
    let asked = backing_off(
        1,
        pending_record(
            1,
            Trigger::RetryAfter,
            agent_supervisor::api::FailureReason::Error,
        ),
    );
    let crash = agent_supervisor::controller::facts::agent_view(&agent(false, Some(asked)))
        .crash
        .expect("a crash");
    assert_eq!(
        (crash.trigger, crash.counted),
        (GroupTrigger::RetryAfter, false)
    );
}

fn held(attempt: u32) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::CircuitOpen),
        attempt,
        ..AgentView::default()
    })
}

fn let_go(attempt: u32, at: i64) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::BackingOff),
        attempt,
        crash: Some(Crash {
            attempt,
            reason: "Error".to_string(),
            trigger: GroupTrigger::Outage,
            due: Some(t(at)),
            counted: false,
        }),
        ..AgentView::default()
    })
}

#[test]
fn the_group_restarts_a_held_member_with_its_siblings_only_when_the_outage_lets_it_go() {
    let mut zero = spec(Strategy::OneForAll, &["a", "b", "c"]);
    zero.max_restarts = 0;
    let mut g = G::new(zero);
    // Held for minutes: the siblings keep running, nothing is ordered, nothing counted.
    for at in [100, 200, 400] {
        let plan = g.at(at).set("a", held(1)).step();
        assert_eq!(ordered(&plan.status), Vec::<&str>::new(), "at {at}");
        assert_eq!(plan.status.restart_count, 0);
        assert_eq!(plan.status.gave_up, None);
    }
    // The outage ends: one restart of all three, at once, counted toward no intensity.
    let plan = g.at(500).set("a", let_go(1, 500)).step();
    let s = &plan.status;
    assert_eq!(ordered(s), ["a", "b", "c"]);
    assert_eq!(order(s, "b"), Some((1, t(500))));
    assert_eq!(s.gave_up, None, "maxRestarts 0, and no give-up");
    assert_eq!(s.recent_restarts, []);
    assert_eq!(s.restart_history[0].trigger, GroupTrigger::Outage);
}
