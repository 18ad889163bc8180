//! `Sim`, the IO shell played for one agent, alone or in a group: it decides, carries each plan
//! out as the operator would, and lets the test play the kubelet (and the group's orders).

#![allow(dead_code)] // each test binary uses a different part of this module

use agent_supervisor::api::{AgentStatus, Phase, Time};
use agent_supervisor::supervise::group::Directive;
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::progress::Reported;
use agent_supervisor::supervise::{
    AgentFacts, Input, LeaseFacts, Options, Plan, PodFacts, PolicyResolution, decide_with,
};

use crate::clock::t;
use crate::pods::{container, new_pod};

/// The agent a `Sim` plays unless told otherwise (`agent`): its name and uid.
pub(crate) const AGENT: &str = "researcher";
pub(crate) const UID: &str = "0b6f1c2e-researcher";

/// The world one agent lives in. `step` decides and carries the plan out.
pub(crate) struct Sim {
    pub(crate) input: Input,
    options: Options,
    /// The reason the container of a pod just created waits with.
    waiting: Option<&'static str>,
}

impl Sim {
    /// Agent `AGENT` alone under `policy`, its first decision at t(0).
    pub(crate) fn new(policy: PolicyResolution) -> Sim {
        Sim {
            input: Input {
                now: t(0),
                agent: AgentFacts {
                    name: AGENT.to_string(),
                    uid: UID.to_string(),
                    generation: 1,
                    suspend: false,
                    heartbeat: None,
                    template_hash: "h1".to_string(),
                    restart_requested: None,
                    reset_requested: None,
                    blocked: None,
                    sandbox: None,
                },
                status: AgentStatus::default(),
                policy,
                pod: None,
                previous: None,
                lease: None,
                group: None,
                outages: Vec::new(),
            },
            // Most scenarios follow a failure and its restart as two decisions, as the
            // operator makes them when the restart waits (for its backoff, or for the budget).
            // `at_once` makes a restart due at once in the failure's own decision.
            options: Options {
                restart_at_once: false,
            },
            waiting: Some("ContainerCreating"),
        }
    }

    /// Restarts due at once are made with the failure, as the operator makes them.
    pub(crate) fn at_once(mut self) -> Sim {
        self.options = Options::default();
        self
    }

    /// Plays the agent `name` with uid `uid` instead.
    pub(crate) fn agent(mut self, name: &str, uid: &str) -> Sim {
        self.input.agent.name = name.to_string();
        self.input.agent.uid = uid.to_string();
        self
    }

    /// The agent belongs to a group, which gives it `orders`.
    pub(crate) fn in_group(mut self, orders: Directive) -> Sim {
        self.input.group = Some(orders);
        self
    }

    /// The container of a pod just created waits with `reason` (`ContainerCreating` unless
    /// told otherwise).
    pub(crate) fn waiting(mut self, reason: Option<&'static str>) -> Sim {
        self.waiting = reason;
        self
    }

    /// An agent whose first pod was created at t(0) and has run, ready, since t(5).
    pub(crate) fn running(policy: PolicyResolution) -> Sim {
        Sim::new(policy).started()
    }

    /// This agent's first pod is created at t(0) and runs, ready, from t(5); decided at t(10).
    pub(crate) fn started(mut self) -> Sim {
        self.step();
        self.runs(5);
        self.at(10).step();
        assert_eq!(self.status().phase, Some(Phase::Running));
        self
    }

    pub(crate) fn at(&mut self, secs: i64) -> &mut Self {
        self.input.now = t(secs);
        self
    }

    pub(crate) fn status(&self) -> &AgentStatus {
        &self.input.status
    }

    pub(crate) fn pod(&mut self) -> &mut PodFacts {
        self.input.pod.as_mut().expect("the agent has a pod")
    }

    /// The group's orders, to change.
    pub(crate) fn group(&mut self) -> &mut Directive {
        self.input.group.as_mut().expect("a member")
    }

    /// Decides without carrying anything out.
    pub(crate) fn decide(&self) -> Plan {
        decide_with(self.input.clone(), self.options)
    }

    /// Decides (twice, to check it is repeatable) and carries out the plan.
    pub(crate) fn step(&mut self) -> Plan {
        let plan = self.decide();
        assert_eq!(self.decide(), plan, "repeatable");
        self.input = apply(&self.input, &plan, self.waiting);
        plan
    }

    /// The current pod reports `progress` and `checkpoint` on the heartbeat Lease it holds.
    pub(crate) fn reports(
        &mut self,
        progress: Option<&str>,
        checkpoint: Option<&str>,
    ) -> &mut Self {
        self.input.lease = Some(LeaseFacts {
            expect_slow_until: None,
            holder: self.input.pod.as_ref().map(|p| p.name.clone()),
            renew_time: Some(self.input.now),
            reported: Reported {
                progress: progress.map(str::to_string),
                checkpoint: checkpoint.map(str::to_string),
                spend: None,
            },
        });
        self
    }

