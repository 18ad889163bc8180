//! An Agent that belongs to a group: `decide` with `Input.group` set, obeying the orders in its
//! entry of the group's status. `Sim` carries each plan out as the operator would and lets the
//! test play the kubelet and write the group's orders. Here: starting, and its own crash; in
//! `member/`: restarted with a sibling (`siblings.rs`), stopped and shut down by the group
//! (`stopped.rs`).

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, Duration, GroupMembership, Phase, RestartPolicySpec,
    ShutdownType, StopOrder, StopReason, Time, Trigger,
};
use agent_supervisor::supervise::Plan;
use agent_supervisor::supervise::conditions::{self, READY};
use agent_supervisor::supervise::group::Directive;
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{
    AgentFacts, EventReason, Input, PodFacts, PolicyResolution, decide,
};

use super::build::{listed, t};
use crate::pods::{container, new_pod};

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

struct Sim {
    input: Input,
}

impl Sim {
    fn new(group: Directive) -> Sim {
        Sim::with(fast(), group)
    }

    fn with(policy: RestartPolicySpec, group: Directive) -> Sim {
        Sim {
            input: Input {
                now: t(0),
                agent: AgentFacts {
                    name: AGENT.to_string(),
                    uid: "uid-researcher".to_string(),
                    generation: 1,
                    template_hash: "h1".to_string(),
                    ..AgentFacts::default()
                },
                status: AgentStatus::default(),
                policy: PolicyResolution::Named("fast".to_string(), policy),
                pod: None,
                previous: None,
                lease: None,
                group: Some(group),
                outages: Vec::new(),
            },
        }
    }

    /// A member whose attempt 1 has run, ready, since t(5).
    fn running() -> Sim {
        let mut sim = Sim::new(listed("team"));
        sim.step();
        sim.runs(5).at(10).step();
        assert_eq!(sim.status().phase, Some(Phase::Running));
        sim
    }

    fn at(&mut self, secs: i64) -> &mut Self {
        self.input.now = t(secs);
        self
    }

    fn status(&self) -> &AgentStatus {
        &self.input.status
    }

    /// The group's orders, to change.
    fn group(&mut self) -> &mut Directive {
        self.input.group.as_mut().expect("a member")
    }

    fn pod(&mut self) -> &mut PodFacts {
        self.input.pod.as_mut().expect("the agent has a pod")
    }

    /// Decides (twice, to check it is repeatable) and carries the plan out: the status is
    /// written, a deleted pod is going, a created pod appears Pending.
    fn step(&mut self) -> Plan {
        let plan = decide(self.input.clone());
        assert_eq!(decide(self.input.clone()), plan, "repeatable");
        self.input.status = plan.status.clone();
        if let (Some(name), Some(pod)) = (&plan.delete_pod, self.input.pod.as_mut())
            && pod.name == *name
        {
            pod.deleting = true;
        }
        if let Some(new) = &plan.create_pod {
            self.input.pod = Some(new_pod(new, "h1", self.input.now, None));
        }
        plan
    }

    /// The current pod runs, ready, since `since`.
    fn runs(&mut self, since: i64) -> &mut Self {
        let pod = self.pod();
        pod.phase = PodPhase::Running;
        pod.ready = true;
        pod.containers = vec![container(ContainerPhase::Running {
            started_at: Some(t(since)),
        })];
        self
    }

    /// The current pod's container exits with code 1 at `at`, and the operator decides then.
    fn crashes(&mut self, at: i64) -> Plan {
        let pod = self.pod();
        let started_at = pod.started_at();
        pod.phase = PodPhase::Failed;
        pod.ready = false;
        pod.containers = vec![container(ContainerPhase::Terminated(Termination {
            exit_code: 1,
            signal: None,
            reason: Some("Error".to_string()),
            message: None,
            started_at,
            finished_at: Some(t(at)),
        }))];
        self.at(at).step()
    }
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
    let mut sim = Sim::new(Directive {
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
    let mut sim = Sim::new(Directive {
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
    let mut sim = Sim::running();
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
    let mut sim = Sim::running();
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
