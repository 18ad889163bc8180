//! Scenarios for supervision groups. Here, `decide_group`: which members a crash restarts under
//! each strategy. In `core_group/`: the start order (`start_order.rs`), the group's intensity
//! and giving up (`intensity.rs`), a parent's orders to a child group (`parent.rs`), resets and
//! autoShutdown (`lifecycle.rs`), membership (`membership.rs`), the views a group reads
//! (`views.rs`), a member held by its policy's outage (`outage.rs`), and an Agent obeying its
//! group (`member.rs`).

#[path = "core_group/budget.rs"]
mod budget;
#[path = "core_group/build.rs"]
mod build;
#[path = "common/clock.rs"]
mod clock;
#[path = "core_group/intensity.rs"]
mod intensity;
#[path = "core_group/lifecycle.rs"]
mod lifecycle;
#[path = "core_group/member.rs"]
mod member;
#[path = "core_group/membership.rs"]
mod membership;
#[path = "core_group/outage.rs"]
mod outage;
#[path = "core_group/parent.rs"]
mod parent;
#[path = "common/pods.rs"]
mod pods;
#[path = "common/sim.rs"]
mod sim;
#[path = "core_group/start_order.rs"]
mod start_order;
#[path = "core_group/views.rs"]
mod views;

use agent_supervisor::api::{
    GroupPhase, GroupRestartRecord, GroupTrigger, Phase, StartOrder, Strategy, Time,
};
use agent_supervisor::supervise::conditions::READY;
use agent_supervisor::supervise::group::{AgentView, ESCALATED, GroupEventReason, MemberState};

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
