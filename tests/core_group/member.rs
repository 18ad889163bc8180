//! An Agent that belongs to a group: `decide` with `Input.group` set, obeying the orders in its
//! entry of the group's status. `Sim` (`common/sim.rs`, shared with `core_decide`) carries each
//! plan out as the operator would and lets the test play the kubelet and write the group's
//! orders. Here: starting, and its own crash; in
//! `member/`: restarted with a sibling (`siblings.rs`), stopped and shut down by the group
//! (`stopped.rs`).

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, Duration, GroupMembership, Phase, RestartPolicySpec,
    ShutdownType, StopOrder, StopReason, Time, Trigger,
};
use agent_supervisor::supervise::Plan;
use agent_supervisor::supervise::conditions::{self, READY};
use agent_supervisor::supervise::group::Directive;
use agent_supervisor::supervise::{EventReason, PolicyResolution};

use super::build::{listed, t};
use crate::sim::Sim;

const AGENT: &str = "researcher";

/// Exponential from 10s, no jitter, no limit, a breaker at 5.
fn fast() -> RestartPolicySpec {
    RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Exponential,
            initial_delay: Duration::from_secs(10),
            max_delay: Duration::from_secs(300),
            multiplier: 2.0,
            jitter: 0.0,
        },
        ..RestartPolicySpec::default()
    }
}

/// A member of a group giving it `orders`, under `fast`, its restarts made at once.
fn member(orders: Directive) -> Sim {
    member_with(fast(), orders)
}

/// A member of a group giving it `orders`, under `policy`, its restarts made at once; the
/// container of a new pod waits with no reason.
fn member_with(policy: RestartPolicySpec, orders: Directive) -> Sim {
    Sim::new(PolicyResolution::Named("fast".to_string(), policy))
        .agent(AGENT, "uid-researcher")
        .in_group(orders)
        .at_once()
        .waiting(None)
}

/// A member of team whose attempt 1 has run, ready, since t(5).
fn running() -> Sim {
    member(listed("team")).started()
}

fn ready(status: &AgentStatus) -> (String, String, String) {
    let c = conditions::get(&status.conditions, READY).expect("Ready is set");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn reasons(plan: &Plan) -> Vec<EventReason> {
    plan.events.iter().map(|e| e.reason).collect()
}

fn stop(reason: StopReason, kind: Option<ShutdownType>, message: &str) -> Option<StopOrder> {
    Some(StopOrder {
        reason,
        kind,
        message: Some(message.to_string()),
    })
}

// --- Starting --------------------------------------------------------------------------------

#[test]
fn a_member_starts_nothing_until_its_group_lists_it() {
    let mut sim = member(Directive {
        group: "team".to_string(),
        ..Directive::default()
    });
    let plan = sim.step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(
        plan.status.group,
        Some(GroupMembership {
            name: "team".to_string(),
            handled_reset: None,
        })
    );
    let (status, reason, message) = ready(&plan.status);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "WaitingForGroup")
    );
    assert_eq!(message, "waiting for group team to take it in");

    sim.group().listed = true;
    let plan = sim.at(1).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(1));
}

#[test]
fn a_member_told_to_wait_for_another_starts_once_it_may() {
    let mut sim = member(Directive {
        waiting_for: Some("planner".to_string()),
        ..listed("team")
    });
    let plan = sim.step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(
        ready(&plan.status).2,
        "waiting for planner to be running (group team starts its members in order)"
    );
    assert_eq!(ready(&plan.status).1, "WaitingForGroup");
    sim.group().waiting_for = None;
    assert!(sim.at(3).step().create_pod.is_some());
}

// --- Its own crash ---------------------------------------------------------------------------

#[test]
fn a_crashed_member_waits_for_its_groups_order_and_restarts_at_the_later_time() {
    let mut sim = running();
    let plan = sim.crashes(100);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.next_restart_at, Some(Time(t(110))));
    let pending = &plan.status.restart_history[0];
    assert_eq!((pending.attempt, pending.trigger), (1, Trigger::Failure));
    assert_eq!(pending.restarted_at, None);

    // Due by its own policy, and no order yet: it waits.
    let plan = sim.at(110).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    let (status, reason, message) = ready(&plan.status);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "WaitingForGroup")
    );
    assert_eq!(message, "waiting for group team to act on the failure");

    // The group orders it for later than its own time: it starts then, not before.
    sim.group().restart = Some((1, t(150)));
    let plan = sim.at(120).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.next_restart_at, Some(Time(t(150))));
    assert_eq!(plan.requeue_at, Some(t(150)));
    let plan = sim.at(150).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(2));
    let s = &plan.status;
    assert_eq!(s.restart_history[0].restarted_at, Some(Time(t(150))));
    assert_eq!((s.restart_count, s.consecutive_failures), (1, 1));
    assert_eq!(s.recent_restarts, [Time(t(150))], "its own crash counts");
}

#[test]
fn an_order_due_before_the_members_own_time_waits_for_its_own_time() {
    let mut sim = running();
    sim.crashes(100);
    sim.group().restart = Some((1, t(104)));
    let plan = sim.at(104).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.next_restart_at, Some(Time(t(110))));
    assert_eq!(sim.at(110).step().create_pod.map(|p| p.attempt), Some(2));
}

#[path = "member/siblings.rs"]
mod siblings;
#[path = "member/stopped.rs"]
mod stopped;
