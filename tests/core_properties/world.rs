//! `World`, one agent's world along a walk: it makes each step happen, decides, checks the
//! plan, and carries it out.

use agent_supervisor::api::{
    AgentStatus, Duration, Heartbeat, RestartPolicySpec, Shutdown, ShutdownType,
};
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{
    AgentFacts, Input, LeaseFacts, Plan, PodFacts, PolicyResolution, decide,
};
use jiff::SignedDuration;

use crate::clock::t;
use crate::pods::new_pod;
use crate::steps::Step;
use crate::walks::check;

/// One agent's world: its pods (all of them, to count the live ones), the Agent, the policy.
pub(crate) struct World {
    input: Input,
    pods: Vec<PodFacts>,
    policy: RestartPolicySpec,
    lose_next_write: bool,
}

impl World {
    pub(crate) fn new(policy: RestartPolicySpec, heartbeat: Option<u64>) -> World {
        World {
            input: Input {
                now: t(0),
                agent: AgentFacts {
                    name: "walker".to_string(),
                    uid: "uid-walker".to_string(),
                    generation: 1,
                    suspend: false,
                    heartbeat: heartbeat.map(|s| Heartbeat {
                        timeout: Duration::from_secs(s),
                        grace_period: None,
                    }),
                    template_hash: "h0".to_string(),
                    restart_requested: None,
                    reset_requested: None,
                    blocked: None,
                    sandbox: None,
                },
                status: AgentStatus::default(),
                policy: PolicyResolution::Named("walk".to_string(), policy.clone()),
                pod: None,
                previous: None,
                lease: None,
                group: None,
                outages: Vec::new(),
            },
            pods: Vec::new(),
            policy,
            lose_next_write: false,
        }
    }

    fn newest(&mut self) -> Option<&mut PodFacts> {
        self.pods.iter_mut().max_by_key(|p| p.attempt)
    }

    /// The newest pod, if it has not finished and nobody is deleting it.
    fn newest_live(&mut self) -> Option<&mut PodFacts> {
        self.newest().filter(|p| p.is_live())
    }

