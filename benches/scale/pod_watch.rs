//! One watch of a phase's pods, and what it saw as it saw it: first pods, Running, failures and
//! their replacements, the finished pods kept; and, once asked to calm the storm, the pods whose
//! failing is to be called off.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use agent_supervisor::api::{AGENT_LABEL, ATTEMPT_LABEL};
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use crate::finished::Finished;
use crate::watch::{Record, Watch};

/// The label that makes kwok's chaos stage (pod-container-running-failed) fail a running pod:
/// only the storm's pods carry it.
pub(crate) const CHAOS_LABEL: &str = "pod-container-running-failed.stage.kwok.x-k8s.io";

/// One watch of a namespace's Agents' pods.
pub(crate) type PodWatch = Watch<Seen>;

/// Starts watching the Agents' pods of `namespace`.
pub(crate) async fn start(client: &Client, namespace: &str) -> anyhow::Result<PodWatch> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Watch::start(api, watcher::Config::default().labels(AGENT_LABEL)).await
}

/// What one pod watch has seen, as it saw it.
#[derive(Clone, Default)]
pub struct Seen {
    /// Per Agent: when its first pod appeared.
    pub(crate) first_pod: HashMap<String, Instant>,
    /// Per Agent: when one of its pods was first Running.
    pub(crate) running: HashMap<String, Instant>,
    /// Pods seen, and pods seen Failed.
    pods: HashSet<String>,
    failed: HashSet<String>,
    /// Per failed pod, by its Agent and attempt: when it was first seen Failed.
    pub(crate) failures: HashMap<(String, u32), Instant>,
    /// The storm's window: failures inside it are timed, replacements inside it counted.
    pub(crate) window: Option<(Instant, Instant)>,
    /// Per Agent: a failure of the window whose replacement has not appeared yet.
    pub(crate) pending: HashMap<String, Instant>,
    /// Failure → replacement, for the failures of the window.
    pub(crate) replacements: Vec<Duration>,
    /// Pods created in the window that replace another, and after it.
    pub(crate) restarts: u64,
    pub(crate) restarts_after: u64,
    /// The finished pods kept, and their peaks once tracked.
    pub(crate) finished: Finished,
    /// Pods that kwok is to fail (the chaos label, neither finished nor being deleted), and
    /// where to send them once the storm is to calm down.
    crashing: HashSet<String>,
    calm: Option<UnboundedSender<String>>,
    /// The pods of a list under way (after the watch started again).
    relisted: Option<HashSet<String>>,
}

impl Record<Pod> for Seen {
    fn event(&mut self, event: watcher::Event<Pod>, now: Instant) {
        match event {
            watcher::Event::Apply(pod) => self.saw(&pod, now),
            watcher::Event::InitApply(pod) => {
                if let Some(listed) = &mut self.relisted {
                    listed.insert(pod.name_any());
                }
                self.saw(&pod, now);
            }
            watcher::Event::Delete(pod) => self.gone(&pod.name_any()),
            watcher::Event::Init => self.relisted = Some(HashSet::new()),
            // What the list did not have was deleted while the watch was down.
            watcher::Event::InitDone => {
                let listed = self.relisted.take().unwrap_or_default();
                let gone: Vec<String> = self.pods.difference(&listed).cloned().collect();
                for pod in gone {
                    self.gone(&pod);
                }
            }
        }
    }
}

