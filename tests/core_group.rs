//! Scenarios for supervision groups. Here, `decide_group`: which members a crash restarts under
//! each strategy, the start order, the group's intensity, giving up, and a parent's orders to a
//! child group. In `core_group/`: resets, autoShutdown, membership and the views a group reads
//! (`lifecycle.rs`), and an Agent obeying its group (`member.rs`).

#[path = "core_group/build.rs"]
mod build;
#[path = "common/clock.rs"]
mod clock;
#[path = "core_group/lifecycle.rs"]
mod lifecycle;
#[path = "core_group/member.rs"]
mod member;
#[path = "core_group/outage.rs"]
mod outage;

use agent_supervisor::api::{
    GroupPhase, GroupRestartRecord, GroupTrigger, Phase, StartOrder, StopReason, Strategy, Time,
};
use agent_supervisor::supervise::conditions::READY;
use agent_supervisor::supervise::group::{
    AgentView, Directive, ESCALATED, GroupEventReason, MemberState,
};

use build::*;

// --- Strategies ------------------------------------------------------------------------------

#[test]
fn a_steady_group_is_running_and_silent() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b", "c"]));
    let plan = g.step();
    assert_eq!(plan.events, []);
    let s = &plan.status;
    assert_eq!(s.phase, Some(GroupPhase::Running));
    assert_eq!(s.ready.as_deref(), Some("3/3"));
    assert_eq!(s.incarnation, 1);
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(ordered(s), Vec::<&str>::new());
    assert_eq!(waiting(s), []);
    assert_eq!(cond(s, READY), is("True", "AllMembersRunning"));
    assert_eq!(cond(s, ESCALATED), is("False", "WithinIntensity"));
    assert_eq!(entry(s, "b").phase.as_deref(), Some("Running"));
}

#[test]
fn one_for_one_orders_only_the_crashed_member_at_its_own_due_time() {
    let mut g = G::new(spec(Strategy::OneForOne, &["a", "b", "c"]));
    let plan = g.at(100).set("b", crashed(1, Some(110))).step();
    let s = &plan.status;
    assert_eq!(ordered(s), ["b"]);
    assert_eq!(order(s, "b"), Some((1, t(110))));
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.recent_restarts, [Time(t(100))]);
    assert_eq!(
        s.restart_history,
        [GroupRestartRecord {
            at: Time(t(100)),
            member: Some("b".to_string()),
            reason: Some("Error".to_string()),
            restarted: vec!["b".to_string()],
            trigger: GroupTrigger::Failure,
        }]
    );
    assert_eq!(reasons(&plan), [GroupEventReason::GroupRestart]);
    assert!(!plan.events[0].warning);
    assert_eq!(
        plan.events[0].note,
        "Agent b crashed (Error): restarting b at 2025-06-01T12:01:50Z (1 of 3 restarts within 5m)"
    );
    assert_eq!(s.phase, Some(GroupPhase::Restarting));
    assert_eq!(s.ready.as_deref(), Some("2/3"));
    assert_eq!(cond(s, READY), is("False", "MembersNotRunning"));
    assert_eq!(condition(s, READY).message, "not running: b (BackingOff)");

    // b reads its order; once it runs its next attempt, the order is a past one.
    assert_eq!(g.directive("b").restart_of(1), Some(t(110)));
    assert_eq!(g.directive("a").restart, None);
    let plan = g.at(111).set("b", running(2)).step();
    assert_eq!(plan.events, []);
    assert_eq!(plan.status.phase, Some(GroupPhase::Running));
    assert_eq!(
        order(&plan.status, "b"),
        Some((1, t(110))),
        "kept, and stale"
    );
}

#[test]
fn one_for_all_orders_every_member_at_the_crashed_members_due_time() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b", "c"]));
    g.set("a", running(3)).step();
    let plan = g.at(100).set("b", crashed(2, Some(110))).step();
    let s = &plan.status;
    assert_eq!(ordered(s), ["a", "b", "c"]);
    // Each order names the member's own current attempt.
    assert_eq!(order(s, "a"), Some((3, t(110))));
    assert_eq!(order(s, "b"), Some((2, t(110))));
    assert_eq!(order(s, "c"), Some((1, t(110))));
    assert_eq!(s.restart_history[0].restarted, ["a", "b", "c"]);
    assert_eq!(s.restart_count, 1, "one group restart, counted once");
    assert_eq!(s.recent_restarts.len(), 1);
    assert!(plan.events[0].note.contains("restarting a, b, c at"));
    assert_eq!(
        s.ready.as_deref(),
        Some("0/3"),
        "ordered members are not up"
    );
}