    pub(crate) fn happen(&mut self, step: &Step) {
        let now = self.input.now;
        match *step {
            Step::Wait(secs) => self.input.now = now + SignedDuration::from_secs(secs),
            Step::Runs => {
                if let Some(pod) = self.newest_live()
                    && pod.phase == PodPhase::Pending
                {
                    pod.phase = PodPhase::Running;
                    pod.ready = true;
                    pod.containers[0].state = ContainerPhase::Running {
                        started_at: Some(now),
                    };
                }
            }
            Step::Exits { code, oom, message } => {
                if let Some(pod) = self.newest_live() {
                    let started_at = pod.started_at();
                    pod.phase = if code == 0 {
                        PodPhase::Succeeded
                    } else {
                        PodPhase::Failed
                    };
                    pod.ready = false;
                    let message = match message {
                        0 => None,
                        1 => Some(r#"{"shutdown":"economic","reason":"budget exhausted"}"#),
                        2 => Some(r#"{"shutdown":"voluntary"}"#),
                        _ => Some("Traceback: boom"),
                    };
                    pod.containers[0].state = ContainerPhase::Terminated(Termination {
                        exit_code: code,
                        signal: None,
                        reason: Some(if oom { "OOMKilled" } else { "Error" }.to_string()),
                        message: message.map(str::to_string),
                        started_at,
                        finished_at: Some(now),
                    });
                }
            }
            Step::Disrupted(kind) => {
                if let Some(pod) = self.newest_live() {
                    match kind {
                        0 => {
                            pod.phase = PodPhase::Failed;
                            pod.reason = Some("Evicted".to_string());
                        }
                        1 => pod.disruption = Some("PreemptionByScheduler".to_string()),
                        2 => pod.disruption = Some("DeletionByTaintManager".to_string()),
                        _ => pod.phase = PodPhase::Unknown,
                    }
                }
            }
            Step::DeletedBySomeone => {
                if let Some(pod) = self.newest() {
                    pod.deleting = true;
                }
            }
            Step::Vanishes => {
                if let Some(i) = (0..self.pods.len()).max_by_key(|&i| self.pods[i].attempt) {
                    self.pods.remove(i);
                }
            }
            Step::Gc => self.pods.retain(|p| p.is_live()),
            Step::Renews { stale } => {
                if self.input.agent.heartbeat.is_some() {
                    let holder = match (stale, self.pods.iter().max_by_key(|p| p.attempt)) {
                        (false, Some(pod)) if pod.is_live() => pod.name.clone(),
                        _ => "walker-0".to_string(),
                    };
                    self.input.lease = Some(LeaseFacts {
                        expect_slow_until: None,
                        holder: Some(holder),
                        renew_time: Some(now),
                        reported: Default::default(),
                    });
                }
            }
            Step::RequestRestart(k) => self.input.agent.restart_requested = Some(format!("r{k}")),
            Step::RequestReset(k) => self.input.agent.reset_requested = Some(format!("x{k}")),
            Step::Suspend(on) => self.input.agent.suspend = on,
            Step::ExternalShutdown(on) => {
                self.input.status.shutdown = on.then(|| Shutdown {
                    kind: ShutdownType::Economic,
                    reason: Some("budget exhausted".to_string()),
                    message: None,
                    at: None,
                    source: Some("economy".to_string()),
                });
            }
            Step::Template(k) => {
                let hash = format!("h{k}");
                if hash != self.input.agent.template_hash {
                    self.input.agent.template_hash = hash;
                    self.input.agent.generation += 1;
                }
            }
            Step::PolicyMissing(missing) => {
                self.input.policy = if missing {
                    PolicyResolution::Missing("walk".to_string())
                } else {
                    PolicyResolution::Named("walk".to_string(), self.policy.clone())
                };
            }
            Step::LoseNextWrite => self.lose_next_write = true,
        }
        self.input.pod = self.pods.iter().max_by_key(|p| p.attempt).cloned();
    }

    /// Decides, checks the plan, and carries it out.
    pub(crate) fn decide(&mut self, trace: &[Step]) -> Plan {
        self.input.pod = self.pods.iter().max_by_key(|p| p.attempt).cloned();
        // Gathered as the operator does: after a lost write, the pod the status knows too.
        let attempt = self.input.status.attempt;
        self.input.previous = self
            .input
            .pod
            .as_ref()
            .filter(|p| attempt > 0 && p.attempt > attempt)
            .and_then(|_| self.pods.iter().find(|p| p.attempt == attempt))
            .cloned();
        let plan = decide(self.input.clone());
        check(&self.input, &plan, &self.pods, trace);
        if let Some(name) = &plan.delete_pod {
            for pod in self.pods.iter_mut().filter(|p| &p.name == name) {
                pod.deleting = true;
            }
        }
        if let Some(new) = &plan.create_pod {
            self.pods.push(new_pod(
                new,
                &self.input.agent.template_hash,
                self.input.now,
                Some("ContainerCreating"),
            ));
        }
        let live = self.pods.iter().filter(|p| p.is_live()).count();
        assert!(live <= 1, "{live} live pods after {plan:#?}\n{trace:#?}");
        // A lost write: the pod actions happened, then the operator died before writing the
        // status (and the shutdown it may have recorded). A write that may wait is not made.
        let lost = std::mem::take(&mut self.lose_next_write);
        if !lost {
            self.input.status = plan.status.clone();
        }
        self.input.pod = self.pods.iter().max_by_key(|p| p.attempt).cloned();
        plan
    }

    /// Decides again at the same time until nothing changes: steady state is silent.
    pub(crate) fn settle(&mut self, trace: &[Step]) {
        for _ in 0..4 {
            let before = self.input.status.clone();
            let plan = self.decide(trace);
            let quiet = plan.create_pod.is_none()
                && plan.delete_pod.is_none()
                && plan.record_shutdown.is_none()
                && plan.events.is_empty()
                && plan.status == before;
            if quiet {
                return;
            }
        }
        panic!(
            "no steady state at {}: {:#?}\n{trace:#?}",
            self.input.now, self.input.status
        );
    }
}