impl Seen {
    fn saw(&mut self, pod: &Pod, now: Instant) {
        let Some(agent) = pod.labels().get(AGENT_LABEL).cloned() else {
            return;
        };
        let name = pod.name_any();
        let in_window = self.window.is_some_and(|(a, b)| a <= now && now < b);
        let after_window = self.window.is_some_and(|(_, b)| b <= now);
        if self.pods.insert(name.clone()) {
            if self.first_pod.contains_key(&agent) {
                if in_window {
                    self.restarts += 1;
                } else if after_window {
                    self.restarts_after += 1;
                }
                if let Some(failed) = self.pending.remove(&agent) {
                    self.replacements.push(now.duration_since(failed));
                }
            } else {
                self.first_pod.insert(agent.clone(), now);
            }
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let finished = matches!(phase, Some("Succeeded" | "Failed"));
        self.finished.set(&name, &agent, finished && !deleting);
        if pod.labels().contains_key(CHAOS_LABEL) && !finished && !deleting {
            self.crashing.insert(name.clone());
            if let Some(calm) = &self.calm {
                let _ = calm.unbounded_send(name.clone());
            }
        } else {
            self.crashing.remove(&name);
        }
        match phase {
            Some("Running") => {
                self.running.entry(agent).or_insert(now);
            }
            Some("Failed") if self.failed.insert(name.clone()) => {
                if let Some(attempt) = attempt(pod) {
                    self.failures.insert((agent.clone(), attempt), now);
                }
                if in_window {
                    self.pending.entry(agent).or_insert(now);
                }
            }
            _ => {}
        }
    }

    fn gone(&mut self, pod: &str) {
        self.finished.gone(pod);
        self.crashing.remove(pod);
    }

    /// From now on, sends every pod kwok is to fail to `calm`: those it is to fail now, and
    /// each one seen so later.
    pub(crate) fn calm(&mut self, calm: UnboundedSender<String>) {
        for pod in &self.crashing {
            let _ = calm.unbounded_send(pod.clone());
        }
        self.calm = Some(calm);
    }
}

/// The attempt a pod is of: its attempt label, or else the number its name ends in
/// (`<agent>-<attempt>`, as both controllers name pods).
fn attempt(pod: &Pod) -> Option<u32> {
    let label = pod.labels().get(ATTEMPT_LABEL).and_then(|a| a.parse().ok());
    label.or_else(|| pod.name_any().rsplit_once('-')?.1.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, phase: &str, labels: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    #[test]
    fn failures_are_timed_by_agent_and_attempt_and_crashing_pods_are_sent_to_calm() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut seen = Seen::default();
        let crasher = json!({AGENT_LABEL: "a", CHAOS_LABEL: "true"});
        seen.event(
            watcher::Event::Apply(pod("a-1", "Running", crasher.clone())),
            at(0),
        );
        let labelled = json!({AGENT_LABEL: "a", ATTEMPT_LABEL: "7", CHAOS_LABEL: "true"});
        seen.event(
            watcher::Event::Apply(pod("a-x", "Pending", labelled)),
            at(5),
        );
        seen.event(
            watcher::Event::Apply(pod("a-1", "Failed", crasher.clone())),
            at(10),
        );
        // Seen Failed again: still the first time.
        seen.event(
            watcher::Event::Apply(pod("a-1", "Failed", crasher.clone())),
            at(20),
        );
        assert_eq!(seen.failures[&("a".to_string(), 1)], at(10));
        assert_eq!(seen.failures.len(), 1);
        assert_eq!(
            attempt(&pod("a-x", "Pending", json!({ATTEMPT_LABEL: "7"}))),
            Some(7)
        );
        // Calming: what kwok is to fail now, then each one seen so.
        let (tx, mut rx) = futures::channel::mpsc::unbounded();
        seen.calm(tx);
        seen.event(
            watcher::Event::Apply(pod("a-2", "Pending", crasher)),
            at(30),
        );
        seen.event(
            watcher::Event::Apply(pod("a-3", "Pending", json!({AGENT_LABEL: "a"}))),
            at(40),
        );
        let mut sent = Vec::new();
        while let Ok(pod) = rx.try_recv() {
            sent.push(pod);
        }
        assert_eq!(sent, ["a-x", "a-2"]);
    }

    #[test]
    fn a_relist_forgets_the_pods_deleted_while_the_watch_was_down() {
        let now = Instant::now();
        let mut seen = Seen::default();
        for name in ["a-1", "a-2"] {
            let labels = json!({AGENT_LABEL: "a"});
            seen.event(watcher::Event::Apply(pod(name, "Failed", labels)), now);
        }
        seen.finished.track();
        assert_eq!(seen.finished.peak_per_agent, 2);
        seen.event(watcher::Event::Init, now);
        let labels = json!({AGENT_LABEL: "a"});
        seen.event(watcher::Event::InitApply(pod("a-2", "Failed", labels)), now);
        seen.event(watcher::Event::InitDone, now);
        let labels = json!({AGENT_LABEL: "a"});
        seen.event(watcher::Event::Apply(pod("a-3", "Failed", labels)), now);
        // a-1 went: two at once again, not three.
        assert_eq!(seen.finished.peak_per_agent, 2);
        assert_eq!(seen.finished.peak, 2);
    }
}