    /// The scheduler places the current pod at `at`.
    pub(crate) fn placed(&mut self, at: i64) -> &mut Self {
        self.pod().scheduled_at = Some(t(at));
        self
    }

    /// The current pod runs, ready, since `since`.
    pub(crate) fn runs(&mut self, since: i64) -> &mut Self {
        let pod = self.pod();
        pod.phase = PodPhase::Running;
        pod.ready = true;
        pod.containers = vec![container(ContainerPhase::Running {
            started_at: Some(t(since)),
        })];
        self
    }

    /// The current pod's container exits with `code` at `at`.
    pub(crate) fn exits(&mut self, code: i32, message: Option<&str>, at: i64) -> &mut Self {
        let pod = self.pod();
        let started_at = pod.started_at();
        pod.phase = if code == 0 {
            PodPhase::Succeeded
        } else {
            PodPhase::Failed
        };
        pod.ready = false;
        pod.containers = vec![container(ContainerPhase::Terminated(Termination {
            exit_code: code,
            signal: None,
            reason: Some(if code == 0 { "Completed" } else { "Error" }.to_string()),
            message: message.map(str::to_string),
            started_at,
            finished_at: Some(t(at)),
        }))];
        self
    }

    pub(crate) fn evicted(&mut self) -> &mut Self {
        let pod = self.pod();
        pod.phase = PodPhase::Failed;
        pod.ready = false;
        pod.reason = Some("Evicted".to_string());
        pod.message = Some("The node was low on resource: memory.".to_string());
        self
    }

    /// The current pod runs from `run_from`, crashes with exit 1 at `crash_at`, and the operator
    /// decides then.
    pub(crate) fn crash(&mut self, run_from: i64, crash_at: i64) -> Plan {
        self.runs(run_from).exits(1, Some("boom"), crash_at);
        self.at(crash_at).step()
    }

    /// The current pod's container exits with code 1 and no message at `at`, and the operator
    /// decides then.
    pub(crate) fn crashes(&mut self, at: i64) -> Plan {
        self.exits(1, None, at);
        self.at(at).step()
    }

    /// A restart due at once: the first decision records it (and kills a live pod), the next,
    /// at the same instant, creates its pod. Returns both plans.
    pub(crate) fn restart_at_once(&mut self) -> (Plan, Plan) {
        let now = self.input.now;
        let recorded = self.step();
        assert_eq!(recorded.create_pod, None, "recorded first: {recorded:?}");
        let s = &recorded.status;
        assert_eq!(s.phase, Some(Phase::BackingOff));
        assert_eq!(s.next_restart_at, Some(Time(now)));
        assert_eq!(s.restart_history[0].restarted_at, None, "pending");
        assert_eq!(recorded.requeue_at, Some(now), "decided again at once");
        let created = self.step();
        assert!(created.create_pod.is_some(), "then created: {created:?}");
        assert_eq!(created.delete_pod, None, "the old pod is already going");
        (recorded, created)
    }

    /// Decides at the scheduled restart time.
    pub(crate) fn restart_when_due(&mut self) -> Plan {
        let due = self
            .status()
            .next_restart_at
            .clone()
            .expect("a restart is scheduled");
        self.input.now = due.0;
        let plan = self.step();
        assert!(plan.create_pod.is_some(), "restarted when due: {plan:?}");
        plan
    }
}

/// Carries out a plan as the IO shell does: the status is written, a
/// deleted pod is going, a created pod appears, Pending, made from the current template, its
/// container waiting with `waiting`.
fn apply(input: &Input, plan: &Plan, waiting: Option<&str>) -> Input {
    let mut next = input.clone();
    next.status = plan.status.clone();
    if let (Some(name), Some(pod)) = (&plan.delete_pod, next.pod.as_mut())
        && pod.name == *name
    {
        pod.deleting = true;
    }
    if let Some(new) = &plan.create_pod {
        next.pod = Some(new_pod(new, &input.agent.template_hash, input.now, waiting));
    }
    next
}

/// Fails `n` times in a row, restarting each time, the last crash at `last`.
pub(crate) fn fail_times(sim: &mut Sim, n: i64, last: i64) -> Plan {
    for i in (1..n).rev() {
        let at = last - 20 * i;
        let plan = sim.crash(at - 10, at);
        assert_eq!(
            plan.status.phase,
            Some(Phase::BackingOff),
            "{:?}",
            plan.events
        );
        sim.restart_when_due();
    }
    sim.crash(last - 10, last)
}
