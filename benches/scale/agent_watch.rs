//! One watch of a phase's Agents, and when it first saw each Agent's phase and each attempt in
//! its `status.restartHistory`: the status lag, measured from outside as a person reading the
//! status would see it. The Agents are read as bare JSON, so that any build of the operator's
//! status (`OPERATOR_BIN`) reads alike.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use agent_supervisor::api::Agent;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use crate::watch::{Record, Watch};

/// One watch of a namespace's Agents.
pub(crate) type AgentWatch = Watch<AgentsSeen>;

pub(crate) async fn start(client: &Client, namespace: &str) -> anyhow::Result<AgentWatch> {
    let resource = ApiResource::erase::<Agent>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    Watch::start(api, watcher::Config::default()).await
}

/// What one Agent watch has seen, as it saw it.
#[derive(Clone, Default)]
pub struct AgentsSeen {
    /// Per Agent: when a phase was first seen in its status.
    pub(crate) phase: HashMap<String, Instant>,
    /// Per Agent and attempt: when the attempt was first seen in its `status.restartHistory`.
    pub(crate) recorded: HashMap<(String, u32), Instant>,
}

impl Record<DynamicObject> for AgentsSeen {
    fn event(&mut self, event: watcher::Event<DynamicObject>, now: Instant) {
        if let watcher::Event::Apply(agent) | watcher::Event::InitApply(agent) = event {
            self.saw(&agent.name_any(), &agent.data["status"], now);
        }
    }
}

impl AgentsSeen {
    fn saw(&mut self, agent: &str, status: &serde_json::Value, now: Instant) {
        if status["phase"].as_str().is_some_and(|p| !p.is_empty()) {
            self.phase.entry(agent.to_string()).or_insert(now);
        }
        let history = status["restartHistory"].as_array();
        for record in history.into_iter().flatten() {
            if let Some(attempt) = record["attempt"]
                .as_u64()
                .and_then(|a| u32::try_from(a).ok())
            {
                self.recorded
                    .entry((agent.to_string(), attempt))
                    .or_insert(now);
            }
        }
    }
}

/// Each `from` → its `to` (none before it: a status seen before the pod watch saw the failure
/// counts as no lag), and how many had no `to`. Those are timed as if their `to` came at
/// `until` (a lower bound) when it is given, and left out otherwise.
pub fn lags<K: Eq + Hash>(
    from: &HashMap<K, Instant>,
    to: &HashMap<K, Instant>,
    until: Option<Instant>,
) -> (Vec<Duration>, usize) {
    let mut lags = Vec::with_capacity(from.len());
    let mut missing = 0;
    for (key, start) in from {
        match to.get(key).copied() {
            Some(end) => lags.push(end.saturating_duration_since(*start)),
            None => {
                missing += 1;
                lags.extend(until.map(|end| end.saturating_duration_since(*start)));
            }
        }
    }
    (lags, missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn first_sightings_of_a_phase_and_of_each_attempt_in_the_history() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut seen = AgentsSeen::default();
        seen.saw("a", &json!(null), at(0));
        seen.saw("a", &json!({"phase": ""}), at(1));
        assert!(seen.phase.is_empty());
        let history = |attempts: &[u32]| {
            let records: Vec<_> = attempts.iter().map(|a| json!({"attempt": a})).collect();
            json!({"phase": "Pending", "restartHistory": records})
        };
        seen.saw("a", &history(&[1]), at(2));
        // Newest first, one more each write; older ones are not seen again.
        seen.saw("a", &history(&[3, 2, 1]), at(5));
        seen.saw("a", &history(&[3, 2]), at(9));
        assert_eq!(seen.phase["a"], at(2));
        let key = |n| ("a".to_string(), n);
        assert_eq!(seen.recorded[&key(1)], at(2));
        assert_eq!(seen.recorded[&key(3)], at(5));
        assert_eq!(seen.recorded.len(), 3);
    }

    #[test]
    fn lags_time_the_missing_as_seen_at_the_end_only_when_asked() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let failed = HashMap::from([
            (("a", 1), at(100)),
            (("a", 2), at(3000)),
            (("b", 1), at(500)),
        ]);
        // a-2's record was seen before its failure was (the watches race): no lag, not a
        // negative one.
        let recorded = HashMap::from([
            (("a", 1), at(1600)),
            (("a", 2), at(2900)),
            (("c", 9), at(0)),
        ]);
        let (mut lags, missing) = lags(&failed, &recorded, Some(at(12_500)));
        lags.sort();
        let ms = |ms| Duration::from_millis(ms);
        assert_eq!(lags, [ms(0), ms(1500), ms(12_000)]);
        assert_eq!(missing, 1);
        let (lags, missing) = super::lags(&failed, &recorded, None);
        assert_eq!((lags.len(), missing), (2, 1));
    }
}
