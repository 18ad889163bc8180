//! A group's life around its restarts: resets, autoShutdown, membership problems, members
//! joining, and what a group reads of its members (`AgentView`, `ChildView`) and a member of its
//! group (`Directive`).

use agent_supervisor::api::{
    Agent, AgentGroup, AgentGroupStatus, AgentSpec, AgentStatus, AutoShutdown, BreakerState,
    CircuitBreakerStatus, Condition, FailureClass, FailureReason, GiveUp, GroupMembership,
    GroupPhase, GroupTrigger, Member, MemberKey, MemberKind, MemberStatus, Phase, RestartOrder,
    RestartRecord, ShutdownType, StopOrder, StopReason, Strategy, Time, Trigger,
};
use agent_supervisor::supervise::group::{
    AgentView, Crash, Directive, ESCALATED, GroupEventReason, GroupSpecView, MEMBERS_RESOLVED,
    MemberFacts, MemberState, Membership, Refusal,
};

use super::build::*;

// --- Resets ----------------------------------------------------------------------------------

#[test]
fn the_reset_annotation_clears_a_give_up_once_per_value() {
    let mut g = given_up();
    g.input.group.reset_requested = Some("r1".to_string());
    let plan = g.at(200).step();
    let s = &plan.status;
    assert_eq!(s.gave_up, None);
    assert_eq!(s.recent_restarts, []);
    assert_eq!(s.handled_reset_request.as_deref(), Some("r1"));
    for m in &s.members {
        assert_eq!(
            m.reset.as_deref(),
            Some("5c1d-team/r1/1748779400"),
            "{}",
            m.name
        );
        assert_eq!(m.stop, None);
    }
    assert_eq!(reasons(&plan), [GroupEventReason::Reset]);
    assert_eq!(
        plan.events[0].note,
        "Reset (supervisor.dev/reset-requested-at=r1): the group no longer gives up; its members \
         are reset and resume"
    );
    assert_eq!(cond(s, ESCALATED), is("False", "WithinIntensity"));
    // b's crash, which made it give up, was taken in then: it is not counted again.
    assert_eq!(s.restart_count, 0);
    assert_eq!(s.phase, Some(GroupPhase::Restarting));
    assert_eq!(
        g.directive("a").reset.as_deref(),
        Some("5c1d-team/r1/1748779400")
    );

    // Once per value.
    let again = g.at(210).step();
    assert_eq!(again.events, []);
    assert_eq!(
        entry(&again.status, "a").reset.as_deref(),
        Some("5c1d-team/r1/1748779400")
    );

    // A new value on a group that has not given up clears its count.
    let mut g = G::new(spec(Strategy::OneForAll, &["a", "b", "c"]));
    g.input.group.reset_requested = Some("r1".to_string());
    g.step();
    g.at(220).set("a", crashed(1, None)).step();
    assert_eq!(g.status().recent_restarts.len(), 1);
    g.input.group.reset_requested = Some("r2".to_string());
    let plan = g.at(230).step();
    assert_eq!(plan.status.recent_restarts, []);
    assert_eq!(
        plan.events[0].note,
        "Reset (supervisor.dev/reset-requested-at=r2): restart count cleared; its members are reset"
    );
    assert_eq!(
        entry(&plan.status, "c").reset.as_deref(),
        Some("5c1d-team/r2/1748779430")
    );

    // A value used before is a new reset all the same: its key is new, so every member (one
    // that saw neither of the others included) resets again.
    g.input.group.reset_requested = Some("r1".to_string());
    let plan = g.at(240).step();
    assert_eq!(reasons(&plan), [GroupEventReason::Reset]);
    assert_eq!(
        entry(&plan.status, "c").reset.as_deref(),
        Some("5c1d-team/r1/1748779440")
    );
}

