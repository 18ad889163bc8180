//! The steps scenarios are made of, as the user and the kubelet take them. Every wait waits for
//! a state (of an Agent's or a group's status, or of a pod), never for time, and holds however
//! often the operator is restarted meanwhile.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_supervisor::api::{Agent, AgentGroup, AgentGroupStatus, AgentStatus, Phase};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::faults::Faults;
use crate::support::{TestNamespace, eventually};

/// How long one step may wait: long, since runs share two loaded cores.
pub const STEP: Duration = Duration::from_secs(90);

/// One run of a scenario, as seen from one of its agents: the steps act on `agent` (the
/// scenario's first, or the one [`Run::on`] chose); the namespace, what runs beside (a
/// heartbeat) and the focus are the run's, shared by every view of it.
pub struct Run {
    pub ns: Arc<TestNamespace>,
    pub agent: &'static str,
    shared: Arc<Shared>,
}

struct Shared {
    background: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The first operator's requests, counted.
    faults: Faults,
    /// How many requests it had made when the story reached its focus.
    focus: Mutex<Option<usize>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for task in self.background.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Run {
    /// A run in `ns` whose steps act on `agent`; `faults` counts the first operator's requests.
    pub fn new(ns: TestNamespace, agent: &'static str, faults: Faults) -> Run {
        Run {
            ns: Arc::new(ns),
            agent,
            shared: Arc::new(Shared {
                background: Mutex::new(Vec::new()),
                faults,
                focus: Mutex::new(None),
            }),
        }
    }

    /// The same run, its steps acting on `agent`.
    pub fn on(&self, agent: &'static str) -> Run {
        Run {
            ns: self.ns.clone(),
            agent,
            shared: self.shared.clone(),
        }
    }

    /// Marks where the story's point lies: quick runs explore the crash points after the
    /// requests made so far (the set-up before is left to thorough runs).
    pub fn focus(&self) {
        *self.shared.focus.lock().unwrap() = Some(self.shared.faults.count());
    }

    /// How many requests the first operator had made at the focus, if the story has one.
    pub fn focused_at(&self) -> Option<usize> {
        *self.shared.focus.lock().unwrap()
    }

    pub fn pod(&self, attempt: u32) -> String {
        format!("{}-{attempt}", self.agent)
    }

    /// Runs `task` until the run ends.
    pub fn beside(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.shared
            .background
            .lock()
            .unwrap()
            .push(tokio::spawn(task));
    }

    pub async fn create_policy(&self, spec: Value) {
        self.ns.create_policy("p", spec).await;
    }

    /// Creates the agent under policy `p`, with `extra` spec fields.
    pub async fn create_agent(&self, extra: Value) {
        let mut spec = json!({ "restartPolicyRef": { "name": "p" } });
        if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
            spec.extend(extra);
        }
        self.ns.create_agent(self.agent, spec).await;
    }

    pub async fn status(&self) -> AgentStatus {
        self.ns.status(self.agent).await
    }

    /// Waits until the Agent's status satisfies `check`.
    pub async fn until(&self, what: &str, check: impl Fn(&AgentStatus) -> bool) -> AgentStatus {
        self.ns.wait_status_for(STEP, self.agent, what, check).await
    }

    /// Waits until the Agent runs `attempt` or a later one (status and pod both say so), and
    /// returns the attempt: a later one is a bug the end state will show, not a reason to hang.
    pub async fn running(&self, attempt: u32) -> u32 {
        let status = self
            .until(&format!("attempt {attempt} Running"), |s| {
                s.phase == Some(Phase::Running) && s.attempt >= attempt
            })
            .await;
        self.pod_running(status.attempt).await;
        status.attempt
    }

    /// Waits until attempt's pod runs (kwok started it).
    pub async fn pod_running(&self, attempt: u32) {
        let pods = self.ns.api::<Pod>();
        let name = self.pod(attempt);
        eventually(STEP, &format!("pod {name} to run"), || {
            let (pods, name) = (pods.clone(), name.clone());
            async move {
                let pod = pods.get_opt(&name).await.ok()??;
                (pod.status?.phase.as_deref() == Some("Running")).then_some(())
            }
        })
        .await;
    }

