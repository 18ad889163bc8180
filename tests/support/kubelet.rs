//! Playing the kubelet (and the user) in controller tests: create agents and policies, wait for
//! pods, and end containers exactly as a kubelet would report it.

use std::time::Duration;

use agent_supervisor::api::{Agent, AgentStatus, RestartPolicy};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::{Recorder, TestNamespace, eventually};

/// How long tests wait for the operator to react: a minute, for CI's loaded machine, where a
/// reaction of seconds here took over 30 s (only a failing test waits it out).
pub const REACT: Duration = Duration::from_secs(60);

impl TestNamespace {
    pub async fn create_agent(&self, name: &str, spec: Value) -> Agent {
        let mut spec = spec;
        if spec.get("template").is_none() && spec.get("sandboxRef").is_none() {
            spec["template"] = json!({ "spec": { "containers": [{ "name": "agent", "image": "example.invalid/agent:1" }] } });
        }
        let agent: Agent = serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
            "metadata": { "name": name }, "spec": spec
        }))
        .expect("test agent deserializes");
        self.api::<Agent>()
            .create(&PostParams::default(), &agent)
            .await
            .expect("create agent")
    }

    pub async fn create_policy(&self, name: &str, spec: Value) -> RestartPolicy {
        let policy: RestartPolicy = serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "RestartPolicy",
            "metadata": { "name": name }, "spec": spec
        }))
        .expect("test policy deserializes");
        self.api::<RestartPolicy>()
            .create(&PostParams::default(), &policy)
            .await
            .expect("create policy")
    }

    pub async fn status(&self, agent: &str) -> AgentStatus {
        self.api::<Agent>()
            .get_status(agent)
            .await
            .expect("read agent")
            .status
            .unwrap_or_default()
    }

    /// Waits until the agent's status satisfies `check`, and returns it.
    pub async fn wait_status(
        &self,
        agent: &str,
        what: &str,
        check: impl Fn(&AgentStatus) -> bool,
    ) -> AgentStatus {
        self.wait_status_for(REACT, agent, what, check).await
    }

    /// `wait_status`, waiting at most `timeout`.
    pub async fn wait_status_for(
        &self,
        timeout: Duration,
        agent: &str,
        what: &str,
        check: impl Fn(&AgentStatus) -> bool,
    ) -> AgentStatus {
        let api = self.api::<Agent>();
        eventually(timeout, &format!("agent {agent}: {what}"), || {
            let api = api.clone();
            let check = &check;
            async move {
                let status = api.get_status(agent).await.ok()?.status?;
                check(&status).then_some(status)
            }
        })
        .await
    }

    /// Makes the operator decide about `agent` once more, on everything as it is now, and waits
    /// until it has: a change of its spec that changes nothing it does (`agentContainer` set
    /// to the first container, the default) and the `observedGeneration` that proves the
    /// decision. Instead of waiting a while to see that nothing happens.
    pub async fn decided_again(&self, agent: &str) -> AgentStatus {
        let api = self.api::<Agent>();
        let current = api.get(agent).await.expect("read agent");
        let first = current
            .spec
            .template
            .get()
            .spec
            .and_then(|spec| spec.containers.first().map(|c| c.name.clone()))
            // A Sandbox's: the tests' Sandboxes name their one container `agent`.
            .or_else(|| {
                current
                    .spec
                    .sandbox_ref
                    .as_ref()
                    .map(|_| "agent".to_string())
            })
            .expect("the template has a container");
        let flip = if current.spec.agent_container.is_some() {
            Value::Null
        } else {
            json!(first)
        };
        let patched = api
            .patch(
                agent,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "agentContainer": flip } })),
            )
            .await
            .expect("patch agentContainer");
        let generation = patched.metadata.generation;
        self.wait_status(agent, "decided on its new generation", |s| {
            s.observed_generation == generation
        })
        .await
    }

    /// Records every version of Agent `name` from now on (see [`Recorder`]).
    pub async fn record_agent(&self, name: &str) -> Recorder<Agent> {
        Recorder::start(self.api(), Some(&format!("metadata.name={name}"))).await
    }

    /// Records every version of every pod in the namespace from now on.
    pub async fn record_pods(&self) -> Recorder<Pod> {
        Recorder::start(self.api(), None).await
    }

    /// Waits until pod `name` exists, in any phase.
    pub async fn wait_pod(&self, name: &str) -> Pod {
        let pods = self.api::<Pod>();
        eventually(REACT, &format!("pod {name} to exist"), || {
            let pods = pods.clone();
            async move { pods.get_opt(name).await.ok()? }
        })
        .await
    }

    /// Waits until pod `name` exists and is Running (kwok started it).
    pub async fn wait_running(&self, name: &str) -> Pod {
        let pods = self.api::<Pod>();
        eventually(REACT, &format!("pod {name} to run"), || {
            let pods = pods.clone();
            async move {
                let pod = pods.get_opt(name).await.ok()??;
                (pod.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(pod)
            }
        })
        .await
    }

    /// Waits until pod `name` no longer exists.
    pub async fn wait_gone(&self, name: &str) {
        let pods = self.api::<Pod>();
        eventually(REACT, &format!("pod {name} to be gone"), || {
            let pods = pods.clone();
            async move { pods.get_opt(name).await.ok()?.is_none().then_some(()) }
        })
        .await
    }

    /// Ends the pod's container as the kubelet reports it: phase Failed (Succeeded for exit
    /// 0), the container terminated with `exit_code`, `reason` and termination `message`.
    pub async fn terminate(&self, pod: &str, exit_code: i32, reason: &str, message: &str) {
        let pods = self.api::<Pod>();
        let current = pods.get(pod).await.expect("pod to terminate exists");
        let started = current
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.to_string())
            .unwrap_or_else(|| jiff::Timestamp::now().to_string());
        let containers: Vec<Value> = current
            .spec
            .as_ref()
            .expect("pod has a spec")
            .containers
            .iter()
            .map(|c| {
                json!({
                    "name": c.name, "image": c.image, "imageID": "", "ready": false, "restartCount": 0,
                    "state": { "terminated": {
                        "exitCode": exit_code, "reason": reason, "message": message,
                        "startedAt": started, "finishedAt": jiff::Timestamp::now().to_string(),
                    }}
                })
            })
            .collect();
        let phase = if exit_code == 0 {
            "Succeeded"
        } else {
            "Failed"
        };
        let patch = json!({ "status": {
            "phase": phase,
            "conditions": [{ "type": "Ready", "status": "False", "lastTransitionTime": jiff::Timestamp::now().to_string() }],
            "containerStatuses": containers,
        }});
        pods.patch_status(pod, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .expect("write pod status");
    }

    /// The Events recorded about `agent`, oldest first, as (reason, note): one for each time it
    /// was told (`told`), with the newest note of its Event.
    pub async fn events(&self, agent: &str) -> Vec<(String, String)> {
        occurrences(self.event_objects(agent).await)
    }

    /// The Event objects about `agent`, oldest first.
    pub async fn event_objects(&self, agent: &str) -> Vec<Event> {
        let events: Api<Event> = self.api();
        let params =
            ListParams::default().fields(&format!("regarding.name={agent},regarding.kind=Agent"));
        let mut list = events.list(&params).await.expect("list events").items;
        list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        list
    }

    /// Waits until an Event with `reason` is recorded about `agent`.
    pub async fn wait_event(&self, agent: &str, reason: &str) -> String {
        eventually(
            REACT,
            &format!("an Event {reason} on agent {agent}"),
            || async move {
                self.events(agent)
                    .await
                    .into_iter()
                    .find(|(r, _)| r == reason)
                    .map(|(_, note)| note)
            },
        )
        .await
    }
}

/// How many times `event` was told: its series' count, else its count, else once.
pub fn told(event: &Event) -> usize {
    let count = event.series.as_ref().map(|s| s.count);
    let count = count.or(event.deprecated_count).unwrap_or(1);
    usize::try_from(count).unwrap_or(0).max(1)
}

/// Each Event as (reason, note), as many times as it was told.
pub fn occurrences(events: Vec<Event>) -> Vec<(String, String)> {
    events
        .into_iter()
        .flat_map(|e| {
            let told = told(&e);
            let told_as = (e.reason.unwrap_or_default(), e.note.unwrap_or_default());
            std::iter::repeat_n(told_as, told)
        })
        .collect()
}
