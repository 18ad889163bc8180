//! An Agent that belongs to a group: `decide` with `Input.group` set, obeying the orders in its
//! entry of the group's status. `Sim` carries each plan out as the operator would and lets the
//! test play the kubelet and write the group's orders.

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, Duration, GroupMembership, Phase, RestartPolicySpec,
    RestartRecord, Shutdown, ShutdownType, StopOrder, StopReason, Time, Trigger,
};
use agent_supervisor::supervise::conditions::{self, READY};
use agent_supervisor::supervise::group::Directive;
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{
    AgentFacts, EventReason, Input, PodFacts, PolicyResolution, decide,
};
use agent_supervisor::supervise::{Plan, pod_name};

use super::build::{listed, t};

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
            self.input.pod = Some(PodFacts {
                name: new.name.clone(),
                attempt: new.attempt,
                template_hash: Some("h1".to_string()),
                created_at: self.input.now,
                deleting: false,
                phase: PodPhase::Pending,
                reason: None,
                message: None,
                disruption: None,
                unschedulable: None,
                ready: false,
                containers: vec![container(ContainerPhase::Waiting {
                    reason: None,
                    message: None,
                })],
                agent_container: None,
                origin: new.origin.clone(),
            });
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

fn container(state: ContainerPhase) -> ContainerFacts {
    ContainerFacts {
        name: "agent".to_string(),
        state,
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

// --- Restarted with a sibling ----------------------------------------------------------------

#[test]
fn a_running_sibling_is_stopped_and_restarted_without_counting_it() {
    let mut sim = Sim::running();
    // One crash of its own first, so there are counts to keep.
    sim.crashes(100);
    sim.group().restart = Some((1, t(110)));
    sim.at(110).step();
    sim.runs(115).at(120).step();
    let before = sim.status().clone();
    assert_eq!(before.consecutive_failures, 1);
    assert_eq!(before.recent_restarts.len(), 1);

    // A sibling crashed: the group restarts attempt 2 at t(200).
    sim.group().restart = Some((2, t(200)));
    let plan = sim.at(150).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 2)));
    assert_eq!(plan.create_pod, None);
    let s = &plan.status;
    assert_eq!(
        s.restart_history[0],
        RestartRecord {
            attempt: 2,
            trigger: Trigger::Group,
            failed_at: None,
            reason: None,
            class: None,
            exit_code: None,
            signal: None,
            message: None,
            ran_for: None,
            fingerprint: None,
            backoff: Some(Duration::from_secs(50)),
            restarted_at: None,
        }
    );
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert_eq!(s.next_restart_at, Some(Time(t(200))));
    assert_eq!(plan.requeue_at, Some(t(200)));
    assert_eq!(reasons(&plan), [EventReason::RestartScheduled]);
    assert_eq!(
        plan.events[0].note,
        "Group team restarts it: stopping pod researcher-2; starting again at \
         2025-06-01T12:03:20Z"
    );
    assert_eq!(s.consecutive_failures, before.consecutive_failures);
    assert_eq!(s.recent_restarts, before.recent_restarts);
    assert_eq!(s.circuit_breaker, before.circuit_breaker);

    // Its pod is going; nothing more until t(200).
    let plan = sim.at(160).step();
    assert_eq!((plan.create_pod, plan.delete_pod), (None, None));
    let plan = sim.at(200).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(3));
    let s = &plan.status;
    assert_eq!(s.restart_history[0].restarted_at, Some(Time(t(200))));
    assert_eq!(s.restart_count, before.restart_count + 1);
    assert_eq!(s.consecutive_failures, before.consecutive_failures);
    assert_eq!(
        s.recent_restarts, before.recent_restarts,
        "not toward its limit"
    );

    // The order names attempt 2, now past: attempt 3 runs on.
    let plan = sim.runs(205).at(210).step();
    assert_eq!(plan.delete_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.status.restart_history.len(), 2);
}

#[test]
fn a_stale_order_is_ignored() {
    let mut sim = Sim::running();
    sim.group().restart = Some((0, t(50)));
    let plan = sim.at(60).step();
    assert_eq!((plan.delete_pod, plan.create_pod), (None, None));
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.status.restart_history, []);
}

#[test]
fn a_sibling_restarted_under_sequential_waits_for_the_member_before_it() {
    let mut sim = Sim::running();
    *sim.group() = Directive {
        restart: Some((1, t(100))),
        waiting_for: Some("planner".to_string()),
        ..listed("team")
    };
    let plan = sim.at(100).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 1)), "stopped at once");
    let plan = sim.at(101).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(ready(&plan.status).1, "WaitingForGroup");
    sim.group().waiting_for = None;
    assert_eq!(sim.at(130).step().create_pod.map(|p| p.attempt), Some(2));
}

#[test]
fn a_member_its_own_policy_gave_up_on_is_restarted_by_its_group() {
    let never = RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Never,
            ..fast().backoff
        },
        ..fast()
    };
    let mut sim = Sim::with(never, listed("team"));
    sim.step();
    sim.runs(5).at(10).step();
    assert_eq!(sim.crashes(100).status.phase, Some(Phase::Stopped));
    sim.group().restart = Some((1, t(150)));
    let plan = sim.at(150).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(2));
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::Group);
}

