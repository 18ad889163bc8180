//! The sender of the decisions' Events: an object's first at once, the ones that follow
//! within a window merged, a bounded queue, and nothing kept once a window closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as EventObject;
use kube::api::PostParams;
use kube::runtime::events::{Event as KubeEvent, EventType};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Semaphore;
use tracing::warn;

use super::NOTE_LIMIT;
use crate::controller::budget::{Bucket, BudgetConfig};
use crate::controller::catch_up::{self, Creates};
use crate::controller::storm::StormConfig;

/// How long after an Event about an agent its next ones wait, to be sent together. An agent
/// that crashes now and then has each Event sent at once; one crashing every few seconds has
/// its Events merged, a few per request (see `merge`), instead of one request each while the
/// API server is busiest. The status records every crash at once either way.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Events a second, at most, while a crash storm outlasts an object's wait for it
/// (`after_creates`), in bursts of as many, until the storm is over (`StormConfig::lasting`):
/// without a pace, the Events of agents that began to crash together all went out in the same
/// second when their wait ended, 200 at a time, and the pods created in that second waited for
/// them (storm-only bench-scale: the Failed → next pod p50 80 ms in such a second against 7 ms
/// in the baseline's).
pub const STORM_PACE: u32 = 5;

/// How many Events are being sent at once, at most.
const SENDING: usize = 32;

/// How many Events may wait to be sent, at most, across all objects: a first start of ten
/// thousand Agents fits; past it, an Event is dropped and counted
/// (`agent_supervisor_events_dropped_total`), never waited for.
const QUEUED: usize = 16_384;

/// Joins the notes of Events merged into one.
const JOIN: &str = " | ";

/// Sends the decisions' Events: an object's first at once, the ones that follow within
/// `WINDOW` together at its end, merged, in order, by one task per object. Nothing is kept
/// once an object's window passes without an Event. (kube's `Recorder` keeps every Event it
/// sent for six minutes, to count a repeat into a series showing only the first note; its
/// cache grew to one entry per agent and every send scanned it under one lock. It stays for
/// warnings, which do repeat.)
#[derive(Clone)]
pub struct Sender {
    client: kube::Client,
    window: Duration,
    windows: Arc<Mutex<Windows>>,
    turns: Arc<Semaphore>,
    dropped: Counter,
    /// When the operator last created a pod: Events wait while it is creating them.
    creates: Arc<Creates>,
    /// What makes a crash storm, in which Events go at `STORM_PACE`.
    storm: StormConfig,
    /// The pace of Events sent while one lasts.
    pace: Arc<Mutex<Bucket>>,
}

impl Sender {
    /// A sender holding an object's Events for `window` after one is sent (`WINDOW` outside
    /// tests), and while the operator is creating pods (for at most a window, then at
    /// `STORM_PACE` while a crash storm as `storm` tells it lasts).
    pub fn new(
        client: kube::Client,
        window: Duration,
        dropped: Counter,
        creates: Arc<Creates>,
        storm: StormConfig,
    ) -> Self {
        Sender {
            client,
            window,
            windows: Arc::new(Mutex::new(Windows::new(QUEUED))),
            turns: Arc::new(Semaphore::new(SENDING)),
            dropped,
            creates,
            storm,
            pace: Arc::new(Mutex::new(full_pace(Instant::now()))),
        }
    }

    /// Sends `events` about `regarding`, now or at the end of its window, without waiting
    /// (none: nothing happens, no window opens). An Event lost with the process is only an
    /// Event: the status holds the record.
    pub fn send_later(&self, regarding: ObjectReference, events: Vec<KubeEvent>) {
        let now = jiff::Timestamp::now();
        let pending = events.into_iter().map(|event| Pending { at: now, event });
        let key = WindowKey::of(&regarding);
        let (first, dropped) = lock(&self.windows).offer(&key, pending);
        if dropped > 0 {
            self.dropped.inc_by(dropped as u64);
            warn!(
                dropped,
                "too many Events waiting to be sent: dropped (the status records what they told)"
            );
        }
        let Some(first) = first else {
            return;
        };
        let sender = self.clone();
        tokio::spawn(async move {
            let mut batch = first;
            loop {
                sender.after_creates().await;
                let sent = batch.len();
                let merged = merge(batch);
                sender.paced(merged.len()).await;
                sender.send_all(&regarding, merged).await;
                lock(&sender.windows).sent(sent);
                tokio::time::sleep(sender.window).await;
                match lock(&sender.windows).take_or_close(&key) {
                    Some(next) => batch = next,
                    None => return,
                }
            }
        });
    }

    /// Waits while the operator is creating pods, for at most one window: in a burst of new
    /// Agents, their Events follow their pods instead of slowing the creates after them.
    async fn after_creates(&self) {
        let deadline = Instant::now() + self.window;
        while self.creates.busy(Instant::now()) && Instant::now() < deadline {
            tokio::time::sleep(catch_up::BUSY).await;
        }
    }

    /// Waits for `n` Events' turn in the pace while a crash storm lasts (`after_creates` gave
    /// up waiting for the creates to pause), and no longer: once it is over, every Event
    /// waiting for its turn goes, and the next storm's pace begins with no debt. (Turns
    /// outlasting the storm that paced them left a converge of 10,000 Agents with 33 minutes
    /// of Events to send at the pace, five a second in the steady state after it, and the next
    /// storm's Events behind them.)
    async fn paced(&self, n: usize) {
        let now = Instant::now();
        if !self.storm.lasting(&self.creates, now) {
            *self.pace.lock().unwrap_or_else(|e| e.into_inner()) = full_pace(now);
            return;
        }
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let turn = self
            .pace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reserve(n, now);
        loop {
            let now = Instant::now();
            if now >= turn || !self.storm.lasting(&self.creates, now) {
                return;
            }
            tokio::time::sleep((turn - now).min(catch_up::SOON)).await;
        }
    }

