//! The group's intensity: restarts counted within the window, disruptions counted toward
//! nothing, and giving up when there are too many.

use agent_supervisor::api::{GroupPhase, GroupTrigger, StopReason, Strategy, Time};
use agent_supervisor::supervise::conditions::READY;
use agent_supervisor::supervise::group::{ESCALATED, GroupEventReason};

use super::build::{
    G, cond, condition, crashed, evicted, is, listed, order, ordered, pending, reasons, running,
    spec, stopped, stops, t,
};

#[test]
fn max_restarts_zero_gives_up_at_the_first_crash() {
    let mut zero = spec(Strategy::OneForOne, &["a", "b"]);
    zero.max_restarts = 0;
    let mut g = G::new(zero);
    let plan = g.at(100).set("a", crashed(1, Some(110))).step();
    let s = &plan.status;
    let gave_up = s.gave_up.as_ref().expect("gave up");
    assert_eq!((gave_up.at.0, gave_up.incarnation), (t(100), 1));
    assert_eq!(gave_up.member.as_deref(), Some("a"));
    assert_eq!(reasons(&plan), [GroupEventReason::GroupEscalated]);
    // The crash is taken in (it made the group give up), and is no restart.
    assert_eq!(order(s, "a"), Some((1, t(110))));
    assert_eq!(s.restart_count, 0);
    assert_eq!(s.restart_history, []);
}

#[test]
fn max_restarts_within_the_window_are_allowed_and_one_more_gives_up() {
    let mut two = spec(Strategy::OneForOne, &["a", "b"]);
    two.max_restarts = 2;
    let mut g = G::new(two);
    let plan = g.at(10).set("a", crashed(1, None)).step();
    assert!(plan.events[0].note.ends_with("(1 of 2 restarts within 5m)"));
    g.at(15).set("a", running(2)).step();
    let plan = g.at(20).set("a", crashed(2, None)).step();
    assert!(plan.events[0].note.ends_with("(2 of 2 restarts within 5m)"));
    assert_eq!(plan.status.gave_up, None);
    g.at(25).set("a", running(3)).step();
    let plan = g.at(30).set("b", crashed(1, None)).step();
    assert_eq!(reasons(&plan), [GroupEventReason::GroupEscalated]);
    assert_eq!(
        plan.events[0].note,
        "b crashed (Error) with 2 restarts within 5m already (maxRestarts 2): giving up, \
         stopping every member; annotate the group with \
         supervisor.dev/reset-requested-at=<new value> to resume"
    );
    assert_eq!(plan.status.restart_count, 2);
}

#[test]
fn restarts_outside_the_window_are_forgotten() {
    let mut one = spec(Strategy::OneForOne, &["a"]);
    one.max_restarts = 1;
    one.window = agent_supervisor::api::Duration::from_secs(60);
    let mut g = G::new(one);
    g.at(100).set("a", crashed(1, None)).step();
    g.set("a", running(2)).step();
    // Exactly one window later, the first restart is out of it.
    let plan = g.at(160).set("a", crashed(2, None)).step();
    assert_eq!(plan.status.gave_up, None);
    assert_eq!(plan.status.recent_restarts, [Time(t(160))]);
    g.set("a", running(3)).step();
    // 59s later, it is still in: one more is too many.
    let plan = g.at(219).set("a", crashed(3, None)).step();
    assert!(plan.status.gave_up.is_some());
}

#[test]
fn disruptions_restart_by_the_strategy_and_count_toward_nothing() {
    let mut zero = spec(Strategy::OneForAll, &["a", "b"]);
    zero.max_restarts = 0;
    let mut g = G::new(zero);
    let plan = g.at(100).set("a", evicted(1)).step();
    let s = &plan.status;
    assert_eq!(s.gave_up, None);
    assert_eq!(s.recent_restarts, []);
    assert_eq!(ordered(s), ["a", "b"]);
    assert_eq!(order(s, "a"), Some((1, t(100))));
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.restart_history[0].trigger, GroupTrigger::Disruption);
    assert_eq!(s.restart_history[0].reason.as_deref(), Some("Evicted"));
    assert_eq!(cond(s, ESCALATED), is("False", "WithinIntensity"));
}

// --- Giving up -------------------------------------------------------------------------------

