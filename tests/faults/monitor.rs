//! A pod watch kept for a whole run, checking after every event what must hold at every moment:
//! at most one live pod per Agent, and no pod name created twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::{WatchStreamExt, watcher};

use crate::support::TestNamespace;

/// What the watch saw: the pods created, in order, and every broken invariant.
#[derive(Default)]
struct Seen {
    /// The pods as they are now, by name.
    pods: BTreeMap<String, Pod>,
    /// Every uid each name ever had.
    uids: BTreeMap<String, Vec<String>>,
    /// Pod names in the order they were first seen.
    created: Vec<String>,
    violations: Vec<String>,
}

/// The watch, running in the background until dropped.
pub struct PodMonitor {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

/// Live: neither finished nor being deleted.
fn is_live(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

impl Seen {
    fn apply(&mut self, pod: Pod) {
        let name = pod.name_any();
        let uid = pod.uid().unwrap_or_default();
        let uids = self.uids.entry(name.clone()).or_default();
        if uids.is_empty() {
            self.created.push(name.clone());
        }
        if !uids.contains(&uid) {
            uids.push(uid);
            if uids.len() > 1 {
                self.violations.push(format!(
                    "pod {name} was created {} times (uids {uids:?})",
                    uids.len()
                ));
            }
        }
        self.pods.insert(name, pod);
        self.check_live();
    }

    fn check_live(&mut self) {
        let mut live: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for pod in self.pods.values().filter(|p| is_live(p)) {
            let agent = pod
                .labels()
                .get(agent_supervisor::api::AGENT_LABEL)
                .cloned()
                .unwrap_or_default();
            live.entry(agent).or_default().push(pod.name_any());
        }
        for (agent, pods) in live {
            if pods.len() > 1 {
                let violation = format!(
                    "agent {agent} had {} live pods at once: {pods:?}",
                    pods.len()
                );
                if !self.violations.contains(&violation) {
                    self.violations.push(violation);
                }
            }
        }
    }
}

impl PodMonitor {
    /// Starts watching the namespace's pods and returns once the first list is in.
    pub async fn start(ns: &TestNamespace) -> PodMonitor {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (ready, listed) = tokio::sync::oneshot::channel();
        let mut ready = Some(ready);
        let mut stream = watcher(ns.api::<Pod>(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut relisted = BTreeSet::new();
                while let Some(event) = stream.next().await {
                    let mut seen = seen.lock().unwrap();
                    match event {
                        Ok(watcher::Event::Init) => relisted.clear(),
                        Ok(watcher::Event::InitApply(pod)) => {
                            relisted.insert(pod.name_any());
                            seen.apply(pod);
                        }
                        Ok(watcher::Event::InitDone) => {
                            seen.pods.retain(|name, _| relisted.contains(name));
                            if let Some(ready) = ready.take() {
                                let _ = ready.send(());
                            }
                        }
                        Ok(watcher::Event::Apply(pod)) => seen.apply(pod),
                        Ok(watcher::Event::Delete(pod)) => {
                            seen.pods.remove(&pod.name_any());
                        }
                        // The watcher retries by itself; a relist repairs what was missed.
                        Err(_) => {}
                    }
                }
            }
        });
        tokio::time::timeout(std::time::Duration::from_secs(60), listed)
            .await
            .expect("the pod watch lists within a minute")
            .expect("the pod watch runs");
        PodMonitor { seen, task }
    }

    /// The pods created so far, in order.
    pub fn created(&self) -> Vec<String> {
        self.seen.lock().unwrap().created.clone()
    }

    /// The invariants broken so far.
    pub fn violations(&self) -> Vec<String> {
        self.seen.lock().unwrap().violations.clone()
    }
}

impl Drop for PodMonitor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, uid: &str, phase: &str, deleting: bool) -> Pod {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": name, "uid": uid, "labels": { "supervisor.dev/agent": "a" } },
            "status": { "phase": phase },
        }))
        .unwrap();
        if deleting {
            pod.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
            );
        }
        pod
    }

    #[test]
    fn two_live_pods_of_one_agent_are_caught_and_a_finished_or_deleting_one_is_not_live() {
        let mut seen = Seen::default();
        seen.apply(pod("a-1", "u1", "Running", false));
        seen.apply(pod("a-1", "u1", "Failed", false));
        seen.apply(pod("a-2", "u2", "Running", false));
        assert!(seen.violations.is_empty(), "{:?}", seen.violations);
        seen.apply(pod("a-2", "u2", "Running", true));
        seen.apply(pod("a-3", "u3", "Pending", false));
        assert!(seen.violations.is_empty(), "{:?}", seen.violations);
        seen.apply(pod("a-4", "u4", "Pending", false));
        assert_eq!(seen.violations.len(), 1, "{:?}", seen.violations);
        assert_eq!(seen.created, ["a-1", "a-2", "a-3", "a-4"]);
    }

    #[test]
    fn a_name_created_again_is_caught() {
        let mut seen = Seen::default();
        seen.apply(pod("a-1", "u1", "Failed", false));
        seen.pods.clear();
        seen.apply(pod("a-1", "u2", "Pending", false));
        assert_eq!(seen.violations.len(), 1, "{:?}", seen.violations);
    }
}