    /// Waits until attempt's pod is gone, finished or being deleted.
    pub async fn pod_stopped(&self, attempt: u32) {
        let pods = self.ns.api::<Pod>();
        let name = self.pod(attempt);
        eventually(STEP, &format!("pod {name} to stop"), || {
            let (pods, name) = (pods.clone(), name.clone());
            async move {
                let Some(pod) = pods.get_opt(&name).await.ok()? else {
                    return Some(());
                };
                let phase = pod.status.and_then(|s| s.phase);
                let stopped = pod.metadata.deletion_timestamp.is_some()
                    || matches!(phase.as_deref(), Some("Succeeded" | "Failed"));
                stopped.then_some(())
            }
        })
        .await;
    }

    /// Ends the current attempt's container as the kubelet reports it, once `attempt` (or a
    /// later one) runs.
    pub async fn end(&self, attempt: u32, exit_code: i32, reason: &str, message: &str) {
        let current = self.running(attempt).await;
        self.ns
            .terminate(&self.pod(current), exit_code, reason, message)
            .await;
    }

    /// Ends attempt's pod once it runs, without waiting for the status to record it: the next
    /// crash may come before this one is recorded.
    pub async fn crash(&self, attempt: u32, exit_code: i32, reason: &str, message: &str) {
        self.pod_running(attempt).await;
        self.ns
            .terminate(&self.pod(attempt), exit_code, reason, message)
            .await;
    }

    /// Ends attempt's pod as soon as it exists, placed or not (then nothing is written for the
    /// agent yet: a first pod is recorded once it runs).
    pub async fn fail_unplaced(&self, attempt: u32, exit_code: i32, reason: &str, message: &str) {
        self.ns.wait_pod(&self.pod(attempt)).await;
        self.ns
            .terminate(&self.pod(attempt), exit_code, reason, message)
            .await;
    }

    /// A merge patch of the Agent (annotations, spec).
    pub async fn patch(&self, patch: Value) {
        self.ns
            .api::<Agent>()
            .patch(self.agent, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch the agent");
    }

    /// A merge patch of the Agent's status, as `kubectl patch --subresource=status` does.
    pub async fn patch_status(&self, patch: Value) {
        self.ns
            .api::<Agent>()
            .patch_status(self.agent, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch the agent's status");
    }

    /// The pod of `attempt` reports `progress` and `checkpoint` on the agent's Lease, once the
    /// operator has made the Lease.
    pub async fn report(&self, attempt: u32, progress: &str, checkpoint: &str) {
        let leases = self.ns.api::<Lease>();
        let lease = self.agent;
        eventually(STEP, &format!("Lease {lease} to exist"), || {
            let leases = leases.clone();
            async move { leases.get_opt(lease).await.ok()?.map(|_| ()) }
        })
        .await;
        self.ns
            .report_on_lease(lease, &self.pod(attempt), progress, checkpoint)
            .await;
    }

    /// Keeps renewing the agent's Lease as `holder`, twice a second, until the run ends.
    pub fn heartbeat(&self, holder: String) {
        let leases = self.ns.api::<Lease>();
        let lease = self.agent;
        self.beside(async move {
            loop {
                let now = jiff::Timestamp::now()
                    .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
                    .to_string();
                let patch = json!({ "spec": { "holderIdentity": holder, "renewTime": now } });
                // Before the operator creates the Lease, this fails: try again.
                let _ = leases
                    .patch(lease, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }

    /// Creates the AgentGroup `name` with `spec`.
    pub async fn create_group(&self, name: &str, spec: Value) {
        self.ns.create_group(name, spec).await;
    }

    /// Waits until group `group`'s status satisfies `check`.
    pub async fn group_until(
        &self,
        group: &str,
        what: &str,
        check: impl Fn(&AgentGroupStatus) -> bool,
    ) -> AgentGroupStatus {
        let api = self.ns.api::<AgentGroup>();
        eventually(STEP, &format!("group {group}: {what}"), || {
            let api = api.clone();
            let check = &check;
            async move {
                let status = api.get_status(group).await.ok()?.status?;
                check(&status).then_some(status)
            }
        })
        .await
    }

    /// A merge patch of group `group` (its reset annotation).
    pub async fn patch_group(&self, group: &str, patch: Value) {
        self.ns
            .api::<AgentGroup>()
            .patch(group, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch the group");
    }
}
