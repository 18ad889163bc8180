//! A small supervision tree and its pods, played as the operator would: each reconcile gathers
//! the facts the way the IO shell does (`Membership::resolve`, `Directive::read`,
//! `controller::facts::{agent_view, child_view}` on `Agent` and `AgentGroup` objects), decides, checks the
//! plan, and carries it out. Here: the world, its steps and the end of a walk; an Agent's
//! reconcile and its checks are in `world/agent.rs`, a group's in `world/group.rs`.

use std::collections::{BTreeMap, BTreeSet};

use agent_supervisor::api::{
    Agent, AgentGroup, AgentGroupSpec, AgentSpec, AgentStatus, GroupPhase, MemberKey, MemberKind,
    Phase, RestartPolicySpec,
};
use agent_supervisor::supervise::PodFacts;
use agent_supervisor::supervise::group::{Directive, GroupSpecView, Membership};
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase, Termination};
use jiff::{SignedDuration, Timestamp};

use super::Step;

#[path = "world/agent.rs"]
mod agent;
#[path = "world/group.rs"]
mod group;

pub const ROOT: &str = "root";
pub const KIDS: &str = "kids";

pub use crate::clock::t;

pub struct World {
    pub now: Timestamp,
    pub agents: BTreeMap<String, Agent>,
    pub groups: BTreeMap<String, AgentGroup>,
    /// Every pod ever created, per Agent, until garbage collected.
    pub pods: BTreeMap<String, Vec<PodFacts>>,
    policy: RestartPolicySpec,
    /// The root group's `reset-requested-at` annotation.
    reset_requested: Option<String>,
    /// (group, member, attempt) of every crash a group restarted for.
    restarted_for: BTreeSet<(String, String, u32)>,
    /// Per group, when the restarts counting toward its intensity happened, as seen here.
    counted: BTreeMap<String, Vec<Timestamp>>,
    /// (child group, incarnation) that gave up, until its parent takes it in.
    escalating: BTreeSet<(String, u32)>,
    pub trace: Vec<Step>,
}

impl World {
    pub fn new(root: AgentGroupSpec, kids: AgentGroupSpec, policy: RestartPolicySpec) -> World {
        let mut agents = BTreeMap::new();
        for spec in [&root, &kids] {
            for m in spec
                .members
                .iter()
                .filter(|m| m.key().kind == MemberKind::Agent)
            {
                let name = m.key().name;
                let agent = Agent::new(
                    &name,
                    AgentSpec {
                        template: Default::default(),
                        restart_policy_ref: None,
                        suspend: false,
                        agent_container: None,
                        heartbeat: None,
                        volume_claim_templates: Vec::new(),
                        sandbox_ref: None,
                    },
                );
                agents.insert(name, agent);
            }
        }
        let groups = [(ROOT, root), (KIDS, kids)]
            .into_iter()
            .map(|(name, spec)| (name.to_string(), AgentGroup::new(name, spec)))
            .collect();
        World {
            now: t(0),
            pods: agents.keys().map(|n| (n.clone(), Vec::new())).collect(),
            agents,
            groups,
            policy,
            reset_requested: None,
            restarted_for: BTreeSet::new(),
            counted: BTreeMap::new(),
            escalating: BTreeSet::new(),
            trace: Vec::new(),
        }
    }

    /// Objects in reconcile order: the groups, top down, then the Agents.
    pub fn objects(&self) -> Vec<(MemberKind, String)> {
        let groups = [ROOT, KIDS].map(|g| (MemberKind::AgentGroup, g.to_string()));
        let agents = self.agents.keys().map(|a| (MemberKind::Agent, a.clone()));
        groups.into_iter().chain(agents).collect()
    }

    fn newest(&mut self, agent: &str) -> Option<&mut PodFacts> {
        self.pods
            .get_mut(agent)?
            .iter_mut()
            .max_by_key(|p| p.attempt)
    }

    fn newest_live(&mut self, agent: &str) -> Option<&mut PodFacts> {
        self.newest(agent).filter(|p| p.is_live())
    }

