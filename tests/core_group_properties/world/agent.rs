//! An Agent reconciled in the world: decided from the facts the IO shell gathers, its plan
//! checked against its group's orders (a sibling stopped for its group counts toward none of
//! its own limits; nothing starts before its group lets it), and carried out.

use agent_supervisor::api::{AgentStatus, MemberKey, Phase, Trigger};
use agent_supervisor::supervise::{AgentFacts, Input, Plan, PolicyResolution, decide};

use super::World;
use crate::pods::new_pod;

impl World {
    pub(super) fn reconcile_agent(&mut self, name: &str) {
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
            pods.push(new_pod(new, "h", self.now, None));
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
