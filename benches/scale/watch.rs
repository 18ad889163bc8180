//! One watch of a phase's objects, recording what it sees as it sees it into a state of its
//! own (`Record`): the pods' (`pod_watch::Seen`) or the Agents' (`agent_watch::AgentsSeen`).

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use kube::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

/// What a watch records, event by event, with the moment it saw each.
pub(crate) trait Record<K>: Default + Clone + Send + 'static {
    fn event(&mut self, event: watcher::Event<K>, now: Instant);
}

/// One watch, recording into `S`; stops when dropped.
pub(crate) struct Watch<S> {
    pub(crate) state: Arc<Mutex<S>>,
    task: tokio::task::JoinHandle<()>,
}

impl<S> Watch<S> {
    /// Starts watching; returns once the watch has listed what exists.
    pub(crate) async fn start<K>(api: Api<K>, config: watcher::Config) -> anyhow::Result<Self>
    where
        S: Record<K>,
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let state = Arc::new(Mutex::new(S::default()));
        let events = watcher(api, config);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let recorder = state.clone();
        let task = tokio::spawn(async move {
            let mut ready = Some(ready_tx);
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let now = Instant::now();
                match event {
                    Ok(event) => {
                        let listed = matches!(event, watcher::Event::InitDone);
                        recorder.lock().unwrap().event(event, now);
                        if let Some(ready) = ready.take_if(|_| listed) {
                            let _ = ready.send(());
                        }
                    }
                    Err(e) => {
                        eprintln!("watch: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        });
        ready_rx.await.context("the watch ended before it listed")?;
        Ok(Watch { state, task })
    }

    pub(crate) fn snapshot(&self) -> S
    where
        S: Clone,
    {
        self.state.lock().unwrap().clone()
    }

    /// Waits until `done` holds, or `timeout`; whether it holds.
    pub(crate) async fn wait(&self, timeout: Duration, done: impl Fn(&S) -> bool) -> bool {
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

impl<S> Drop for Watch<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
