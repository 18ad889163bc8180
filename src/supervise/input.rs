//! The facts a decision is made from: plain data the IO shell gathers from the API server.

use jiff::Timestamp;

use crate::api::{AgentStatus, Heartbeat, RestartPolicySpec, Trigger};

/// Everything `decide` looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// The decision's clock. Only whole seconds are used: status times are stored to the second.
    pub now: Timestamp,
    pub agent: AgentFacts,
    /// The Agent's status as read.
    pub status: AgentStatus,
    pub policy: PolicyResolution,
    /// The pod of the newest attempt controlled by the Agent, if any.
    pub pod: Option<PodFacts>,
    /// When `pod` is of an attempt newer than the status records (a status write was lost
    /// after it was created): the pod of the attempt the status records, if it is still there.
    pub previous: Option<PodFacts>,
    /// The heartbeat Lease, when the agent has a heartbeat and the Lease exists.
    pub lease: Option<LeaseFacts>,
    /// The agent's orders from the AgentGroup it belongs to, if it belongs to one.
    pub group: Option<super::group::Directive>,
    /// The open outages of its policy (the policy's `status.outages`).
    pub outages: Vec<crate::api::Outage>,
}

/// What the decision needs of the Agent object itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentFacts {
    pub name: String,
    /// Seeds the jitter, so every decision about this agent is repeatable.
    pub uid: String,
    pub generation: i64,
    pub suspend: bool,
    pub heartbeat: Option<Heartbeat>,
    /// A hash of `spec.template` (and what else shapes the pod); a pod with another hash is
    /// rolled out.
    pub template_hash: String,
    /// The `supervisor.dev/restart-requested-at` annotation.
    pub restart_requested: Option<String>,
    /// The `supervisor.dev/reset-requested-at` annotation.
    pub reset_requested: Option<String>,
    /// Why the IO shell can start no attempt of this agent for now, if it cannot (the Sandbox
    /// it supervises is missing or unusable): no pod is started, the rest goes on.
    pub blocked: Option<Blocked>,
    /// The Sandbox the agent supervises (`spec.sandboxRef`), whose pods are named after it.
    pub sandbox: Option<String>,
}

/// Why no attempt can be started: the Ready condition's reason (and the Event's), and a
/// message that says what would unblock it.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    pub reason: super::plan::EventReason,
    pub message: String,
}

/// Which policy governs the agent.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyResolution {
    /// `spec.restartPolicyRef` names it, and it exists.
    Named(String, RestartPolicySpec),
    /// The namespace's RestartPolicy named `default`.
    NamespaceDefault(RestartPolicySpec),
    /// No policy named and no namespace default: the built-in defaults.
    BuiltIn,
    /// `spec.restartPolicyRef` names a policy that does not exist.
    Missing(String),
}

/// A pod's phase, as the kubelet reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// What the decision needs of a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodFacts {
    pub name: String,
    /// From the `supervisor.dev/attempt` label.
    pub attempt: u32,
    /// From the `supervisor.dev/template-hash` annotation.
    pub template_hash: Option<String>,
    pub created_at: Timestamp,
    /// When the operator took it as an attempt (`supervisor.dev/adopted-at`), for a pod it did
    /// not make (a Sandbox's); `None` for its own. Its heartbeat grace counts from the later of
    /// this and its start.
    pub adopted_at: Option<Timestamp>,
    /// A deletion has been requested (by anyone).
    pub deleting: bool,
    pub phase: PodPhase,
    /// `status.reason`, such as `Evicted`.
    pub reason: Option<String>,
    /// `status.message`.
    pub message: Option<String>,
    /// The reason of a `DisruptionTarget=True` condition, such as `EvictionByEvictionAPI`.
    pub disruption: Option<String>,
    /// Why a pending pod is not scheduled (the `PodScheduled=False` condition's reason).
    pub unschedulable: Option<String>,
    /// When the scheduler placed it (the `PodScheduled=True` condition's transition time).
    pub scheduled_at: Option<Timestamp>,
    /// The `Ready` condition.
    pub ready: bool,
    /// The app containers, in spec order (init containers are not the agent).
    pub containers: Vec<ContainerFacts>,
    /// The agent's own container (`spec.agentContainer`); `None`: the first.
    pub agent_container: Option<String>,
    /// What the pod was created for, from its annotations: see [`PodOrigin`].
    pub origin: PodOrigin,
}

/// What a pod was created for, written on it at creation, so that a pod whose status write was
/// lost still tells the next decision what it did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodOrigin {
    /// The restart it carries out; `None` for a first start or a resume.
    pub trigger: Option<Trigger>,
    /// The `restart-requested-at` value handled when it was created.
    pub handled_restart: Option<String>,
    /// The `reset-requested-at` value handled when it was created.
    pub handled_reset: Option<String>,
    /// The key of the last reset ordered by the agent's group, handled when it was created.
    pub handled_group_reset: Option<String>,
    /// The checkpoint it resumes from (`AGENT_CHECKPOINT`); `None`: from scratch.
    pub checkpoint: Option<String>,
}

/// One container's state.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerFacts {
    pub name: String,
    pub state: ContainerPhase,
}

/// Where a container is.
#[derive(Clone, Debug, PartialEq)]
pub enum ContainerPhase {
    Waiting {
        reason: Option<String>,
        message: Option<String>,
    },
    Running {
        started_at: Option<Timestamp>,
    },
    Terminated(Termination),
}

/// How a container ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Termination {
    pub exit_code: i32,
    /// Reported by some runtimes; otherwise derived from an exit code above 128.
    pub signal: Option<i32>,
    pub reason: Option<String>,
    /// The termination message (`/dev/termination-log`).
    pub message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
}

/// What the decision needs of the heartbeat Lease.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeaseFacts {
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    /// The progress and checkpoint its holder reported on it (its annotations).
    pub reported: super::progress::Reported,
    /// Until when its holder said a step will be slow (`supervisor.dev/expect-slow-until`).
    pub expect_slow_until: Option<Timestamp>,
}

impl PodFacts {
    /// When the pod started running: the earliest start of a running or terminated container.
    pub fn started_at(&self) -> Option<Timestamp> {
        self.containers
            .iter()
            .filter_map(|c| match &c.state {
                ContainerPhase::Running { started_at } => *started_at,
                ContainerPhase::Terminated(t) => t.started_at,
                ContainerPhase::Waiting { .. } => None,
            })
            .min()
    }

    /// The agent's own container: the one `spec.agentContainer` names, else the first.
    pub fn agent(&self) -> Option<&ContainerFacts> {
        match &self.agent_container {
            Some(name) => self.containers.iter().find(|c| &c.name == name),
            None => self.containers.first(),
        }
    }

    /// Not finished and not being deleted: the pod the "one live pod" invariant is about.
    pub fn is_live(&self) -> bool {
        !self.deleting && !self.is_finished()
    }

    /// Succeeded or Failed: the kubelet reported the end.
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// Live and with something still running or about to: a pod whose attempt has ended is
    /// deleted only then (a real kubelet reports its containers terminated a moment before it
    /// sets the pod's terminal phase; such a pod is left for its log).
    pub fn needs_kill(&self) -> bool {
        self.is_live() && !self.all_terminated()
    }

    /// Every container has terminated: nothing runs in the pod any more, even while its phase
    /// (which a real kubelet sets a moment later) still says Running.
    pub fn all_terminated(&self) -> bool {
        !self.containers.is_empty()
            && self
                .containers
                .iter()
                .all(|c| matches!(c.state, ContainerPhase::Terminated(_)))
    }
}