#[test]
fn rest_for_one_orders_the_crashed_member_and_every_member_after_it() {
    let cases: [(&str, &[&str]); 4] = [
        ("a", &["a", "b", "c", "d"]),
        ("b", &["b", "c", "d"]),
        ("c", &["c", "d"]),
        ("d", &["d"]),
    ];
    for (crashing, expected) in cases {
        let mut g = G::new(spec(Strategy::RestForOne, &["a", "b", "c", "d"]));
        let plan = g.at(100).set(crashing, crashed(1, Some(130))).step();
        assert_eq!(ordered(&plan.status), expected, "{crashing} crashed");
        for name in expected {
            assert_eq!(order(&plan.status, name), Some((1, t(130))));
        }
        assert_eq!(plan.status.restart_history[0].restarted, expected);
    }
}

#[test]
fn a_restart_due_in_the_past_or_at_once_is_ordered_for_now() {
    for due in [None, Some(50), Some(100)] {
        let mut g = G::new(spec(Strategy::OneForAll, &["a", "b"]));
        let plan = g.at(100).set("a", crashed(1, due)).step();
        assert_eq!(order(&plan.status, "a"), Some((1, t(100))), "{due:?}");
        assert_eq!(order(&plan.status, "b"), Some((1, t(100))), "{due:?}");
        assert!(plan.events[0].note.contains("restarting a, b now"));
    }
}

#[test]
fn a_crash_is_taken_in_once() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b"]));
    g.at(100).set("a", crashed(1, Some(110))).step();
    // Decided again before anyone obeyed: nothing new.
    let again = g.at(105).step();
    assert_eq!(again.events, []);
    assert_eq!(again.status.restart_count, 1);
    assert_eq!(again.status.restart_history.len(), 1);
    assert_eq!(order(&again.status, "b"), Some((1, t(110))));
    // b crashed too before its order was carried out: its order already covers that attempt.
    let plan = g.set("b", crashed(1, Some(140))).step();
    assert_eq!(plan.events, []);
    assert_eq!(plan.status.restart_count, 1);
    // Both run again; a's next attempt crashes: a new restart.
    g.at(200).set("a", running(2)).set("b", running(2)).step();
    let plan = g.at(300).set("a", crashed(2, Some(320))).step();
    assert_eq!(plan.status.restart_count, 2);
    assert_eq!(order(&plan.status, "a"), Some((2, t(320))));
    assert_eq!(order(&plan.status, "b"), Some((2, t(320))));
}

#[test]
fn suspended_and_shut_down_members_are_left_out_of_restarts() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b", "c", "+d"]));
    let suspended = MemberState::Agent(AgentView {
        phase: Some(Phase::Suspended),
        attempt: 1,
        suspended: true,
        ..AgentView::default()
    });
    let mut down = child(1, GroupPhase::Shutdown, None);
    if let MemberState::Group(view) = &mut down {
        view.shutdown = Some(shutdown(
            agent_supervisor::api::ShutdownType::Voluntary,
            "AutoShutdown",
        ));
    }
    g.set("a", suspended)
        .set(
            "c",
            shut_down(agent_supervisor::api::ShutdownType::Economic, "Rule"),
        )
        .set("d", down);
    let plan = g.at(100).set("b", crashed(1, Some(110))).step();
    assert_eq!(ordered(&plan.status), ["b"]);
    assert_eq!(plan.status.restart_history[0].restarted, ["b"]);

    // A suspended member's own crash is not the group's business either.
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b"]));
    let mut crash = crashed(1, Some(110));
    if let MemberState::Agent(view) = &mut crash {
        view.suspended = true;
    }
    let plan = g.at(100).set("a", crash).step();
    assert_eq!(ordered(&plan.status), Vec::<&str>::new());
    assert_eq!(plan.status.restart_count, 0);
}

// --- Start order -----------------------------------------------------------------------------

#[test]
fn sequential_holds_every_member_after_the_first_not_running_one() {
    let mut sequential = spec(Strategy::OneForOne, &["a", "b", "c", "d", "e"]);
    sequential.start_order = StartOrder::Sequential;
    let mut g = G::fresh(sequential);
    let not_ready = MemberState::Agent(AgentView {
        phase: Some(Phase::Running),
        attempt: 1,
        ready: false,
        ..AgentView::default()
    });
    g.set("a", running(1))
        .set("b", not_ready)
        .set("c", MemberState::Agent(AgentView::default()))
        .set("d", running(1))
        .set("e", pending(1));
    let plan = g.step();
    // b may start (it has); c and e wait for b; d already runs and is left alone.
    assert_eq!(waiting(&plan.status), [("c", "b"), ("e", "b")]);
    assert_eq!(g.directive("c").waiting_for.as_deref(), Some("b"));
    assert_eq!(g.directive("b").waiting_for, None);

    // Under Parallel, nobody waits.
    let mut g = G::fresh(spec(Strategy::OneForOne, &["a", "b", "c"]));
    g.set("a", pending(1))
        .set("b", MemberState::Agent(AgentView::default()));
    assert_eq!(waiting(&g.step().status), []);
}

