//! Which Agents the groups of a namespace name, as the server has them.
//!
//! Before an Agent's first pod, the operator makes sure no group names it that the cache has not
//! seen yet (a group created with the Agent may reach the cache after it: watches of different
//! kinds keep no order between them). A list of the namespace's groups answers that for every
//! Agent whose watch event arrived before the list began: the Agent was written before its event
//! came, and a group created before the Agent before that, so a list begun later holds the group.
//!
//! So a thousand Agents created at once share a few lists instead of one each: one list runs per
//! namespace at a time, each Agent is asked about from the instant its event first arrived, and
//! an Agent whose question an earlier list already answers does not wait for the one running.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::api::{Agent, AgentGroup, MemberKey};

/// The latest list of a namespace's groups: when it began, and the members it named.
type Listed = Option<(Instant, Arc<HashSet<MemberKey>>)>;

/// One namespace's lists: one runs at a time; the latest finished one answers without waiting.
#[derive(Default)]
struct Namespace {
    listing: tokio::sync::Mutex<()>,
    listed: Mutex<Listed>,
}

impl Namespace {
    /// The latest list's answer for `member`, if that list began at or after `asked`.
    fn answer(&self, member: &MemberKey, asked: Instant) -> Option<bool> {
        let listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        let (began, named) = listed.as_ref()?;
        (*began >= asked).then(|| named.contains(member))
    }
}

#[derive(Default)]
pub struct NamedByGroups {
    namespaces: Mutex<HashMap<String, Arc<Namespace>>>,
    /// When each never-started Agent's watch event first arrived, by uid.
    first_seen: Mutex<HashMap<String, Instant>>,
}

impl NamedByGroups {
    /// Notes an Agent as its watch event arrives: the instant a never-started Agent was first
    /// seen is what a list must have begun after to answer for it. Started Agents are not kept.
    pub fn saw(&self, agent: &Agent) {
        let Some(uid) = agent.uid() else { return };
        let started = agent.status.as_ref().is_some_and(|s| s.attempt > 0);
        let mut seen = self
            .first_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if started {
            seen.remove(&uid);
        } else {
            seen.entry(uid).or_insert_with(Instant::now);
        }
    }

    /// Forgets a deleted Agent.
    pub fn gone(&self, agent: &Agent) {
        if let Some(uid) = agent.uid() {
            self.first_seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&uid);
        }
    }

    /// The instant `agent`'s event first arrived, or `otherwise` if it was not noted.
    pub fn asked(&self, agent: &Agent, otherwise: Instant) -> Instant {
        let seen = self
            .first_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        agent
            .uid()
            .and_then(|uid| seen.get(&uid).copied())
            .map_or(otherwise, |first| first.min(otherwise))
    }

    /// How many never-started Agents are noted.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.first_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether a group in `namespace` names `member`, by a list begun at or after `asked`.
    pub async fn names(
        &self,
        client: &Client,
        namespace: &str,
        member: &MemberKey,
        asked: Instant,
    ) -> Result<bool, kube::Error> {
        let slot = {
            let mut map = self
                .namespaces
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            map.entry(namespace.to_string()).or_default().clone()
        };
        if let Some(answer) = slot.answer(member, asked) {
            return Ok(answer);
        }
        // One list at a time per namespace: those who wait for it may use the next one.
        let _listing = slot.listing.lock().await;
        if let Some(answer) = slot.answer(member, asked) {
            return Ok(answer);
        }
        let began = Instant::now();
        let api: Api<AgentGroup> = Api::namespaced(client.clone(), namespace);
        let groups = api.list(&ListParams::default()).await?;
        let named: HashSet<MemberKey> = groups
            .items
            .iter()
            .flat_map(|g| g.spec.members.iter().map(|m| m.key()))
            .collect();
        let answer = named.contains(member);
        *slot.listed.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((began, Arc::new(named)));
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AgentStatus;

    fn agent(uid: &str, attempt: u32) -> Agent {
        let mut agent: Agent = serde_json::from_value(serde_json::json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
            "metadata": { "name": "a", "namespace": "ns", "uid": uid },
            "spec": { "template": {} },
        }))
        .unwrap();
        agent.status = (attempt > 0).then(|| AgentStatus {
            attempt,
            ..AgentStatus::default()
        });
        agent
    }

    #[test]
    fn a_never_started_agent_is_asked_about_from_its_first_event() {
        let named = NamedByGroups::default();
        let before = Instant::now();
        named.saw(&agent("u1", 0));
        let first = named.asked(&agent("u1", 0), Instant::now());
        assert!(first >= before);
        // A later event of the same Agent keeps the first instant.
        named.saw(&agent("u1", 0));
        let later = Instant::now();
        assert_eq!(named.asked(&agent("u1", 0), later), first);
        // An Agent not noted is asked about from the reconcile's own instant.
        assert_eq!(named.asked(&agent("u2", 0), later), later);
        assert_eq!(named.waiting(), 1);
    }

    #[test]
    fn started_and_deleted_agents_are_not_kept() {
        let named = NamedByGroups::default();
        named.saw(&agent("u1", 0));
        named.saw(&agent("u2", 0));
        named.saw(&agent("u1", 1));
        named.gone(&agent("u2", 0));
        assert_eq!(named.waiting(), 0);
        // An Agent first seen started is never noted.
        named.saw(&agent("u3", 4));
        assert_eq!(named.waiting(), 0);
    }

    #[test]
    fn a_list_answers_only_those_asked_before_it_began() {
        let slot = Namespace::default();
        let member = MemberKey::agent("a");
        let asked = Instant::now();
        assert_eq!(slot.answer(&member, asked), None, "nothing listed yet");
        let began = Instant::now();
        *slot.listed.lock().unwrap() = Some((began, Arc::new(HashSet::from([member.clone()]))));
        assert_eq!(slot.answer(&member, asked), Some(true));
        assert_eq!(slot.answer(&MemberKey::agent("b"), asked), Some(false));
        let after = began + std::time::Duration::from_millis(1);
        assert_eq!(
            slot.answer(&member, after),
            None,
            "asked after the list began"
        );
    }
}