    async fn send_all(&self, regarding: &ObjectReference, events: Vec<Pending>) {
        let Ok(_turn) = self.turns.acquire().await else {
            return;
        };
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: kube::Api<EventObject> = kube::Api::namespaced(self.client.clone(), namespace);
        for Pending { at, event } in events {
            let object = event_object(&event, regarding, at);
            if let Err(e) = api.create(&PostParams::default(), &object).await {
                warn!(reason = %event.reason, error = %e, "could not record an Event");
            }
        }
    }
}

/// The pace of Events in a storm (`STORM_PACE`), its burst not spent, as of `now`.
fn full_pace(now: Instant) -> Bucket {
    let config = BudgetConfig {
        rate: f64::from(STORM_PACE),
        burst: STORM_PACE,
    };
    Bucket::new(config, now)
}

fn lock(windows: &Mutex<Windows>) -> std::sync::MutexGuard<'_, Windows> {
    windows
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An Event waiting to be sent, and when it happened.
struct Pending {
    at: jiff::Timestamp,
    event: KubeEvent,
}

/// The object an Event is about: a namesake created after it is another object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WindowKey {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl WindowKey {
    fn of(regarding: &ObjectReference) -> Self {
        WindowKey {
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone(),
            uid: regarding.uid.clone(),
        }
    }
}

/// The objects whose window is open, with the Events waiting for its end, and how many Events
/// are accepted and not sent yet (bounded).
struct Windows {
    open: HashMap<WindowKey, Vec<Pending>>,
    queued: usize,
    capacity: usize,
}

impl Windows {
    fn new(capacity: usize) -> Self {
        Windows {
            open: HashMap::new(),
            queued: 0,
            capacity,
        }
    }

    /// Events about `key`: returned to be sent now if its window was closed (it opens),
    /// otherwise kept for the window's end; with how many were dropped, the queue being full.
    fn offer(
        &mut self,
        key: &WindowKey,
        events: impl IntoIterator<Item = Pending>,
    ) -> (Option<Vec<Pending>>, usize) {
        let mut accepted = Vec::new();
        let mut dropped = 0;
        for event in events {
            if self.queued < self.capacity {
                self.queued += 1;
                accepted.push(event);
            } else {
                dropped += 1;
            }
        }
        if accepted.is_empty() {
            return (None, dropped);
        }
        match self.open.get_mut(key) {
            Some(waiting) => {
                waiting.extend(accepted);
                (None, dropped)
            }
            None => {
                self.open.insert(key.clone(), Vec::new());
                (Some(accepted), dropped)
            }
        }
    }

    /// `n` Events taken to be sent were sent (or given up on).
    fn sent(&mut self, n: usize) {
        self.queued = self.queued.saturating_sub(n);
    }

    /// At the end of `key`'s window: the Events that waited for it, to be sent now (a new
    /// window begins), or none, and the window closes.
    fn take_or_close(&mut self, key: &WindowKey) -> Option<Vec<Pending>> {
        match self.open.get_mut(key) {
            Some(waiting) if !waiting.is_empty() => Some(std::mem::take(waiting)),
            _ => {
                self.open.remove(key);
                None
            }
        }
    }
}

/// Events to send together: the Events of one reason and type become one Event whose note joins
/// theirs in order (a person reads every one), at the time of the first, as long as the note
/// stays within what the API server accepts; beyond that a new Event begins. An agent that backs
/// off between crashes alternates `Crashed` and its restarts: each reason is still told once.
fn merge(events: Vec<Pending>) -> Vec<Pending> {
    let mut merged: Vec<Pending> = Vec::with_capacity(events.len());
    for next in events {
        let same = merged
            .iter_mut()
            .rev()
            .find(|m| m.event.reason == next.event.reason && m.event.type_ == next.event.type_);
        if let Some(last) = same {
            let (so_far, note) = (
                last.event.note.as_deref().unwrap_or_default(),
                next.event.note.as_deref().unwrap_or_default(),
            );
            if so_far.len() + JOIN.len() + note.len() <= NOTE_LIMIT {
                last.event.note = Some(format!("{so_far}{JOIN}{note}"));
                last.event.secondary = next.event.secondary;
                continue;
            }
        }
        merged.push(next);
    }
    merged
}

/// The Event object for `event` about `regarding`, happened `at`: named after the object and
/// the time of sending (made unique within this process), as kube's `Recorder` names them.
fn event_object(
    event: &KubeEvent,
    regarding: &ObjectReference,
    at: jiff::Timestamp,
) -> EventObject {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let wanted = u64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or_default();
    let next = |last: u64| wanted.max(last + 1);
    let unique = match LAST.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| Some(next(l))) {
        Ok(last) | Err(last) => next(last),
    };
    let name = regarding
        .name
        .as_deref()
        .unwrap_or(crate::controller::FIELD_MANAGER);
    EventObject {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{unique:x}")),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        note: event.note.clone(),
        event_time: Some(MicroTime(at)),
        regarding: Some(regarding.clone()),
        related: event.secondary.clone(),
        reporting_controller: Some(crate::controller::FIELD_MANAGER.to_string()),
        reporting_instance: Some(crate::controller::FIELD_MANAGER.to_string()),
        type_: Some(
            match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        ..EventObject::default()
    }
}

#[cfg(test)]
mod tests;