#[test]
fn sequential_restarts_start_in_member_order() {
    let mut sequential = spec(Strategy::OneForAll, &["a", "b", "c"]);
    sequential.start_order = StartOrder::Sequential;
    let mut g = G::new(sequential);
    let plan = g.at(100).set("a", crashed(1, Some(110))).step();
    assert_eq!(waiting(&plan.status), [("b", "a"), ("c", "a")]);
    // a runs again: b may start; c waits for b.
    let plan = g.at(120).set("a", running(2)).step();
    assert_eq!(waiting(&plan.status), [("c", "b")]);
    let plan = g.at(130).set("b", running(2)).step();
    assert_eq!(waiting(&plan.status), []);
    assert_eq!(plan.status.phase, Some(GroupPhase::Restarting), "c not yet");
    let plan = g.at(140).set("c", running(2)).step();
    assert_eq!(plan.status.phase, Some(GroupPhase::Running));
}

#[test]
fn a_child_groups_members_wait_for_what_the_parent_says() {
    let mut g = G::fresh(spec(Strategy::OneForOne, &["a", "b"]));
    g.set("a", MemberState::Agent(AgentView::default()))
        .set("b", MemberState::Agent(AgentView::default()));
    // Not yet listed by its parent: nothing starts.
    g.input.parent = Some(Directive {
        group: "root".to_string(),
        ..Directive::default()
    });
    assert_eq!(waiting(&g.step().status), [("a", "root"), ("b", "root")]);
    // Listed, behind the parent's member x.
    g.input.parent = Some(Directive {
        waiting_for: Some("x".to_string()),
        ..listed("root")
    });
    assert_eq!(waiting(&g.step().status), [("a", "x"), ("b", "x")]);
    g.input.parent = Some(listed("root"));
    assert_eq!(waiting(&g.step().status), []);
}

// --- Intensity -------------------------------------------------------------------------------

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

// --- A parent and its child groups ----------------------------------------------------------

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

#[test]
fn a_member_its_own_policy_gave_up_on_is_left_out_and_holds_back_no_one() {
    let mut sequential = spec(Strategy::OneForAll, &["a", "b", "c"]);
    sequential.start_order = StartOrder::Sequential;
    let mut g = G::new(sequential);
    // a hit its restart limit (or a Stop rule): Stopped by its own policy, not by the group.
    let gave_up = MemberState::Agent(AgentView {
        phase: Some(Phase::Stopped),
        attempt: 3,
        given_up: true,
        ..AgentView::default()
    });
    let plan = g
        .at(100)
        .set("a", gave_up)
        .set("b", crashed(1, Some(110)))
        .step();
    // b's crash restarts b and c, not a; c waits for b, not for a.
    assert_eq!(ordered(&plan.status), ["b", "c"]);
    assert_eq!(waiting(&plan.status), [("c", "b")]);
    assert_eq!(plan.status.restart_history[0].restarted, ["b", "c"]);
}

#[test]
fn membership_events_wait_until_a_new_group_has_settled() {
    let mut g = G::fresh(spec(Strategy::OneForOne, &["a", "b"]));
    g.input.group.created = t(0);
    g.set("b", MemberState::NotFound);
    // Applied together with its members, a group sees them appear one by one: the condition
    // says b is missing, but no Warning is recorded in its first seconds.
    let plan = g.at(3).step();
    assert_eq!(
        cond(
            &plan.status,
            agent_supervisor::supervise::group::MEMBERS_RESOLVED
        ),
        is("False", "NotFound")
    );
    assert_eq!(reasons(&plan), []);
    let plan = g.at(5).set("b", running(1)).step();
    assert_eq!(
        cond(
            &plan.status,
            agent_supervisor::supervise::group::MEMBERS_RESOLVED
        ),
        is("True", "AllMembersFound")
    );
    assert_eq!(reasons(&plan), []);
    // Later, a member that goes missing is reported.
    let plan = g.at(60).set("b", MemberState::NotFound).step();
    assert_eq!(reasons(&plan), [GroupEventReason::MembersResolved]);
    assert!(plan.events[0].warning);
}