#[test]
fn a_reset_ordered_by_the_parent_is_passed_on_once() {
    let mut g = G::new(spec(Strategy::OneForOne, &["a", "b"]));
    g.input.parent = Some(Directive {
        reset: Some("root-uid/7".to_string()),
        ..listed("root")
    });
    let plan = g.at(10).step();
    let s = &plan.status;
    assert_eq!(
        s.group,
        Some(GroupMembership {
            name: "root".to_string(),
            handled_reset: Some("root-uid/7".to_string()),
        })
    );
    assert_eq!(entry(s, "a").reset.as_deref(), Some("root-uid/7"));
    assert_eq!(entry(s, "b").reset.as_deref(), Some("root-uid/7"));
    assert_eq!(reasons(&plan), [GroupEventReason::Reset]);
    assert!(
        plan.events[0]
            .note
            .starts_with("Reset (group root was reset)")
    );
    assert_eq!(g.at(20).step().events, []);
}

// --- autoShutdown ----------------------------------------------------------------------------

/// A group of a, b, c with `auto`, where the members named in `significant` are significant.
fn significant(auto: AutoShutdown, significant: &[&str]) -> G {
    let mut s = spec(Strategy::OneForAll, &["a", "b", "c"]);
    s.auto_shutdown = auto;
    for m in &mut s.members {
        m.significant = significant.contains(&m.key().name.as_str());
    }
    G::new(s)
}

#[test]
fn any_significant_member_shutting_down_shuts_the_group_down() {
    let mut g = significant(AutoShutdown::AnySignificant, &["a"]);
    let plan = g
        .at(100)
        .set("a", shut_down(ShutdownType::Economic, "TerminationMessage"))
        .step();
    let s = &plan.status;
    let shutdown = s.shutdown.as_ref().expect("shut down");
    assert_eq!(shutdown.kind, ShutdownType::Economic);
    assert_eq!(shutdown.source.as_deref(), Some("AutoShutdown"));
    assert_eq!(
        shutdown.reason.as_deref(),
        Some("significant member a shut down")
    );
    assert_eq!(shutdown.at, Some(Time(t(100))));
    assert_eq!(s.phase, Some(GroupPhase::Shutdown));
    assert_eq!(reasons(&plan), [GroupEventReason::GroupShutdown]);
    for m in &s.members {
        assert_eq!(
            m.stop,
            Some(StopOrder {
                reason: StopReason::Shutdown,
                kind: Some(ShutdownType::Economic),
                message: Some("group team shut down: significant member a shut down".to_string()),
            })
        );
    }
    // Said once; a crash afterwards restarts nothing.
    let plan = g.at(110).set("b", crashed(1, None)).step();
    assert_eq!(plan.events, []);
    assert_eq!(ordered(&plan.status), Vec::<&str>::new());
    assert_eq!(plan.status.phase, Some(GroupPhase::Shutdown));
}

#[test]
fn only_significant_members_own_shutdowns_count() {
    for (auto, sig, down, source) in [
        (AutoShutdown::AnySignificant, &["a"][..], "b", "Rule"),
        (AutoShutdown::AnySignificant, &["a"][..], "a", "Group"),
        (AutoShutdown::Never, &["a"][..], "a", "Rule"),
        (AutoShutdown::AllSignificant, &["a", "c"][..], "a", "Rule"),
    ] {
        let mut g = significant(auto, sig);
        let plan = g
            .at(100)
            .set(down, shut_down(ShutdownType::Voluntary, source))
            .step();
        let what = format!("{auto:?} {sig:?}: {down} shut down by {source}");
        assert_eq!(plan.status.shutdown, None, "{what}");
        assert_eq!(plan.events, [], "{what}");
        assert_eq!(stops(&plan.status), [None, None, None], "{what}");
    }
}

#[test]
fn all_significant_members_shutting_down_shut_the_group_down() {
    let mut g = significant(AutoShutdown::AllSignificant, &["a", "c"]);
    g.at(100)
        .set("a", shut_down(ShutdownType::Economic, "TerminationMessage"));
    assert_eq!(g.step().status.shutdown, None);
    let plan = g
        .at(110)
        .set("c", shut_down(ShutdownType::Voluntary, "Rule"))
        .step();
    let shutdown = plan.status.shutdown.as_ref().expect("shut down");
    assert_eq!(shutdown.kind, ShutdownType::Voluntary);
    assert_eq!(
        shutdown.reason.as_deref(),
        Some("significant member c shut down")
    );
    assert_eq!(stops(&plan.status), [Some(StopReason::Shutdown); 3]);
}

