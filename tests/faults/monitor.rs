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
