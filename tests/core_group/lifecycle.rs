//! A group's life around its restarts: resets (by annotation or by its parent) and autoShutdown.
//! Membership is in `membership.rs`; what a group reads of its members, and a member of its
//! group, in `views.rs`.

use agent_supervisor::api::{
    AutoShutdown, GroupMembership, GroupPhase, ShutdownType, StopOrder, StopReason, Strategy, Time,
};
use agent_supervisor::supervise::group::{Directive, ESCALATED, GroupEventReason};

use super::build::*;

// The Agent builders `outage.rs` reads from here.
pub(super) use super::views::{agent, backing_off, pending_record};

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
