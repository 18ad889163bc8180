//! Watches: one reflector per kind and scope, each run as a task of its own, so the caches fill
//! before any worker starts. Each reports to readiness, logs its failures, and hands every change
//! to whoever needs it. For tests, events can be held back and coalesced (Sieve's stale and
//! unobserved states).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::warn;

use crate::controller::health::Health;

/// Faults injected into every watch, for tests: the operator must be right whatever it sees late
/// or never sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchFaults {
    /// Every event reaches the caches (and the reconciles it triggers) this much later.
    pub lag: Option<Duration>,
    /// Of the events of one object held back together, only the last is delivered: the
    /// operator sees the latest state and never the ones in between.
    pub coalesce: bool,
    /// Only the pod watch is late: the operator sees an Agent's changes before those of its
    /// pods made earlier (watches of different kinds keep no order between them).
    pub pods_only: bool,
}

/// A change of a watched object, after the cache has taken it.
pub enum Change<K> {
    Applied(K),
    Deleted(K),
}

/// The watch tasks of one scope: aborted, and taken out of readiness, when dropped.
pub struct Watches {
    health: Arc<Health>,
    faults: WatchFaults,
    tasks: Vec<(String, JoinHandle<()>)>,
}

impl Watches {
    pub fn new(health: Arc<Health>, faults: WatchFaults) -> Self {
        Watches {
            health,
            faults,
            tasks: Vec::new(),
        }
    }

    /// Starts watching `api` into a new cache (without managedFields, and as `slim` leaves each
    /// object); `on_change` sees each change once the cache has it. `name` says what is
    /// watched, in logs and readiness.
    pub fn spawn<K>(
        &mut self,
        name: String,
        api: Api<K>,
        config: watcher::Config,
        slim: fn(&mut K),
        mut on_change: impl FnMut(Change<K>) + Send + 'static,
    ) -> Store<K>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let (reader, mut writer) = reflector::store();
        let health = self.health.clone();
        let mut faults = self.faults;
        if faults.pods_only && K::kind(&()) != "Pod" {
            faults.lag = None;
        }
        health.watch_started(&name);
        let label = name.clone();
        let task = tokio::spawn(async move {
            let events = watch(api, config).default_backoff();
            let mut deliver = |result: Result<Event<K>, watcher::Error>| match result {
                Ok(event) => {
                    let event = event.modify(|o| {
                        o.managed_fields_mut().clear();
                        slim(o);
                    });
                    // `Init` only announces a (re-)list, which may yet fail: not a sign of health.
                    if !matches!(event, Event::Init) {
                        health.watch_ok(&label, matches!(event, Event::InitDone));
                    }
                    writer.apply_watcher_event(&event);
                    match event {
                        Event::Apply(o) | Event::InitApply(o) => on_change(Change::Applied(o)),
                        Event::Delete(o) => on_change(Change::Deleted(o)),
                        Event::Init | Event::InitDone => {}
                    }
                }
                Err(error) => {
                    health.watch_failed(&label);
                    warn!(watch = label, reason = error_reason(&error), %error, "watch failed; retrying with backoff");
                }
            };
            match faults.lag {
                None => {
                    futures::pin_mut!(events);
                    while let Some(result) = events.next().await {
                        deliver(result);
                    }
                }
                Some(lag) => held_back(events, lag, faults.coalesce, deliver).await,
            }
        });
        self.tasks.push((name, task));
        reader
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for (name, task) in &self.tasks {
            task.abort();
            self.health.watch_stopped(name);
        }
    }
}

/// Delivers each event `lag` after it arrived; with `coalesce`, of the events of one object
/// delivered together only the last.
async fn held_back<K, S>(
    events: S,
    lag: Duration,
    coalesce: bool,
    mut deliver: impl FnMut(Result<Event<K>, watcher::Error>),
) where
    K: Resource,
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>>,
{
    futures::pin_mut!(events);
    let mut queue: VecDeque<(Instant, Result<Event<K>, watcher::Error>)> = VecDeque::new();
    let mut open = true;
    while open || !queue.is_empty() {
        let due = queue.front().map(|(at, _)| *at + lag);
        tokio::select! {
            next = events.next(), if open => match next {
                Some(item) => queue.push_back((Instant::now(), item)),
                None => open = false,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                let mut batch = Vec::new();
                while queue.front().is_some_and(|(at, _)| *at + lag <= now) {
                    batch.extend(queue.pop_front().map(|(_, item)| item));
                }
                let batch = if coalesce { latest_per_object(batch) } else { batch };
                batch.into_iter().for_each(&mut deliver);
            }
        }
    }
}

/// Keeps, of the applies and deletes of each object, only the last; everything else in order.
fn latest_per_object<K: Resource>(
    batch: Vec<Result<Event<K>, watcher::Error>>,
) -> Vec<Result<Event<K>, watcher::Error>> {
    let key = |item: &Result<Event<K>, watcher::Error>| match item {
        Ok(Event::Apply(o) | Event::Delete(o)) => Some((o.namespace(), o.name_any())),
        _ => None,
    };
    let mut last: HashMap<(Option<String>, String), usize> = HashMap::new();
    for (i, item) in batch.iter().enumerate() {
        if let Some(k) = key(item) {
            last.insert(k, i);
        }
    }
    batch
        .into_iter()
        .enumerate()
        .filter(|(i, item)| key(item).is_none_or(|k| last.get(&k) == Some(i)))
        .map(|(_, item)| item)
        .collect()
}

/// A short reason for a failed watch, for logs: the API server's (`Forbidden`, `Expired`) or
/// the kind of failure.
fn error_reason(error: &watcher::Error) -> String {
    let api = |e: &kube::Error| match e {
        kube::Error::Api(status) => status.reason.clone(),
        kube::Error::SerdeError(_) => "UndecodableObject".to_string(),
        _ => "RequestFailed".to_string(),
    };
    match error {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) => api(e),
        watcher::Error::WatchFailed(e) => api(e),
        watcher::Error::WatchError(status) => status.reason.clone(),
        watcher::Error::NoResourceVersion => "NoResourceVersion".to_string(),
    }
}
