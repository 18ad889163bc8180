//! One watch of a phase's pods, and what it saw as it saw it: first pods, Running, failures and
//! their replacements.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_supervisor::api::AGENT_LABEL;
use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

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
    /// The storm's window: failures inside it are timed, replacements inside it counted.
    pub(crate) window: Option<(Instant, Instant)>,
    /// Per Agent: a failure of the window whose replacement has not appeared yet.
    pub(crate) pending: HashMap<String, Instant>,
    /// Failure → replacement, for the failures of the window.
    pub(crate) replacements: Vec<Duration>,
    /// Pods created in the window that replace another.
    pub(crate) restarts: u64,
}

impl Seen {
    fn saw(&mut self, pod: &Pod, now: Instant) {
        let Some(agent) = pod.labels().get(AGENT_LABEL).cloned() else {
            return;
        };
        let name = pod.name_any();
        let in_window = self.window.is_some_and(|(a, b)| a <= now && now < b);
        if self.pods.insert(name.clone()) {
            if self.first_pod.contains_key(&agent) {
                if in_window {
                    self.restarts += 1;
                }
                if let Some(failed) = self.pending.remove(&agent) {
                    self.replacements.push(now.duration_since(failed));
                }
            } else {
                self.first_pod.insert(agent.clone(), now);
            }
        }
        match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Running") => {
                self.running.entry(agent).or_insert(now);
            }
            Some("Failed") if self.failed.insert(name) && in_window => {
                self.pending.entry(agent).or_insert(now);
            }
            _ => {}
        }
    }
}

/// One watch of a namespace's pods, recording into [`Seen`]; stops when dropped.
pub(crate) struct PodWatch {
    pub(crate) state: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodWatch {
    pub(crate) async fn start(client: &Client, namespace: &str) -> anyhow::Result<Self> {
        let state = Arc::new(Mutex::new(Seen::default()));
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let events = watcher(api, watcher::Config::default().labels(AGENT_LABEL));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let recorder = state.clone();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let now = Instant::now();
                match event {
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                        recorder.lock().unwrap().saw(&pod, now);
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        eprintln!("pod watch: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        });
        ready_rx
            .await
            .context("the pod watch ended before it listed")?;
        Ok(PodWatch { state, task })
    }

    pub(crate) fn snapshot(&self) -> Seen {
        self.state.lock().unwrap().clone()
    }

    /// Waits until `done` holds, or `timeout`; whether it holds.
    pub(crate) async fn wait(&self, timeout: Duration, done: impl Fn(&Seen) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(&self.state.lock().unwrap()) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