#[test]
fn a_group_that_gives_up_stops_every_member_and_says_so() {
    let mut zero = spec(Strategy::OneForAll, &["a", "b", "c"]);
    zero.max_restarts = 0;
    let mut g = G::new(zero);
    let plan = g.at(100).set("b", crashed(1, Some(110))).step();
    let s = &plan.status;
    assert_eq!(stops(s), [Some(StopReason::GaveUp); 3]);
    for m in &s.members {
        let stop = m.stop.as_ref().unwrap();
        assert_eq!(stop.message.as_deref(), Some("group team gave up"));
        assert_eq!(stop.kind, None);
    }
    assert_eq!(s.phase, Some(GroupPhase::Escalated));
    assert_eq!(cond(s, ESCALATED), is("True", "GaveUp"));
    assert_eq!(
        condition(s, ESCALATED).message,
        "more than 0 restarts within 5m (b crashed last)"
    );
    assert_eq!(cond(s, READY).0, "False");
    assert_eq!(reasons(&plan), [GroupEventReason::GroupEscalated]);
    assert!(plan.events[0].warning);
    assert!(plan.events[0].note.ends_with(
        "annotate the group with supervisor.dev/reset-requested-at=<new value> to resume"
    ));
    // Only b's crash is taken in; nobody is restarted.
    assert_eq!(ordered(s), ["b"]);
    let d = g.directive("a");
    assert_eq!(d.stop.map(|s| s.reason), Some(StopReason::GaveUp));

    // It stays given up, silently. A crash that had not reached it yet is taken in, alone: no
    // restart, nothing counted.
    let plan = g.at(200).set("a", crashed(1, None)).step();
    assert_eq!(plan.events, []);
    assert_eq!(ordered(&plan.status), ["a", "b"]);
    assert_eq!(order(&plan.status, "a"), Some((1, t(200))));
    assert_eq!(
        (plan.status.restart_count, plan.status.restart_history.len()),
        (0, 0)
    );
    assert_eq!(stops(&plan.status), [Some(StopReason::GaveUp); 3]);
    assert_eq!(plan.status.phase, Some(GroupPhase::Escalated));
}

#[test]
fn crashes_pending_when_the_group_gives_up_are_not_counted_after_a_reset() {
    let mut one = spec(Strategy::OneForAll, &["a", "b"]);
    one.max_restarts = 1;
    let mut g = G::new(one);
    g.at(100).set("a", crashed(1, None)).step();
    g.at(110).set("a", running(2)).set("b", running(2)).step();
    // a and b crash together: a's crash is one too many; b's is taken in with the give-up.
    let plan = g
        .at(200)
        .set("a", crashed(2, None))
        .set("b", crashed(2, Some(230)))
        .step();
    assert!(plan.status.gave_up.is_some());
    assert_eq!(order(&plan.status, "a"), Some((2, t(200))));
    assert_eq!(order(&plan.status, "b"), Some((2, t(230))));
    // Both are stopped; the group is reset, and both resume on their orders: a has started
    // again, b (its crash still on record) is about to.
    g.at(250).set("a", stopped(2)).set("b", stopped(2));
    g.input.group.reset_requested = Some("r1".to_string());
    g.step();
    let plan = g
        .at(251)
        .set("a", pending(3))
        .set("b", crashed(2, None))
        .step();
    assert_eq!(plan.events, [], "b's old crash restarts nobody");
    assert_eq!(plan.status.recent_restarts, [], "and counts toward nothing");
    assert_eq!(
        order(&plan.status, "a"),
        Some((2, t(200))),
        "a is not restarted again"
    );
}

#[test]
fn a_child_group_that_gives_up_says_it_escalates() {
    let mut zero = spec(Strategy::OneForOne, &["a"]);
    zero.max_restarts = 0;
    let mut g = G::new(zero);
    g.input.parent = Some(listed("root"));
    let plan = g.at(100).set("a", crashed(1, None)).step();
    assert_eq!(reasons(&plan), [GroupEventReason::GroupEscalated]);
    assert!(
        plan.events[0].note.ends_with("escalating to group root"),
        "{}",
        plan.events[0].note
    );
    assert_eq!(plan.status.gave_up.as_ref().unwrap().incarnation, 1);
}
