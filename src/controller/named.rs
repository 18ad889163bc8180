//! Which Agents the groups of a namespace name, as the server has them.
//!
//! Before an Agent's first pod, the operator makes sure no group names it that the cache has not
//! seen yet (a group created with the Agent may reach the cache after it). A thousand Agents
//! created at once would each list the namespace's groups; instead, one list runs per namespace
//! at a time, and it answers every Agent that asked before it began: a list begun after the
//! question holds every group created before it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::api::ListParams;
use kube::{Api, Client};

use crate::api::{AgentGroup, MemberKey};

/// The latest list of each namespace's groups: when it began, and the members it named.
type Listed = Option<(Instant, HashSet<MemberKey>)>;

#[derive(Default)]
pub struct NamedByGroups(Mutex<HashMap<String, Arc<tokio::sync::Mutex<Listed>>>>);

impl NamedByGroups {
    /// Whether a group in `namespace` names `member`, by a list begun after `asked`.
    pub async fn names(
        &self,
        client: &Client,
        namespace: &str,
        member: &MemberKey,
        asked: Instant,
    ) -> Result<bool, kube::Error> {
        let slot = {
            let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(namespace.to_string()).or_default().clone()
        };
        // One list at a time per namespace: those who wait for it may use the next one.
        let mut listed = slot.lock().await;
        if let Some((began, named)) = listed.as_ref()
            && *began >= asked
        {
            return Ok(named.contains(member));
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
        *listed = Some((began, named));
        Ok(answer)
    }
}
