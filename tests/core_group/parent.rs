//! A parent and its child groups: a child's give-up restarts it, and the parent's restart,
//! stop and reset orders reach the child's members.

use agent_supervisor::api::{
    GroupPhase, GroupRestartRecord, GroupTrigger, StopReason, Strategy, Time,
};
use agent_supervisor::supervise::group::{Directive, ESCALATED, GroupEventReason};

use super::build::{
    G, child, cond, crashed, entry, given_up, is, listed, order, ordered, reasons, spec, stopped,
    stops, t,
};

#[test]
fn a_parent_restarts_a_child_group_that_gave_up() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "+kids"]));
    let plan = g
        .at(100)
        .set("kids", child(1, GroupPhase::Escalated, Some(1)))
        .step();
    let s = &plan.status;
    assert_eq!(order(s, "kids"), Some((1, t(100))));
    assert_eq!(order(s, "a"), Some((1, t(100))));
    let record = &s.restart_history[0];
    assert_eq!(record.member.as_deref(), Some("kids"));
    assert_eq!(record.reason.as_deref(), Some("GroupGaveUp"));
    assert_eq!(record.trigger, GroupTrigger::Escalation);
    assert_eq!(s.recent_restarts.len(), 1, "counted");
    assert!(
        plan.events[0]
            .note
            .starts_with("AgentGroup kids crashed (GroupGaveUp)")
    );

    // Restarted: a new incarnation, no crash; an old incarnation's give-up is no crash either.
    for state in [
        child(2, GroupPhase::Restarting, None),
        child(2, GroupPhase::Running, Some(1)),
    ] {
        let plan = g.at(110).set("kids", state).step();
        assert_eq!(plan.events, []);
        assert_eq!(plan.status.restart_count, 1);
    }
}

#[test]
fn a_restart_order_from_the_parent_starts_a_new_incarnation() {
    let mut g = given_up();
    g.input.parent = Some(listed("root"));
    g.at(150)
        .set("a", stopped(1))
        .set("b", stopped(1))
        .set("c", stopped(2));
    let before = g.status().restart_count;
    assert!(!g.status().recent_restarts.is_empty() || g.status().gave_up.is_some());
    g.input.parent = Some(Directive {
        restart: Some((1, t(200))),
        ..listed("root")
    });
    let plan = g.step();
    let s = &plan.status;
    assert_eq!(s.incarnation, 2);
    assert_eq!(s.gave_up, None);
    assert_eq!(s.recent_restarts, []);
    assert_eq!(stops(s), [None, None, None]);
    assert_eq!(order(s, "a"), Some((1, t(200))));
    assert_eq!(order(s, "b"), Some((1, t(200))));
    assert_eq!(order(s, "c"), Some((2, t(200))));
    assert_eq!(s.restart_count, before + 1);
    assert_eq!(
        s.restart_history[0],
        GroupRestartRecord {
            at: Time(t(150)),
            member: None,
            reason: Some("restarted by group root".to_string()),
            restarted: vec!["a".to_string(), "b".to_string(), "c".to_string()],
            trigger: GroupTrigger::Group,
        }
    );
    assert_eq!(reasons(&plan), [GroupEventReason::GroupRestart]);
    assert_eq!(
        plan.events[0].note,
        "Restarted by group root: restarting a, b, c at 2025-06-01T12:03:20Z"
    );
    assert_eq!(cond(s, ESCALATED), is("False", "WithinIntensity"));
    assert_eq!(s.phase, Some(GroupPhase::Restarting));

    // The order named incarnation 1: carried out once.
    let again = g.at(160).step();
    assert_eq!(again.events, []);
    assert_eq!(again.status.incarnation, 2);
}

#[test]
fn a_parent_that_gave_up_stops_its_child_groups_members() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b"]));
    g.input.parent = Some(Directive {
        stop: Some(agent_supervisor::api::StopOrder {
            reason: StopReason::GaveUp,
            kind: None,
            message: Some("group root gave up".to_string()),
        }),
        ..listed("root")
    });
    let plan = g.at(100).set("a", crashed(1, None)).step();
    let s = &plan.status;
    assert_eq!(stops(s), [Some(StopReason::GaveUp); 2]);
    assert_eq!(
        entry(s, "a").stop.as_ref().unwrap().message.as_deref(),
        Some("group root gave up")
    );
    assert_eq!(s.phase, Some(GroupPhase::Escalated));
    assert_eq!(cond(s, ESCALATED), is("True", "ParentGaveUp"));
    assert_eq!(s.gave_up, None, "it did not give up itself");
    // a's crash is taken in, not acted on: nothing restarts, nothing is counted.
    assert_eq!(ordered(s), ["a"]);
    assert_eq!((s.restart_count, s.recent_restarts.len()), (0, 0));
    assert_eq!(plan.events, []);
}

#[test]
fn a_child_whose_give_up_made_its_parent_give_up_stays_stopped() {
    // The parent took the child's crash in (a restart order for its incarnation) and gave up
    // (a stop order): the stop wins, as it does for an Agent.
    let mut g = given_up();
    g.input.parent = Some(Directive {
        restart: Some((1, t(100))),
        stop: Some(agent_supervisor::api::StopOrder {
            reason: StopReason::GaveUp,
            kind: None,
            message: Some("group root gave up".to_string()),
        }),
        ..listed("root")
    });
    let plan = g.at(101).step();
    let s = &plan.status;
    assert_eq!(plan.events, [], "no restart is announced");
    assert_eq!(s.incarnation, 1);
    assert!(s.gave_up.is_some());
    assert_eq!(s.restart_count, 0);
    assert_eq!(stops(s), [Some(StopReason::GaveUp); 3]);
    assert_eq!(s.phase, Some(GroupPhase::Escalated));

    // The parent is reset: the child resumes, restarted by its parent's order.
    g.input.parent = Some(Directive {
        restart: Some((1, t(100))),
        reset: Some("root-uid/1".to_string()),
        ..listed("root")
    });
    let plan = g.at(200).step();
    let s = &plan.status;
    assert_eq!(s.incarnation, 2);
    assert_eq!(s.gave_up, None);
    assert_eq!(stops(s), [None, None, None]);
    assert_eq!(s.restart_history[0].trigger, GroupTrigger::Group);
    assert_eq!(
        reasons(&plan),
        [GroupEventReason::Reset, GroupEventReason::GroupRestart]
    );
}
