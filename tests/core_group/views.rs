//! What a group reads of its members (`AgentView`, `ChildView`) and a member of its group
//! (`Directive`), with the Agent builders `outage.rs` shares.

use agent_supervisor::api::{
    Agent, AgentGroup, AgentGroupStatus, AgentSpec, AgentStatus, BreakerState,
    CircuitBreakerStatus, Condition, FailureClass, FailureReason, GiveUp, GroupPhase, GroupTrigger,
    MemberKey, MemberKind, MemberStatus, Phase, RestartOrder, RestartRecord, Strategy, Time,
    Trigger,
};
use agent_supervisor::supervise::group::{AgentView, Crash, Directive};

use super::build::{GROUP, spec, t};

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
            sandbox_ref: None,
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
        checkpoint: None,
        progress: None,
        spend: None,
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