    pub fn happen(&mut self, step: &Step) {
        self.trace.push(step.clone());
        let now = self.now;
        let names: Vec<String> = self.agents.keys().cloned().collect();
        let pick = |i: usize| names[i % names.len()].clone();
        match *step {
            Step::Wait(secs) => self.now = now + SignedDuration::from_secs(secs),
            Step::Runs(i) => {
                if let Some(pod) = self.newest_live(&pick(i)) {
                    run(pod, now);
                }
            }
            Step::Crash(i) => {
                if let Some(pod) = self.newest_live(&pick(i)) {
                    let started_at = pod.started_at();
                    pod.phase = PodPhase::Failed;
                    pod.ready = false;
                    pod.containers[0].state = ContainerPhase::Terminated(Termination {
                        exit_code: 1,
                        signal: None,
                        reason: Some("Error".to_string()),
                        message: None,
                        started_at,
                        finished_at: Some(now),
                    });
                }
            }
            Step::Evict(i) => {
                if let Some(pod) = self.newest_live(&pick(i)) {
                    pod.phase = PodPhase::Failed;
                    pod.ready = false;
                    pod.reason = Some("Evicted".to_string());
                }
            }
            Step::Gc => {
                for pods in self.pods.values_mut() {
                    pods.retain(|p| p.is_live());
                }
            }
            Step::ResetRoot => {
                let n = self
                    .trace
                    .iter()
                    .filter(|s| matches!(s, Step::ResetRoot))
                    .count();
                self.reset_requested = Some(format!("r{n}"));
            }
            Step::Reconcile(i) => {
                let objects = self.objects();
                let (kind, name) = objects[i % objects.len()].clone();
                self.reconcile(kind, &name);
            }
        }
    }

    pub fn reconcile(&mut self, kind: MemberKind, name: &str) {
        match kind {
            MemberKind::Agent => self.reconcile_agent(name),
            MemberKind::AgentGroup => self.reconcile_group(name),
        }
    }

    fn membership(&self) -> Membership {
        let views: Vec<GroupSpecView<'_>> = self
            .groups
            .values()
            .map(|g| GroupSpecView {
                name: g.metadata.name.as_deref().unwrap_or_default(),
                // The root is the older.
                created: if g.metadata.name.as_deref() == Some(ROOT) {
                    t(-20)
                } else {
                    t(-10)
                },
                members: &g.spec.members,
            })
            .collect();
        Membership::resolve(&views)
    }

    /// `member`'s orders, from the group that supervises it.
    fn directive(&self, membership: &Membership, member: &MemberKey) -> Option<Directive> {
        let group = membership.owner(member)?;
        let status = self.groups.get(group).and_then(|g| g.status.as_ref());
        Some(Directive::read(group, status, member))
    }

    // --- The end of a walk -------------------------------------------------------------------

    /// No more failures: time passes, pods start, every object is reconciled, until the tree
    /// has settled. Then it runs again, or it has given up and stopped everything.
    pub fn settle(&mut self) {
        for _ in 0..12 {
            // Pods created at the last instant start a second later and have run since: long
            // enough, by the next reconcile, to count as Running after a failure (`SETTLE`).
            let started = self.now + SignedDuration::from_secs(1);
            self.now += SignedDuration::from_secs(700);
            for pods in self.pods.values_mut() {
                for pod in pods.iter_mut().filter(|p| p.is_live()) {
                    run(pod, started);
                }
            }
            for (kind, name) in self.objects() {
                self.reconcile(kind, &name);
            }
            // The groups see what their members just did.
            self.reconcile(MemberKind::AgentGroup, KIDS);
            self.reconcile(MemberKind::AgentGroup, ROOT);
        }
        let context = self.context();
        let root = self.groups[ROOT].status.clone().unwrap_or_default();
        let kids = self.groups[KIDS].status.clone().unwrap_or_default();
        let live = |w: &World, a: &str| w.pods[a].iter().filter(|p| p.is_live()).count();
        if root.gave_up.is_some() {
            for (name, agent) in &self.agents {
                let phase = agent.status.as_ref().and_then(|s| s.phase);
                assert_eq!(phase, Some(Phase::Stopped), "{name}\n{context}");
                assert_eq!(live(self, name), 0, "{name}\n{context}");
            }
        } else {
            assert_eq!(kids.gave_up, None, "its parent acted on it\n{context}");
            for (name, agent) in &self.agents {
                let status = agent.status.clone().unwrap_or_else(AgentStatus::default);
                assert_eq!(status.phase, Some(Phase::Running), "{name}\n{context}");
                assert_eq!(live(self, name), 1, "{name}\n{context}");
            }
            for g in [&root, &kids] {
                assert_eq!(g.phase, Some(GroupPhase::Running), "{context}");
            }
            assert!(
                self.escalating.is_empty(),
                "{:?}\n{context}",
                self.escalating
            );
        }
    }
}

/// The pod runs, ready, since `now` (if it has not already ended).
fn run(pod: &mut PodFacts, now: Timestamp) {
    if pod.phase == PodPhase::Pending {
        pod.phase = PodPhase::Running;
        pod.ready = true;
        pod.containers[0].state = ContainerPhase::Running {
            started_at: Some(now),
        };
    }
}
