//! The start order: under Sequential, members wait for the one before them to run, and a child
//! group's members wait for what its parent says.

use agent_supervisor::api::{GroupPhase, Phase, StartOrder, Strategy};
use agent_supervisor::supervise::group::{AgentView, Directive, MemberState};

use super::build::{G, crashed, listed, pending, running, spec, waiting};

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