#[test]
fn a_parent_shutting_down_shuts_its_child_group_down() {
    let mut g = G::new(spec(Strategy::OneForOne, &["a", "b"]));
    g.input.parent = Some(Directive {
        stop: Some(StopOrder {
            reason: StopReason::Shutdown,
            kind: Some(ShutdownType::Economic),
            message: None,
        }),
        ..listed("root")
    });
    let plan = g.at(50).step();
    let shutdown = plan.status.shutdown.as_ref().expect("shut down");
    assert_eq!(shutdown.kind, ShutdownType::Economic);
    assert_eq!(shutdown.source.as_deref(), Some("Group"));
    assert_eq!(shutdown.reason.as_deref(), Some("group root shut down"));
    assert_eq!(stops(&plan.status), [Some(StopReason::Shutdown); 2]);
    assert_eq!(plan.status.phase, Some(GroupPhase::Shutdown));
}

// --- Membership ------------------------------------------------------------------------------

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

// --- What a group reads of its members, and a member of its group ----------------------------

pub(super) fn agent(suspend: bool, status: Option<AgentStatus>) -> Agent {
    let mut agent = Agent::new(
        "a",
        AgentSpec {
            template: Default::default(),
            restart_policy_ref: None,
            suspend,
            agent_container: None,
            heartbeat: None,
            volume_claim_templates: Vec::new(),
        },
    );
    agent.status = status;
    agent
}

pub(super) fn pending_record(
    attempt: u32,
    trigger: Trigger,
    reason: FailureReason,
) -> RestartRecord {
    RestartRecord {
        attempt,
        trigger,
        failed_at: Some(Time(t(100))),
        reason: Some(reason),
        class: Some(FailureClass::Transient),
        exit_code: Some(1),
        signal: None,
        message: None,
        ran_for: None,
        fingerprint: None,
        backoff: None,
        restarted_at: None,
    }
}

pub(super) fn backing_off(attempt: u32, record: RestartRecord) -> AgentStatus {
    AgentStatus {
        phase: Some(Phase::BackingOff),
        attempt,
        next_restart_at: Some(Time(t(110))),
        restart_history: vec![record],
        ..AgentStatus::default()
    }
}

#[test]
fn an_agent_view_reads_a_crash_waiting_for_the_group() {
    let view = agent_supervisor::controller::facts::agent_view(&agent(false, None));
    assert_eq!(view, AgentView::default());

    let ready = Condition {
        type_: "Ready".to_string(),
        status: "True".to_string(),
        reason: "PodReady".to_string(),
        message: String::new(),
        observed_generation: Some(1),
        last_transition_time: Time(t(0)),
    };
    let running = AgentStatus {
        phase: Some(Phase::Running),
        attempt: 3,
        restart_count: 2,
        conditions: vec![ready],
        ..AgentStatus::default()
    };
    let view = agent_supervisor::controller::facts::agent_view(&agent(true, Some(running)));
    assert!(view.up() && view.suspended);
    assert_eq!((view.attempt, view.restart_count, view.crash), (3, 2, None));

    let failed = pending_record(2, Trigger::Failure, FailureReason::Error);
    let view = agent_supervisor::controller::facts::agent_view(&agent(
        false,
        Some(backing_off(2, failed.clone())),
    ));
    assert_eq!(
        view.crash,
        Some(Crash {
            attempt: 2,
            reason: "Error".to_string(),
            trigger: GroupTrigger::Failure,
            due: Some(t(110)),
            counted: true,
        })
    );

    let evicted = pending_record(2, Trigger::Disruption, FailureReason::Evicted);
    let crash = agent_supervisor::controller::facts::agent_view(&agent(
        false,
        Some(backing_off(2, evicted)),
    ))
    .crash;
    let crash = crash.expect("a disruption is a crash");
    assert_eq!(
        (crash.trigger, crash.counted),
        (GroupTrigger::Disruption, false)
    );

    // A circuit breaker's open period: the crash is due at the probe.
    let mut open = backing_off(2, failed.clone());
    open.phase = Some(Phase::CircuitOpen);
    open.next_restart_at = None;
    open.circuit_breaker = Some(CircuitBreakerStatus {
        state: BreakerState::Open,
        trips: 1,
        opened_at: Some(Time(t(100))),
        half_open_at: Some(Time(t(400))),
    });
    let crash = agent_supervisor::controller::facts::agent_view(&agent(false, Some(open))).crash;
    assert_eq!(crash.and_then(|c| c.due), Some(t(400)));

    // Not crashes: a restart the group ordered, a manual one, an older attempt's record, a
    // give-up.
    for status in [
        backing_off(2, pending_record(2, Trigger::Group, FailureReason::Error)),
        backing_off(2, pending_record(2, Trigger::Manual, FailureReason::Error)),
        backing_off(3, failed.clone()),
        AgentStatus {
            phase: Some(Phase::Stopped),
            ..backing_off(2, failed.clone())
        },
    ] {
        let view =
            agent_supervisor::controller::facts::agent_view(&agent(false, Some(status.clone())));
        assert_eq!(view.crash, None, "{status:?}");
    }
}

