//! Watches kept for a whole run, checking after every event what must hold at every moment:
//! at most one live pod per Agent and no pod name created twice (the pod watch), and no Agent's
//! or group's counters going back (the Agent and AgentGroup watches: a status written over from
//! a stale view loses a restart, even if a later write puts the count right again).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use agent_supervisor::api::{AGENT_LABEL, ATTEMPT_LABEL, Agent, AgentGroup};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use crate::support::TestNamespace;

/// A pod the operator created: its agent, its attempt and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Created {
    pub agent: String,
    pub attempt: Option<u32>,
    pub name: String,
}

/// What the watches saw: the pods created, in order, the counters, and every broken invariant.
#[derive(Default)]
struct Seen {
    /// The pods as they are now, by name.
    pods: BTreeMap<String, Pod>,
    /// Every uid each name ever had.
    uids: BTreeMap<String, Vec<String>>,
    /// Pods in the order they were first seen.
    created: Vec<Created>,
    /// The highest value seen of each counter, by object and counter (`Agent a`, `restartCount`).
    counters: BTreeMap<(String, &'static str), u32>,
    violations: Vec<String>,
}

/// The watches, running in the background until dropped.
pub struct Monitor {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
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
            let label = |key: &str| pod.labels().get(key).cloned();
            self.created.push(Created {
                agent: label(AGENT_LABEL).unwrap_or_default(),
                attempt: label(ATTEMPT_LABEL).and_then(|a| a.parse().ok()),
                name: name.clone(),
            });
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
            let agent = pod.labels().get(AGENT_LABEL).cloned().unwrap_or_default();
            live.entry(agent).or_default().push(pod.name_any());
        }
        for (agent, pods) in live {
            if pods.len() > 1 {
                let violation = format!(
                    "agent {agent} had {} live pods at once: {pods:?}",
                    pods.len()
                );
                self.violate(violation);
            }
        }
    }

    /// `object`'s `counter` is now `value`: it never goes back.
    fn count(&mut self, object: String, counter: &'static str, value: u32) {
        let highest = self.counters.entry((object.clone(), counter)).or_insert(0);
        if value < *highest {
            let violation = format!("{object}: {counter} went back from {highest} to {value}");
            self.violate(violation);
        } else {
            *highest = value;
        }
    }

    fn agent(&mut self, agent: Agent) {
        let object = format!("Agent {}", agent.name_any());
        let status = agent.status.unwrap_or_default();
        self.count(object.clone(), "attempt", status.attempt);
        self.count(object, "restartCount", status.restart_count);
    }

    fn group(&mut self, group: AgentGroup) {
        let object = format!("AgentGroup {}", group.name_any());
        let status = group.status.unwrap_or_default();
        self.count(object.clone(), "incarnation", status.incarnation);
        self.count(object, "restartCount", status.restart_count);
    }

    fn violate(&mut self, violation: String) {
        if !self.violations.contains(&violation) {
            self.violations.push(violation);
        }
    }
}

impl Monitor {
    /// Starts watching the namespace's pods, Agents and AgentGroups, and returns once each watch
    /// has listed.
    pub async fn start(ns: &TestNamespace) -> Monitor {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let tasks = vec![
            watch(ns.api::<Pod>(), seen.clone(), Seen::apply, true).await,
            watch(ns.api::<Agent>(), seen.clone(), Seen::agent, false).await,
            watch(ns.api::<AgentGroup>(), seen.clone(), Seen::group, false).await,
        ];
        Monitor { seen, tasks }
    }

    /// The pods created so far, in order.
    pub fn created(&self) -> Vec<Created> {
        self.seen.lock().unwrap().created.clone()
    }

    /// The invariants broken so far.
    pub fn violations(&self) -> Vec<String> {
        self.seen.lock().unwrap().violations.clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Watches `api`, handing every version seen to `apply`; with `forget`, objects deleted (or
/// gone at a relist) are forgotten from `Seen::pods`. Returns once the first list is in.
async fn watch<K>(
    api: Api<K>,
    seen: Arc<Mutex<Seen>>,
    apply: fn(&mut Seen, K),
    forget: bool,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (ready, listed) = tokio::sync::oneshot::channel();
    let mut ready = Some(ready);
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let task = tokio::spawn(async move {
        let mut relisted = BTreeSet::new();
        while let Some(event) = stream.next().await {
            let mut seen = seen.lock().unwrap();
            match event {
                Ok(watcher::Event::Init) => relisted.clear(),
                Ok(watcher::Event::InitApply(object)) => {
                    relisted.insert(object.name_any());
                    apply(&mut seen, object);
                }
                Ok(watcher::Event::InitDone) => {
                    if forget {
                        seen.pods.retain(|name, _| relisted.contains(name));
                    }
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                }
                Ok(watcher::Event::Apply(object)) => apply(&mut seen, object),
                Ok(watcher::Event::Delete(object)) => {
                    if forget {
                        seen.pods.remove(&object.name_any());
                    }
                }
                // The watcher retries by itself; a relist repairs what was missed.
                Err(_) => {}
            }
        }
    });
    tokio::time::timeout(std::time::Duration::from_secs(60), listed)
        .await
        .expect("the watch lists within a minute")
        .expect("the watch runs");
    task
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
        let names: Vec<_> = seen.created.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["a-1", "a-2", "a-3", "a-4"]);
    }

    #[test]
    fn a_name_created_again_is_caught() {
        let mut seen = Seen::default();
        seen.apply(pod("a-1", "u1", "Failed", false));
        seen.pods.clear();
        seen.apply(pod("a-1", "u2", "Pending", false));
        assert_eq!(seen.violations.len(), 1, "{:?}", seen.violations);
    }

    #[test]
    fn pods_of_two_agents_are_counted_apart() {
        let mut seen = Seen::default();
        let mut other = pod("b-1", "u2", "Running", false);
        other
            .labels_mut()
            .insert(AGENT_LABEL.to_string(), "b".to_string());
        seen.apply(pod("a-1", "u1", "Running", false));
        seen.apply(other);
        assert!(seen.violations.is_empty(), "{:?}", seen.violations);
    }

    #[test]
    fn a_counter_going_back_is_caught_once() {
        let agent = |restarts: u32| -> Agent {
            serde_json::from_value(json!({
                "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
                "metadata": { "name": "a" },
                "spec": { "template": { "spec": { "containers": [] } } },
                "status": { "attempt": restarts + 1, "restartCount": restarts },
            }))
            .unwrap()
        };
        let mut seen = Seen::default();
        seen.agent(agent(0));
        seen.agent(agent(2));
        seen.agent(agent(2));
        assert!(seen.violations.is_empty(), "{:?}", seen.violations);
        seen.agent(agent(1));
        seen.agent(agent(1));
        assert_eq!(
            seen.violations,
            [
                "Agent a: attempt went back from 3 to 2",
                "Agent a: restartCount went back from 2 to 1"
            ]
        );
    }
}