// --- Stopped and shut down by the group ------------------------------------------------------

#[test]
fn a_group_that_gave_up_stops_its_member() {
    let mut sim = Sim::running();
    sim.group().stop = stop(StopReason::GaveUp, None, "group team gave up");
    let plan = sim.at(100).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 1)));
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    let (status, reason, message) = ready(&plan.status);
    assert_eq!(
        (status.as_str(), reason.as_str(), message.as_str()),
        ("False", "GroupGaveUp", "group team gave up")
    );
    assert_eq!(reasons(&plan), [EventReason::GroupGaveUp]);
    assert!(plan.events[0].warning());
    assert_eq!(
        plan.events[0].note,
        "group team gave up: stopping pod researcher-1"
    );
    // Said once; nothing starts, not even when a restart order for its attempt is due.
    sim.group().restart = Some((1, t(100)));
    let plan = sim.at(200).step();
    assert_eq!(plan.events, []);
    assert_eq!((plan.create_pod, plan.delete_pod), (None, None));
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
}

#[test]
fn a_crashed_member_whose_group_gave_up_stops_and_resumes_once_reset() {
    let mut sim = Sim::running();
    sim.crashes(100);
    // Its crash made the group give up: taken in (an order), and a stop.
    *sim.group() = Directive {
        restart: Some((1, t(110))),
        stop: stop(StopReason::GaveUp, None, "group team gave up"),
        ..listed("team")
    };
    let plan = sim.at(101).step();
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert_eq!(plan.events[0].note, "group team gave up: no pod is started");
    assert_eq!(sim.at(300).step().create_pod, None);

    // The group is reset: the reset is applied once, and it restarts.
    *sim.group() = Directive {
        restart: Some((1, t(110))),
        reset: Some("uid-team/r1".to_string()),
        ..listed("team")
    };
    let plan = sim.at(400).step();
    assert_eq!(reasons(&plan)[0], EventReason::Reset);
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(2));
    let s = &plan.status;
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(
        s.group.as_ref().and_then(|g| g.handled_reset.as_deref()),
        Some("uid-team/r1")
    );
    let plan = sim.runs(405).at(410).step();
    assert!(!reasons(&plan).contains(&EventReason::Reset), "once");
}

#[test]
fn a_group_that_shut_down_stops_its_member_then_records_its_shutdown() {
    let mut sim = Sim::running();
    let why = "group team shut down: significant member planner shut down";
    sim.group().stop = stop(StopReason::Shutdown, Some(ShutdownType::Economic), why);
    // First the pod is stopped gracefully...
    let plan = sim.at(100).step();
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, 1)));
    assert_eq!(plan.record_shutdown, None);
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert_eq!(ready(&plan.status).1, "GroupShutdown");
    assert_eq!(reasons(&plan), [EventReason::GroupShutdown]);
    // ...then, the pod gone, the shutdown is recorded, with source Group.
    let plan = sim.at(110).step();
    let expected = Shutdown {
        kind: ShutdownType::Economic,
        reason: Some(why.to_string()),
        message: None,
        at: Some(Time(t(110))),
        source: Some("Group".to_string()),
    };
    assert_eq!(plan.record_shutdown.as_ref(), Some(&expected));
    assert_eq!(plan.status.shutdown.as_ref(), Some(&expected));
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert_eq!(reasons(&plan), [EventReason::GroupShutdown]);
    assert_eq!(plan.delete_pod, None);
    // Left alone from then on.
    let plan = sim.at(500).step();
    assert_eq!(plan.events, []);
    assert_eq!((plan.create_pod, plan.delete_pod), (None, None));
    assert_eq!(plan.record_shutdown, None);
}

#[test]
fn a_member_stopped_before_it_ever_started_starts_when_its_group_restarts_it() {
    // Held (Sequential) when its group gave up: stopped in attempt 0.
    let mut sim = Sim::new(Directive {
        waiting_for: Some("planner".to_string()),
        ..listed("team")
    });
    sim.step();
    *sim.group() = Directive {
        stop: stop(StopReason::GaveUp, None, "group team gave up"),
        ..listed("team")
    };
    let plan = sim.at(10).step();
    assert_eq!(
        (plan.status.phase, plan.status.attempt),
        (Some(Phase::Stopped), 0)
    );
    // Its group's parent restarts the group: every member is ordered to end its current
    // attempt, here attempt 0, and start the next at t(50).
    *sim.group() = Directive {
        restart: Some((0, t(50))),
        ..listed("team")
    };
    let plan = sim.at(20).step();
    assert_eq!(plan.create_pod, None, "not before the order is due");
    assert_eq!(plan.requeue_at, Some(t(50)));
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(
        ready(&plan.status),
        (
            "False".to_string(),
            "WaitingForGroup".to_string(),
            "group team restarts it at 2025-06-01T12:00:50Z".to_string()
        )
    );
    let plan = sim.at(50).step();
    assert_eq!(plan.create_pod.map(|p| p.attempt), Some(1));
    assert_eq!(plan.status.restart_history, [], "a first start");
    assert_eq!(plan.status.restart_count, 0);
}
