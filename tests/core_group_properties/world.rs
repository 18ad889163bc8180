//! A small supervision tree and its pods, played as the operator would: each reconcile gathers
//! the facts the way the IO shell does (`Membership::resolve`, `Directive::read`,
//! `controller::facts::{agent_view, child_view}` on `Agent` and `AgentGroup` objects), decides, checks the
//! plan, and carries it out.

use std::collections::{BTreeMap, BTreeSet};

use agent_supervisor::api::{
    Agent, AgentGroup, AgentGroupSpec, AgentSpec, AgentStatus, GroupPhase, GroupTrigger, MemberKey,
    MemberKind, Phase, RestartPolicySpec, Trigger,
};
use agent_supervisor::supervise::group::{
    Directive, GroupEventReason, GroupFacts, GroupInput, GroupPlan, GroupSpecView, MemberFacts,
    MemberState, Membership, decide_group,
};
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{AgentFacts, Input, Plan, PodFacts, PolicyResolution, decide};
use jiff::{SignedDuration, Timestamp};

use super::Step;

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

    // --- An Agent ----------------------------------------------------------------------------

    fn reconcile_agent(&mut self, name: &str) {
        let membership = self.membership();
        let input = Input {
            now: self.now,
            agent: AgentFacts {
                name: name.to_string(),
                uid: format!("uid-{name}"),
                generation: 1,
                template_hash: "h".to_string(),
                ..AgentFacts::default()
            },
            status: self.agents[name].status.clone().unwrap_or_default(),
            policy: PolicyResolution::Named("walk".to_string(), self.policy.clone()),
            pod: self.pods[name].iter().max_by_key(|p| p.attempt).cloned(),
            previous: None,
            lease: None,
            group: self.directive(&membership, &MemberKey::agent(name)),
            outages: Vec::new(),
        };
        let plan = decide(input.clone());
        assert_eq!(
            decide(input.clone()),
            plan,
            "repeatable\n{}",
            self.context()
        );
        self.check_agent(&input, &plan);

        let pods = self.pods.get_mut(name).expect("known agent");
        if let Some(delete) = &plan.delete_pod {
            for pod in pods.iter_mut().filter(|p| &p.name == delete) {
                pod.deleting = true;
            }
        }
        if let Some(new) = &plan.create_pod {
            pods.push(PodFacts {
                name: new.name.clone(),
                attempt: new.attempt,
                template_hash: Some("h".to_string()),
                created_at: self.now,
                deleting: false,
                phase: PodPhase::Pending,
                reason: None,
                message: None,
                disruption: None,
                unschedulable: None,
                ready: false,
                containers: vec![ContainerFacts {
                    name: "agent".to_string(),
                    state: ContainerPhase::Waiting {
                        reason: None,
                        message: None,
                    },
                }],
                agent_container: None,
                origin: new.origin.clone(),
            });
        }
        let live = pods.iter().filter(|p| p.is_live()).count();
        assert!(live <= 1, "{live} live pods of {name}\n{}", self.context());
        self.agents.get_mut(name).expect("known agent").status = Some(plan.status);
    }

    fn check_agent(&self, input: &Input, plan: &Plan) {
        let (before, after) = (&input.status, &plan.status);
        let context = || format!("{:?}\n{}", plan.events, self.context());
        let d = input.group.as_ref();
        let order = d.and_then(|d| d.restart_of(before.attempt));
        let stop = d.is_some_and(|d| d.stop.is_some());
        let live = input
            .pod
            .as_ref()
            .filter(|p| p.attempt == before.attempt && p.is_live());

        // Stopped for its group's restart: recorded with trigger Group, counted toward nothing.
        let killed_for_group = order.is_some()
            && !stop
            && live.is_some()
            && plan.delete_pod.as_ref() == live.map(|p| &p.name)
            && matches!(before.phase, Some(Phase::Pending | Phase::Running));
        if killed_for_group {
            let record = &after.restart_history[0];
            assert_eq!(record.trigger, Trigger::Group, "{}", context());
            assert_eq!(record.attempt, before.attempt, "{}", context());
            assert_eq!(record.restarted_at, None, "{}", context());
            no_count_grows(before, after, &context);
        }
        // Its restart, when it happens, counts toward nothing either.
        let pending = before
            .restart_history
            .first()
            .filter(|r| r.restarted_at.is_none());
        if plan.create_pod.is_some() && pending.is_some_and(|r| r.trigger == Trigger::Group) {
            no_count_grows(before, after, &context);
        }
        // A failure count grows only with a failure of its own.
        if after.consecutive_failures > before.consecutive_failures {
            assert_ne!(after.last_failure, before.last_failure, "{}", context());
        }
        // A member starts a pod only as its group lets it: listed, not waiting, not stopped,
        // and, after a crash, once the group has ordered the restart.
        if plan.create_pod.is_some()
            && let Some(d) = d
        {
            assert!(
                d.listed && d.waiting_for.is_none() && !stop,
                "{}",
                context()
            );
            let crash = pending.is_some_and(|r| {
                r.attempt == before.attempt
                    && before.attempt > 0
                    && matches!(
                        r.trigger,
                        Trigger::Failure | Trigger::HeartbeatLost | Trigger::Disruption
                    )
            });
            if crash {
                assert!(order.is_some(), "restarted before its group\n{}", context());
            }
        }
    }

    // --- A group -----------------------------------------------------------------------------

    fn reconcile_group(&mut self, name: &str) {
        let membership = self.membership();
        let group = &self.groups[name];
        let members = group
            .spec
            .members
            .iter()
            .map(|m| {
                let key = m.key();
                let state = match (membership.refusal(name, &key), key.kind) {
                    (Some(refusal), _) => MemberState::Refused(refusal.clone()),
                    (None, MemberKind::Agent) => self
                        .agents
                        .get(&key.name)
                        .map_or(MemberState::NotFound, |a| {
                            MemberState::Agent(agent_supervisor::controller::facts::agent_view(a))
                        }),
                    (None, MemberKind::AgentGroup) => self
                        .groups
                        .get(&key.name)
                        .map_or(MemberState::NotFound, |g| {
                            MemberState::Group(agent_supervisor::controller::facts::child_view(g))
                        }),
                };
                MemberFacts {
                    key,
                    significant: m.significant,
                    state,
                }
            })
            .collect();
        let input = GroupInput {
            now: self.now,
            group: GroupFacts {
                name: name.to_string(),
                uid: format!("uid-{name}"),
                generation: 1,
                created: jiff::Timestamp::MIN,
                spec: group.spec.clone(),
                reset_requested: (name == ROOT)
                    .then(|| self.reset_requested.clone())
                    .flatten(),
            },
            status: group.status.clone().unwrap_or_default(),
            parent: self.directive(&membership, &MemberKey::group(name)),
            members,
        };
        let plan = decide_group(input.clone());
        assert_eq!(
            decide_group(input.clone()),
            plan,
            "repeatable\n{}",
            self.context()
        );
        self.check_group(&membership, &input, &plan);
        self.groups.get_mut(name).expect("known group").status = Some(plan.status);
    }

    fn check_group(&mut self, membership: &Membership, input: &GroupInput, plan: &GroupPlan) {
        let name = input.group.name.clone();
        let (before, after) = (&input.status, &plan.status);
        let context = format!("{:?}\n{}", plan.events, self.context());
        let spec = &input.group.spec;

        // A reset or a restart by the parent begins a fresh count, before any crash is counted.
        let counted = self.counted.entry(name.clone()).or_default();
        let reset = plan
            .events
            .iter()
            .any(|e| e.reason == GroupEventReason::Reset);
        if reset || after.incarnation > before.incarnation.max(1) {
            counted.clear();
        }
        let new = (after.restart_count - before.restart_count) as usize;
        for record in &after.restart_history[..new] {
            let Some(member) = &record.member else {
                assert_eq!(record.trigger, GroupTrigger::Group, "{context}");
                continue;
            };
            // Each restart answers one crash of one member, and each crash gets at most one.
            let facts = input.members.iter().find(|m| &m.key.name == member);
            let crash = facts.and_then(|m| match &m.state {
                MemberState::Agent(a) => a.crash.clone(),
                MemberState::Group(g) => g.crash(),
                _ => None,
            });
            let crash = crash.unwrap_or_else(|| panic!("{member} did not crash\n{context}"));
            let fresh = self
                .restarted_for
                .insert((name.clone(), member.clone(), crash.attempt));
            assert!(
                fresh,
                "{member}'s crash {} restarted twice\n{context}",
                crash.attempt
            );
            if crash.counted {
                counted.push(input.now);
            }
            if record.trigger == GroupTrigger::Escalation {
                // Only the parent of a group that gave up records its escalation.
                let child = MemberKey::group(member);
                assert_eq!(membership.owner(&child), Some(name.as_str()), "{context}");
                let pending = self.escalating.remove(&(member.clone(), crash.attempt));
                assert!(pending, "{member} did not give up\n{context}");
            }
        }

        // The intensity: more than maxRestarts within the window only when giving up.
        let window = SignedDuration::try_from(spec.window.as_std()).unwrap();
        counted.retain(|at| *at > input.now - window);
        if after.gave_up.is_none() {
            assert!(
                counted.len() <= spec.max_restarts as usize,
                "{} restarts within {}\n{context}",
                counted.len(),
                spec.window
            );
        }

        // A child group that gave up is taken in by its parent: by a restart (an Escalation
        // record, or an order it already had for that incarnation) or by giving up itself.
        self.escalating.retain(|(child, incarnation)| {
            let entry = after
                .members
                .iter()
                .find(|m| m.kind == MemberKind::AgentGroup && &m.name == child);
            !entry.is_some_and(|e| {
                e.stop.is_some()
                    || e.restart
                        .as_ref()
                        .is_some_and(|r| r.attempt >= *incarnation)
            })
        });
        // Or a reset cleared the give-up.
        if reset && after.gave_up.is_none() && after.incarnation == before.incarnation.max(1) {
            self.escalating.retain(|(child, _)| child != &name);
        }
        if let (Some(gave_up), None) = (&after.gave_up, &before.gave_up) {
            if membership.owner(&MemberKey::group(&name)).is_some() {
                self.escalating.insert((name.clone(), gave_up.incarnation));
            }
            if let Some(member) = &gave_up.member
                && let Some(MemberState::Group(child)) = input
                    .members
                    .iter()
                    .find(|m| &m.key.name == member)
                    .map(|m| &m.state)
            {
                self.escalating.remove(&(member.clone(), child.incarnation));
            }
        }
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

/// None of an Agent's own counts grew (a reset of its group, in the same decision, may have
/// cleared them).
fn no_count_grows(before: &AgentStatus, after: &AgentStatus, context: &dyn Fn() -> String) {
    let trips = |s: &AgentStatus| s.circuit_breaker.as_ref().map_or(0, |b| b.trips);
    assert!(
        after.consecutive_failures <= before.consecutive_failures
            && after.recent_restarts.len() <= before.recent_restarts.len()
            && trips(after) <= trips(before),
        "counted toward its own limits\n{}",
        context()
    );
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
