//! The controllers' caches, shared with what reads them without deciding anything: a snapshot
//! of every Agent, AgentGroup and RestartPolicy this replica watches.

use std::sync::Mutex;

use crate::api::wire::Guarded;
use jiff::Timestamp;
use kube::runtime::reflector::Store;

use crate::api::{Agent, AgentGroup, RestartPolicy};

/// The caches the controllers watch into, registered as they start, for readers that are not
/// controllers (the status page the process serves).
#[derive(Default)]
pub struct Watched {
    agents: Mutex<Vec<Store<Guarded<Agent>>>>,
    groups: Mutex<Vec<Store<Guarded<AgentGroup>>>>,
    policies: Mutex<Vec<Store<Guarded<RestartPolicy>>>>,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched").finish_non_exhaustive()
    }
}

impl Watched {
    pub fn watch_agents(&self, store: Store<Guarded<Agent>>) {
        lock(&self.agents).push(store);
    }

    pub fn watch_groups(&self, store: Store<Guarded<AgentGroup>>) {
        lock(&self.groups).push(store);
    }

    pub fn watch_policies(&self, store: Store<Guarded<RestartPolicy>>) {
        lock(&self.policies).push(store);
    }

    /// What the caches hold now. Objects that do not decode are left out (the operator reports
    /// them with an `InvalidObject` Event).
    pub fn snapshot(&self, now: Timestamp) -> Snapshot {
        fn decoded<K>(stores: &Mutex<Vec<Store<Guarded<K>>>>) -> Vec<K>
        where
            K: kube::Resource + Clone + 'static,
            K::DynamicType: std::hash::Hash + Eq + Clone,
        {
            lock(stores)
                .iter()
                .flat_map(|s| s.state())
                .filter_map(|o| o.0.as_ref().ok().cloned())
                .collect()
        }
        let watching = !lock(&self.agents).is_empty();
        Snapshot {
            now,
            watching,
            agents: decoded(&self.agents),
            groups: decoded(&self.groups),
            policies: decoded(&self.policies),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The objects the page is made from.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub now: Timestamp,
    /// Whether this replica's controllers run (a standby replica has no caches).
    pub watching: bool,
    pub agents: Vec<Agent>,
    pub groups: Vec<AgentGroup>,
    pub policies: Vec<RestartPolicy>,
}
