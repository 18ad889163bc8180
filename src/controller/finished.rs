//! The finished pods of each Agent, by attempt, as the pod watch reports them: where the old
//! attempts to remove are found, without a scan of every pod in the cache, and when each was
//! first seen finished (where the status lag of its failure's record is counted from).
//!
//! Only pods that carry an Agent's uid label are indexed (what old pods are removed by). The
//! index only proposes: the cache confirms each pod before it is removed, and an entry the cache
//! no longer holds (a pod deleted while the watch was down) is dropped when it is proposed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use kube::ResourceExt;

use super::slim::CachedPod;
use crate::api::{AGENT_UID_LABEL, ATTEMPT_LABEL};

/// A namespace and an Agent's uid.
type Key = (String, String);

/// A finished pod: its name, and when the watch first showed it finished.
struct Finished {
    name: String,
    seen: Instant,
}

type Index = HashMap<Key, BTreeMap<u32, Finished>>;

#[derive(Default)]
pub struct FinishedPods(Mutex<Index>);

impl FinishedPods {
    /// A pod was added or changed: indexed while it has finished and is not being deleted.
    pub fn saw(&self, pod: &CachedPod) {
        let Some((key, attempt)) = identity(pod) else {
            return;
        };
        let finished = pod.metadata.deletion_timestamp.is_none()
            && matches!(pod.phase(), Some("Succeeded" | "Failed"));
        let mut index = self.lock();
        if finished {
            let name = pod.name_any();
            let pods = index.entry(key).or_default();
            if pods.get(&attempt).is_none_or(|f| f.name != name) {
                let seen = Instant::now();
                pods.insert(attempt, Finished { name, seen });
            }
        } else {
            remove(&mut index, key, attempt);
        }
    }

    /// A pod was deleted.
    pub fn gone(&self, pod: &CachedPod) {
        if let Some((key, attempt)) = identity(pod) {
            remove(&mut self.lock(), key, attempt);
        }
    }

    /// The finished attempts of the Agent `uid` in `namespace` before `attempt`, oldest first,
    /// with their pods' names.
    pub fn before(&self, namespace: &str, uid: &str, attempt: u32) -> Vec<(u32, String)> {
        let index = self.lock();
        index
            .get(&(namespace.to_string(), uid.to_string()))
            .map(|pods| {
                pods.range(..attempt)
                    .map(|(a, f)| (*a, f.name.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// When the pod of `attempt` of the Agent `uid` in `namespace` was first seen finished, if it
    /// is indexed.
    pub fn seen(&self, namespace: &str, uid: &str, attempt: u32) -> Option<Instant> {
        let index = self.lock();
        let pods = index.get(&(namespace.to_string(), uid.to_string()))?;
        pods.get(&attempt).map(|f| f.seen)
    }

    /// Drops `attempt` of the Agent `uid` in `namespace` (its pod is no longer in the cache).
    pub fn forget(&self, namespace: &str, uid: &str, attempt: u32) {
        remove(
            &mut self.lock(),
            (namespace.to_string(), uid.to_string()),
            attempt,
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn identity(pod: &CachedPod) -> Option<(Key, u32)> {
    let labels = pod.labels();
    let uid = labels.get(AGENT_UID_LABEL)?;
    let attempt = labels.get(ATTEMPT_LABEL)?.parse().ok()?;
    Some(((pod.namespace().unwrap_or_default(), uid.clone()), attempt))
}

fn remove(index: &mut Index, key: Key, attempt: u32) {
    if let Some(pods) = index.get_mut(&key) {
        pods.remove(&attempt);
        if pods.is_empty() {
            index.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, uid: Option<&str>, attempt: u32, phase: &str, deleting: bool) -> CachedPod {
        let mut labels = serde_json::json!({ ATTEMPT_LABEL: attempt.to_string() });
        if let Some(uid) = uid {
            labels[AGENT_UID_LABEL] = uid.into();
        }
        let mut metadata = serde_json::json!({ "name": name, "namespace": "ns", "labels": labels });
        if deleting {
            metadata["deletionTimestamp"] = "2026-11-25T08:00:00Z".into();
        }
        serde_json::from_value(serde_json::json!({
            "metadata": metadata,
            "status": { "phase": phase },
        }))
        .unwrap()
    }

    #[test]
    fn finished_pods_are_indexed_per_agent_until_they_go() {
        let index = FinishedPods::default();
        index.saw(&pod("a-1", Some("u"), 1, "Failed", false));
        index.saw(&pod("a-2", Some("u"), 2, "Succeeded", false));
        index.saw(&pod("a-3", Some("u"), 3, "Running", false));
        index.saw(&pod("b-1", Some("v"), 1, "Failed", false));
        // Without the uid label, a pod is never proposed.
        index.saw(&pod("old-1", None, 1, "Failed", false));
        let names = |i: &FinishedPods, before| -> Vec<u32> {
            i.before("ns", "u", before)
                .into_iter()
                .map(|(a, _)| a)
                .collect()
        };
        assert_eq!(names(&index, 9), [1, 2]);
        assert_eq!(names(&index, 2), [1]);
        assert_eq!(index.before("other", "u", 9), []);
        assert_eq!(index.before("ns", "v", 9), [(1, "b-1".to_string())]);
        // When it was first seen finished is kept through later updates of the same pod.
        let first = index.seen("ns", "u", 1).expect("seen");
        index.saw(&pod("a-1", Some("u"), 1, "Failed", false));
        assert_eq!(index.seen("ns", "u", 1), Some(first));
        assert_eq!(index.seen("ns", "u", 3), None, "not finished");
        // Being deleted, or deleted: no longer proposed.
        index.saw(&pod("a-1", Some("u"), 1, "Failed", true));
        assert_eq!(names(&index, 9), [2]);
        index.gone(&pod("a-2", Some("u"), 2, "Succeeded", false));
        assert_eq!(names(&index, 9), Vec::<u32>::new());
        assert!(!index.lock().contains_key(&("ns".into(), "u".into())));
        index.forget("ns", "v", 1);
        assert!(index.lock().is_empty());
    }
}
