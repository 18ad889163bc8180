//! Each decision, taken from the facts the IO shell gathers and checked: an agent's (a held
//! restart counts toward nothing; the probe is let go once per round, as the policy named) and
//! the policy's (an outage opens only when enough distinct agents failed within the window).

use std::collections::BTreeSet;

use agent_supervisor::api::{AgentStatus, OutageState, Phase, Trigger};
use agent_supervisor::supervise::decide;
use agent_supervisor::supervise::outage::{AgentOutageView, OutageInput, decide_outages};
use proptest::prelude::{TestCaseError, prop_assert, prop_assert_eq};

use super::Fleet;
use crate::clock::t;
use crate::pods::new_pod;

impl Fleet {
    pub(super) fn decide_agent(&mut self, i: usize) -> Result<(), TestCaseError> {
        let input = self.input(i);
        let plan = decide(input.clone());
        prop_assert_eq!(&decide(input.clone()), &plan, "repeatable");
        let before = &self.agents[i].status;
        let after = &plan.status;
        // A held restart counts toward nothing.
        let outage_records = |s: &AgentStatus| {
            s.restart_history
                .iter()
                .filter(|r| r.trigger == Trigger::Outage)
                .count()
        };
        let newly_held = after.phase == Some(Phase::CircuitOpen)
            && after
                .restart_history
                .first()
                .is_some_and(|r| r.trigger == Trigger::Outage && r.restarted_at.is_none())
            && outage_records(after) > outage_records(before);
        if newly_held {
            prop_assert!(
                after.consecutive_failures <= before.consecutive_failures,
                "holding counted a failure: {} → {}",
                before.consecutive_failures,
                after.consecutive_failures
            );
            let trips = |s: &AgentStatus| s.circuit_breaker.as_ref().map_or(0, |b| b.trips);
            prop_assert_eq!(trips(after), trips(before), "holding tripped the breaker");
        }
        let released = after.restart_count > before.restart_count
            && after
                .restart_history
                .iter()
                .find(|r| r.attempt == before.attempt)
                .is_some_and(|r| r.trigger == Trigger::Outage);
        if released {
            prop_assert!(
                after.recent_restarts.len() <= before.recent_restarts.len(),
                "a held restart counted toward the limit"
            );
            let held_for = before
                .restart_history
                .first()
                .and_then(|r| r.fingerprint.clone())
                .unwrap_or_default();
            if let Some(o) = self.outages.iter().find(|o| o.fingerprint == held_for) {
                // Let go while its outage is open: only as the probe the policy named.
                prop_assert_eq!(o.state, OutageState::Probing, "released while holding");
                prop_assert_eq!(o.probe_agent.as_deref(), Some(self.agents[i].name.as_str()));
                // A round: the outage, when it started, and whom it named.
                let round = o.probe_started_at.as_ref().map_or(0, |t| t.0.as_second());
                let key = (held_for, round, self.agents[i].name.clone());
                let releases = self.releases.entry(key).or_default();
                *releases += 1;
                prop_assert!(*releases <= 1, "the probe let go twice in one round");
            }
        }
        // Every failure the agent recorded (those injected, and startup timeouts), as it was
        // recorded: the policy's decision is checked against these.
        if after.last_failure != before.last_failure
            && let Some(f) = &after.last_failure
            && let Some(fingerprint) = &f.fingerprint
        {
            let at = f.time.0.as_second() - t(0).as_second();
            self.failures.push((i, fingerprint.clone(), at));
        }
        let m = &mut self.agents[i];
        m.status = plan.status.clone();
        if let Some(kill) = &plan.delete_pod
            && let Some(pod) = m.pods.iter_mut().find(|p| &p.name == kill)
        {
            pod.deleting = true;
        }
        if let Some(new) = &plan.create_pod {
            prop_assert!(
                m.pods.iter().all(|p| p.name != new.name),
                "pod {} created twice",
                new.name
            );
            m.pods.push(new_pod(new, "h", t(self.now), None));
        }
        // Deleted pods go at once; finished ones stay for a while (kept to count live ones).
        m.pods.retain(|p| !p.deleting);
        Ok(())
    }

    pub(super) fn decide_policy(&mut self) -> Result<(), TestCaseError> {
        let views = (0..self.params.agents)
            .map(|i| {
                let pod = self.agents[i]
                    .pods
                    .iter()
                    .max_by_key(|p| p.attempt)
                    .cloned();
                {
                    let agent = self.agent_object(i);
                    let traits = agent_supervisor::controller::facts::agent_traits(&agent);
                    let status = agent.status.clone().unwrap_or_default();
                    AgentOutageView::of(&traits, &status, pod.as_ref(), None)
                }
            })
            .collect();
        let input = OutageInput {
            now: t(self.now),
            config: self.policy.outage.clone(),
            reset_after: self.policy.reset_after.as_std(),
            max_hold: self.policy.circuit_breaker.max_open_duration.as_std(),
            outages: self.outages.clone(),
            agents: views,
        };
        let plan = decide_outages(&input);
        prop_assert_eq!(&decide_outages(&input), &plan, "repeatable");
        for o in &plan.outages {
            if self
                .outages
                .iter()
                .any(|old| old.fingerprint == o.fingerprint)
            {
                continue;
            }
            // Opened now: N distinct agents failed with it within the window.
            let from = self.now - self.params.window as i64;
            let agents: BTreeSet<usize> = self
                .failures
                .iter()
                .filter(|(_, f, at)| *f == o.fingerprint && *at >= from)
                .map(|(i, _, _)| *i)
                .collect();
            prop_assert!(
                agents.len() as u32 >= self.params.threshold,
                "outage {} opened with {} agents failing within the window",
                o.fingerprint,
                agents.len()
            );
        }
        self.outages = plan.outages;
        Ok(())
    }
}
