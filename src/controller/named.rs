//! Which Agents the groups of a namespace name, as the server has them.
//!
//! Before an Agent's first pod, the operator makes sure no group names it that the cache has not
//! seen yet (a group created with the Agent may reach the cache after it: watches of different
//! kinds keep no order between them). A list of the namespace's groups answers that for every
//! Agent whose watch event arrived before the list began: the Agent was written before its event
//! came, and a group created before the Agent before that, so a list begun later holds the group.
//!
//! So a thousand Agents created at once share a few dozen lists instead of one each: each Agent
//! is asked about from the instant its event first arrived, is answered by the latest finished
//! list or waits for one under way that began after that, and begins one only when none did (at
//! most `IN_FLIGHT` per namespace at once). Lists are spawned: one ends whoever still waits.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::api::{Agent, AgentGroup, MemberKey};

/// The members a list of a namespace's groups named; `None` if the list failed.
type Named = Option<Arc<HashSet<MemberKey>>>;

/// A list under way: when it began, and its result once it has one.
type Running = (Instant, Shared<BoxFuture<'static, Named>>);

/// At most this many lists of one namespace run at once: an Agent that arrives while they
/// run waits for the next to begin, not for all of them to end.
const IN_FLIGHT: usize = 4;

/// One namespace's lists: the latest finished one, and those under way.
#[derive(Default)]
struct Namespace {
    done: Option<(Instant, Arc<HashSet<MemberKey>>)>,
    running: Vec<Running>,
}

/// What an Agent asked about at `asked` does next, when a list done or under way serves it.
enum Next {
    Answer(bool),
    Await(Shared<BoxFuture<'static, Named>>),
    /// Every slot is taken by a list begun too early: wait for the newest, then ask again.
    Wait(Shared<BoxFuture<'static, Named>>),
}

impl Namespace {
    /// `None`: no list serves it and a slot is free, so one begins.
    fn next(&self, member: &MemberKey, asked: Instant) -> Option<Next> {
        if let Some((began, named)) = &self.done
            && *began >= asked
        {
            return Some(Next::Answer(named.contains(member)));
        }
        if let Some((_, list)) = self.running.iter().find(|(began, _)| *began >= asked) {
            return Some(Next::Await(list.clone()));
        }
        match self.running.iter().max_by_key(|(began, _)| *began) {
            Some((_, list)) if self.running.len() >= IN_FLIGHT => Some(Next::Wait(list.clone())),
            _ => None,
        }
    }

    /// A list begun at `began` ended with `named`.
    fn ended(&mut self, began: Instant, named: &Named) {
        self.running.retain(|(b, _)| *b != began);
        if let Some(named) = named
            && self.done.as_ref().is_none_or(|(b, _)| *b < began)
        {
            self.done = Some((began, named.clone()));
        }
    }
}

#[derive(Default)]
pub struct NamedByGroups {
    namespaces: Arc<Mutex<HashMap<String, Namespace>>>,
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
        loop {
            let next = {
                let mut map = self
                    .namespaces
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let slot = map.entry(namespace.to_string()).or_default();
                slot.next(member, asked).unwrap_or_else(|| {
                    let list = self.begin(client, namespace);
                    slot.running.push(list.clone());
                    Next::Await(list.1)
                })
            };
            match next {
                Next::Answer(answer) => return Ok(answer),
                Next::Await(list) => match list.await {
                    Some(named) => return Ok(named.contains(member)),
                    // The shared list failed: this Agent's own list says why (or answers).
                    None => {
                        return list_groups(client, namespace)
                            .await
                            .map(|n| n.contains(member));
                    }
                },
                Next::Wait(list) => {
                    list.await;
                }
            }
        }
    }

    /// Begins a list of `namespace`'s groups, run to its end whoever waits for it.
    fn begin(&self, client: &Client, namespace: &str) -> Running {
        let began = Instant::now();
        let (client, ns) = (client.clone(), namespace.to_string());
        let namespaces = self.namespaces.clone();
        let task = tokio::spawn(async move {
            let named = list_groups(&client, &ns).await.ok().map(Arc::new);
            let mut map = namespaces.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(slot) = map.get_mut(&ns) {
                slot.ended(began, &named);
            }
            named
        });
        let list = async move { task.await.ok().flatten() }.boxed().shared();
        (began, list)
    }
}

/// The members every group of `namespace` names, as the server has them now.
async fn list_groups(client: &Client, namespace: &str) -> Result<HashSet<MemberKey>, kube::Error> {
    let api: Api<AgentGroup> = Api::namespaced(client.clone(), namespace);
    let groups = api.list(&ListParams::default()).await?;
    Ok(groups
        .items
        .iter()
        .flat_map(|g| g.spec.members.iter().map(|m| m.key()))
        .collect())
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
        let mut slot = Namespace::default();
        let member = MemberKey::agent("a");
        let asked = Instant::now();
        assert!(slot.next(&member, asked).is_none(), "nothing listed yet");
        let began = Instant::now();
        slot.ended(began, &Some(Arc::new(HashSet::from([member.clone()]))));
        assert!(matches!(
            slot.next(&member, asked),
            Some(Next::Answer(true))
        ));
        assert!(matches!(
            slot.next(&MemberKey::agent("b"), asked),
            Some(Next::Answer(false))
        ));
        let after = began + std::time::Duration::from_millis(1);
        assert!(slot.next(&member, after).is_none(), "asked after it began");
    }

    fn pending() -> Shared<BoxFuture<'static, Named>> {
        futures::future::pending().boxed().shared()
    }

    #[test]
    fn lists_under_way_are_shared_and_bounded() {
        let mut slot = Namespace::default();
        let member = MemberKey::agent("a");
        let first = Instant::now();
        slot.running.push((first, pending()));
        assert!(
            matches!(slot.next(&member, first), Some(Next::Await(_))),
            "begun after it asked"
        );
        let later = first + std::time::Duration::from_millis(1);
        assert!(slot.next(&member, later).is_none(), "a slot is free");
        for i in 1..IN_FLIGHT as u64 {
            slot.running
                .push((first + std::time::Duration::from_micros(i), pending()));
        }
        let late = first + std::time::Duration::from_secs(1);
        assert!(
            matches!(slot.next(&member, late), Some(Next::Wait(_))),
            "every slot taken"
        );
        // A failed list answers nobody, and frees its slot.
        slot.ended(first, &None);
        assert_eq!(slot.running.len(), IN_FLIGHT - 1);
        assert!(slot.done.is_none());
        assert!(slot.next(&member, late).is_none());
    }

    #[test]
    fn an_older_list_ending_late_does_not_replace_a_newer_answer() {
        let mut slot = Namespace::default();
        let member = MemberKey::agent("a");
        let older = Instant::now();
        let newer = older + std::time::Duration::from_millis(5);
        slot.ended(newer, &Some(Arc::new(HashSet::from([member.clone()]))));
        slot.ended(older, &Some(Arc::new(HashSet::new())));
        assert!(matches!(
            slot.next(&member, newer),
            Some(Next::Answer(true))
        ));
    }
}
