//! Whether the cache has caught up with this process's own status writes.
//!
//! A pod is created (or deleted) before the status that records it is written, and a decision
//! made on an Agent older than the operator's own last write could repeat an action already
//! taken. Instead of reading the Agent back from the server before every action, the operator
//! remembers, for each Agent it wrote, the resourceVersion the write was made on. Every status
//! write carries that resourceVersion as a precondition, so once the cache holds any other
//! version, it holds the write (or the write was refused and there is nothing to wait for).
//!
//! A first pod's status write may wait (until the pod runs): then only the pod records the
//! decision, and a decision on a pod cache that has not caught up with the create would make it
//! again. So the operator also remembers the pods it created, for as long as a cache takes to
//! show them.
//!
//! What others write needs no such care: a decision on an older version of a person's request
//! is the one the operator would have made a moment earlier. What this process wrote before it
//! started is in the cache from its first list, which reads the server's latest state.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The resourceVersion each Agent's last status write was made on, and when.
#[derive(Default)]
pub struct OwnWrites(Mutex<Writes>);

#[derive(Default)]
struct Writes {
    made_on: HashMap<(String, String), (String, Instant)>,
    /// The pods created, by namespace and name, and when.
    created: HashMap<(String, String), Instant>,
    /// Writes remembered since the last sweep.
    since_sweep: usize,
}

impl Writes {
    /// Counts one more entry; after as many as are kept, forgets what is too old to matter.
    fn sweep(&mut self, now: Instant) {
        self.since_sweep += 1;
        if self.since_sweep > (self.made_on.len() + self.created.len()).max(1024) {
            self.since_sweep = 0;
            let age = |at: &Instant| now.saturating_duration_since(*at);
            self.made_on.retain(|_, (_, at)| age(at) < OwnWrites::KEPT);
            self.created.retain(|_, at| age(at) < OwnWrites::PATIENCE);
        }
    }
}

/// What the cache holds of an Agent, next to this process's own writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Nothing this process wrote is missing from it.
    Current,
    /// It is the version a write was made on: the write has not reached the cache yet.
    Behind,
    /// A write was made on it long ago and nothing has come since: the write may never have
    /// reached the server. Only the server can tell.
    Unsure,
}

impl OwnWrites {
    /// A write reaches the cache within this, or was lost.
    const PATIENCE: Duration = Duration::from_secs(10);
    /// Writes older than this are forgotten (the Agent deleted, or not acted on since): a
    /// write the cache has not shown in that long was not made.
    const KEPT: Duration = Duration::from_secs(600);

    /// A status write of `namespace/name` made on `resource_version` is being sent.
    pub fn writing(&self, namespace: &str, name: &str, resource_version: &str) {
        let mut writes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        writes.sweep(now);
        writes.made_on.insert(
            (namespace.to_string(), name.to_string()),
            (resource_version.to_string(), now),
        );
    }

    /// How the cached `resource_version` of `namespace/name` stands.
    pub fn freshness(&self, namespace: &str, name: &str, resource_version: &str) -> Freshness {
        self.freshness_at(namespace, name, resource_version, Instant::now())
    }

    fn freshness_at(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
        now: Instant,
    ) -> Freshness {
        let mut writes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let map = &mut writes.made_on;
        let key = (namespace.to_string(), name.to_string());
        match map.get(&key) {
            Some((written_on, at)) if written_on == resource_version => {
                let age = now.saturating_duration_since(*at);
                if age >= Self::KEPT {
                    map.remove(&key);
                    Freshness::Current
                } else if age < Self::PATIENCE {
                    Freshness::Behind
                } else {
                    Freshness::Unsure
                }
            }
            Some(_) => {
                // The cache moved past the version the write was made on: it holds the write.
                map.remove(&key);
                Freshness::Current
            }
            None => Freshness::Current,
        }
    }

    /// The pod `namespace/name` was created.
    pub fn created(&self, namespace: &str, name: &str) {
        let mut writes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        writes.sweep(now);
        writes
            .created
            .insert((namespace.to_string(), name.to_string()), now);
    }

    /// Whether this process created the pod `namespace/name` so recently that a cache without
    /// it is behind, not a sign it is gone.
    pub fn just_created(&self, namespace: &str, name: &str) -> bool {
        self.just_created_at(namespace, name, Instant::now())
    }

    fn just_created_at(&self, namespace: &str, name: &str, now: Instant) -> bool {
        let writes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = (namespace.to_string(), name.to_string());
        writes
            .created
            .get(&key)
            .is_some_and(|at| now.saturating_duration_since(*at) < Self::PATIENCE)
    }

    /// The Agent is gone: nothing to remember of it.
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut writes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        writes
            .made_on
            .remove(&(namespace.to_string(), name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_is_awaited_until_the_cache_moves_past_its_version() {
        let writes = OwnWrites::default();
        assert_eq!(writes.freshness("ns", "a", "10"), Freshness::Current);
        writes.writing("ns", "a", "10");
        assert_eq!(writes.freshness("ns", "a", "10"), Freshness::Behind);
        // Another agent, or another namespace, is not concerned.
        assert_eq!(writes.freshness("ns", "b", "10"), Freshness::Current);
        assert_eq!(writes.freshness("other", "a", "10"), Freshness::Current);
        assert_eq!(writes.freshness("ns", "a", "11"), Freshness::Current);
        // Once seen past, it is forgotten: the old version no longer means behind.
        assert_eq!(writes.freshness("ns", "a", "10"), Freshness::Current);
    }

    #[test]
    fn a_write_never_seen_is_left_to_the_server_after_a_while() {
        let writes = OwnWrites::default();
        writes.writing("ns", "a", "10");
        let later = Instant::now() + OwnWrites::PATIENCE + Duration::from_millis(1);
        assert_eq!(
            writes.freshness_at("ns", "a", "10", later),
            Freshness::Unsure
        );
        writes.forget("ns", "a");
        assert_eq!(writes.freshness("ns", "a", "10"), Freshness::Current);
    }

    #[test]
    fn a_created_pod_is_expected_in_the_cache_for_a_while() {
        let writes = OwnWrites::default();
        assert!(!writes.just_created("ns", "a-1"));
        writes.created("ns", "a-1");
        assert!(writes.just_created("ns", "a-1"));
        assert!(!writes.just_created("ns", "a-2"));
        assert!(!writes.just_created("other", "a-1"));
        let later = Instant::now() + OwnWrites::PATIENCE + Duration::from_millis(1);
        assert!(!writes.just_created_at("ns", "a-1", later));
    }
}
