//! Membership: members a group cannot supervise, a member two groups name, when membership
//! problems are reported, and members joining a running group.

use agent_supervisor::api::{GroupPhase, Member, MemberKey, Strategy};
use agent_supervisor::supervise::group::{
    GroupEventReason, GroupSpecView, MEMBERS_RESOLVED, MemberFacts, MemberState, Membership,
    Refusal,
};

use super::build::{
    G, GROUP, child, cond, condition, crashed, is, order, ordered, reasons, running, spec, t,
};

#[test]
fn members_it_cannot_supervise_are_reported_and_the_rest_supervised() {
    let mut g = G::fresh(spec(Strategy::OneForAll, &["a", "b", "+c", "d"]));
    g.set("a", MemberState::NotFound)
        .set(
            "b",
            MemberState::Refused(Refusal::Conflict {
                owner: "other".to_string(),
            }),
        )
        .set("c", MemberState::Refused(Refusal::Cycle));
    let plan = g.step();
    let s = &plan.status;
    assert_eq!(cond(s, MEMBERS_RESOLVED), is("False", "NotFound"));
    let message = "Agent a does not exist; Agent b belongs to group other; AgentGroup c would \
                   make the group contain itself; the other members are supervised";
    assert_eq!(condition(s, MEMBERS_RESOLVED).message, message);
    assert_eq!(reasons(&plan), [GroupEventReason::MembersResolved]);
    assert!(plan.events[0].warning);
    let phases: Vec<_> = s.members.iter().map(|m| m.phase.as_deref()).collect();
    assert_eq!(
        phases,
        [
            Some("NotFound"),
            Some("Conflict"),
            Some("Cycle"),
            Some("Running")
        ]
    );
    assert_eq!(s.ready.as_deref(), Some("1/4"));

    // The same problems: said once. d's crash restarts only the members it supervises.
    let plan = g.at(100).set("d", crashed(1, None)).step();
    assert_eq!(reasons(&plan), [GroupEventReason::GroupRestart]);
    assert_eq!(ordered(&plan.status), ["d"]);

    // Resolved: said so, once.
    g.set("a", running(1))
        .set("b", running(1))
        .set("c", child(1, GroupPhase::Running, None))
        .set("d", running(2));
    let plan = g.at(110).step();
    assert_eq!(
        cond(&plan.status, MEMBERS_RESOLVED),
        is("True", "AllMembersFound")
    );
    assert_eq!(
        condition(&plan.status, MEMBERS_RESOLVED).message,
        "supervising 4 member(s)"
    );
    assert_eq!(reasons(&plan), [GroupEventReason::MembersResolved]);
    assert!(!plan.events[0].warning);
    assert_eq!(g.at(120).step().events, []);
}

#[test]
fn a_group_whose_members_all_exist_says_nothing_about_them() {
    let plan = G::fresh(spec(Strategy::OneForOne, &["a", "+b"])).step();
    assert_eq!(plan.events, []);
    assert_eq!(
        cond(&plan.status, MEMBERS_RESOLVED),
        is("True", "AllMembersFound")
    );
}

#[test]
fn the_older_group_supervises_a_member_two_groups_name() {
    let old = [Member::agent("b")];
    let young = [Member::agent("a"), Member::agent("b")];
    let views = [
        GroupSpecView {
            name: GROUP,
            created: t(10),
            members: &young,
        },
        GroupSpecView {
            name: "old",
            created: t(0),
            members: &old,
        },
    ];
    let membership = Membership::resolve(&views);
    assert_eq!(membership.group_of_agent("b"), Some("old"));
    assert_eq!(membership.group_of_agent("a"), Some(GROUP));

    let mut g = G::fresh(spec(Strategy::OneForOne, &["a", "b"]));
    let refusal = membership
        .refusal(GROUP, &MemberKey::agent("b"))
        .cloned()
        .expect("refused");
    g.set("b", MemberState::Refused(refusal));
    let plan = g.step();
    assert_eq!(
        cond(&plan.status, MEMBERS_RESOLVED),
        is("False", "Conflict")
    );
    assert_eq!(
        condition(&plan.status, MEMBERS_RESOLVED).message,
        "Agent b belongs to group old; the other members are supervised"
    );
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

// --- Joining ---------------------------------------------------------------------------------

#[test]
fn a_member_that_joins_crashed_is_taken_in_alone_and_not_counted() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b"]));
    g.input.group.spec.members.push(Member::agent("c"));
    g.input.members.push(MemberFacts {
        key: MemberKey::agent("c"),
        significant: false,
        state: crashed(2, Some(50)),
    });
    let plan = g.at(40).step();
    let s = &plan.status;
    assert_eq!(ordered(s), ["c"]);
    assert_eq!(order(s, "c"), Some((2, t(50))));
    assert_eq!(s.restart_count, 0);
    assert_eq!(s.recent_restarts, []);
    assert_eq!(s.restart_history, []);
    assert_eq!(plan.events, []);
    // Its next crash is the group's.
    g.at(60).set("c", running(3)).step();
    let plan = g.at(70).set("c", crashed(3, None)).step();
    assert_eq!(ordered(&plan.status), ["a", "b", "c"]);
    assert_eq!(plan.status.restart_count, 1);
}

#[test]
fn a_member_that_joins_running_keeps_running() {
    let mut g = G::new(spec(Strategy::OneForAll, &["a"]));
    g.input.group.spec.members.push(Member::agent("b"));
    g.input.members.push(MemberFacts {
        key: MemberKey::agent("b"),
        significant: false,
        state: running(4),
    });
    let plan = g.at(40).step();
    assert_eq!(plan.events, []);
    assert_eq!(ordered(&plan.status), Vec::<&str>::new());
    assert_eq!(plan.status.phase, Some(GroupPhase::Running));
    assert_eq!(plan.status.ready.as_deref(), Some("2/2"));
}