#[test]
fn a_child_view_reads_a_give_up_in_its_current_incarnation_as_a_crash() {
    let fresh = agent_supervisor::controller::facts::child_view(&AgentGroup::new(
        "kids",
        spec(Strategy::OneForOne, &["x"]),
    ));
    assert_eq!(fresh.incarnation, 1, "from 1");
    assert_eq!(fresh.crash(), None);

    let mut group = AgentGroup::new("kids", spec(Strategy::OneForOne, &["x"]));
    group.status = Some(AgentGroupStatus {
        phase: Some(GroupPhase::Escalated),
        incarnation: 3,
        restart_count: 9,
        gave_up: Some(GiveUp {
            at: Time(t(50)),
            incarnation: 3,
            member: Some("x".to_string()),
        }),
        ..AgentGroupStatus::default()
    });
    let view = agent_supervisor::controller::facts::child_view(&group);
    assert_eq!((view.incarnation, view.restart_count), (3, 9));
    assert_eq!(
        view.crash(),
        Some(Crash {
            attempt: 3,
            reason: "GroupGaveUp".to_string(),
            trigger: GroupTrigger::Escalation,
            due: None,
            counted: true,
        })
    );
    group.status.as_mut().unwrap().incarnation = 4;
    assert_eq!(
        agent_supervisor::controller::facts::child_view(&group).crash(),
        None,
        "an older give-up"
    );
}

#[test]
fn a_directive_is_the_members_entry_in_its_groups_status() {
    let key = MemberKey::agent("a");
    assert_eq!(
        Directive::read(GROUP, None, &key),
        Directive {
            group: GROUP.to_string(),
            ..Directive::default()
        }
    );
    let status = AgentGroupStatus {
        members: vec![MemberStatus {
            name: "a".to_string(),
            kind: MemberKind::Agent,
            phase: None,
            restart_count: 0,
            restart: Some(RestartOrder {
                attempt: 2,
                due: Time(t(30)),
            }),
            waiting_for: Some("z".to_string()),
            stop: None,
            reset: Some("k".to_string()),
        }],
        ..AgentGroupStatus::default()
    };
    let d = Directive::read(GROUP, Some(&status), &key);
    assert!(d.listed);
    assert_eq!(d.restart, Some((2, t(30))));
    assert_eq!((d.restart_of(2), d.restart_of(1)), (Some(t(30)), None));
    assert_eq!(d.waiting_for.as_deref(), Some("z"));
    assert_eq!(d.reset.as_deref(), Some("k"));
    // A group of the same name is another member.
    assert!(!Directive::read(GROUP, Some(&status), &MemberKey::group("a")).listed);
}
