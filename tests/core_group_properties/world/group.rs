//! A group reconciled in the world: decided from the facts the IO shell gathers, its plan
//! checked (each crash restarted at most once, no more restarts within the window than it
//! allows unless it gave up, a child group's give-up taken in by its parent), and carried out.

use agent_supervisor::api::{GroupTrigger, MemberKey, MemberKind};
use agent_supervisor::supervise::group::{
    GroupEventReason, GroupFacts, GroupInput, GroupPlan, MemberFacts, MemberState, Membership,
    decide_group,
};
use jiff::SignedDuration;

use super::{ROOT, World};

impl World {
    pub(super) fn reconcile_group(&mut self, name: &str) {
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
}
