//! The sender of the decisions' Events, as Kubernetes' own recorder sends them: an object's
//! Events go at once while it has tokens (a per-object limit stops floods), and those that wait
//! for one are aggregated, every repeat of a reason becoming one Event with a count. A bounded
//! queue, and nothing kept of an object once it has no Event waiting and its tokens are back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as EventObject;
use kube::api::PostParams;
use kube::runtime::events::{Event as KubeEvent, EventType};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Semaphore;
use tracing::warn;

use super::NOTE_LIMIT;
use crate::controller::budget::{Bucket, BudgetConfig};

/// Each object's Events limit: `burst` at once (a crash, its restart and the next crash's are
/// sent as they happen), then one every `1 / rate` seconds (a minute), like client-go's spam
/// filter (25 at once, then one every five minutes), made smaller so that a crash loop's Events
/// cost a few requests a minute, not two a restart. Higher makes a storm cost more requests;
/// lower makes a quiet agent's Events wait more often.
pub const LIMIT: BudgetConfig = BudgetConfig {
    rate: 1.0 / 60.0,
    burst: 4,
};

/// How many Events are being sent at once, at most.
const SENDING: usize = 32;

/// How many Events may wait to be sent, at most, across all objects: a first start of ten
/// thousand Agents fits; past it, an Event is dropped and counted
/// (`agent_supervisor_events_dropped_total`), never waited for.
const QUEUED: usize = 16_384;

/// Sends the decisions' Events: one task per object with Events waiting, which sends each when
/// the object's limit has a token for it, the Events that waited meanwhile merged by reason.
/// (kube's `Recorder` keeps every Event it sent for six minutes and sends a request for each
/// repeat; it stays for warnings, which are rare.)
#[derive(Clone)]
pub struct Sender {
    client: kube::Client,
    limit: BudgetConfig,
    objects: Arc<Mutex<Objects>>,
    turns: Arc<Semaphore>,
    dropped: Counter,
}

impl Sender {
    /// A sender limiting each object's Events to `limit` (`LIMIT` outside tests).
    pub fn new(client: kube::Client, limit: BudgetConfig, dropped: Counter) -> Self {
        Sender {
            client,
            limit,
            objects: Arc::new(Mutex::new(Objects::new(QUEUED))),
            turns: Arc::new(Semaphore::new(SENDING)),
            dropped,
        }
    }

    /// Sends `events` about `regarding` as the object's limit allows, without waiting (none:
    /// nothing happens). An Event lost with the process is only an Event: the status holds the
    /// record.
    pub fn send_later(&self, regarding: ObjectReference, events: Vec<KubeEvent>) {
        let now = jiff::Timestamp::now();
        let pending = events.into_iter().map(|event| Pending::new(event, now));
        let key = WindowKey::of(&regarding);
        let (start, dropped) = lock(&self.objects).offer(&key, pending, self.limit, Instant::now());
        if dropped > 0 {
            self.dropped.inc_by(dropped as u64);
            warn!(
                dropped,
                "too many Events waiting to be sent: dropped (the status records what they told)"
            );
        }
        if !start {
            return;
        }
        let sender = self.clone();
        tokio::spawn(async move {
            // A token is reserved while an Event waits; the Event is chosen once it is there, so
            // the repeats that came meanwhile are merged into it.
            loop {
                let reserved = lock(&sender.objects).reserve(&key, Instant::now());
                let Some(at) = reserved else {
                    return;
                };
                tokio::time::sleep_until(at.into()).await;
                let Some(next) = lock(&sender.objects).take_one(&key) else {
                    continue;
                };
                sender.send(&regarding, next).await;
            }
        });
    }

    async fn send(&self, regarding: &ObjectReference, pending: Pending) {
        let Ok(_turn) = self.turns.acquire().await else {
            return;
        };
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: kube::Api<EventObject> = kube::Api::namespaced(self.client.clone(), namespace);
        let object = event_object(&pending, regarding);
        if let Err(e) = api.create(&PostParams::default(), &object).await {
            warn!(reason = %pending.event.reason, error = %e, "could not record an Event");
        }
    }
}

fn lock(objects: &Mutex<Objects>) -> std::sync::MutexGuard<'_, Objects> {
    objects
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An Event waiting to be sent: when it first and last happened, and how many times.
struct Pending {
    at: jiff::Timestamp,
    last: jiff::Timestamp,
    count: u32,
    /// Its note could take no more: the repeats after are only counted.
    full: bool,
    event: KubeEvent,
}

impl Pending {
    fn new(event: KubeEvent, at: jiff::Timestamp) -> Self {
        Pending {
            at,
            last: at,
            count: 1,
            full: false,
            event,
        }
    }
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

/// Each object's Events waiting and its limit, and how many Events are accepted and not sent
/// yet (bounded).
struct Objects {
    by_key: HashMap<WindowKey, Object>,
    queued: usize,
    capacity: usize,
    /// Offers since the last sweep.
    since_sweep: usize,
}

struct Object {
    waiting: Vec<Pending>,
    limit: Bucket,
    /// A task sends its Events.
    sending: bool,
}

impl Objects {
    fn new(capacity: usize) -> Self {
        Objects {
            by_key: HashMap::new(),
            queued: 0,
            capacity,
            since_sweep: 0,
        }
    }

    /// Events about `key`, kept to be sent; with whether a task must start to send them, and
    /// how many were dropped, the queue being full.
    fn offer(
        &mut self,
        key: &WindowKey,
        events: impl IntoIterator<Item = Pending>,
        limit: BudgetConfig,
        now: Instant,
    ) -> (bool, usize) {
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
            return (false, dropped);
        }
        self.sweep(now);
        let object = self.by_key.entry(key.clone()).or_insert_with(|| Object {
            waiting: Vec::new(),
            limit: Bucket::new(limit, now),
            sending: false,
        });
        object.waiting.extend(accepted);
        let start = !std::mem::replace(&mut object.sending, true);
        (start, dropped)
    }

    /// A token for `key`'s next Event: when it is there; `None` when none waits (its task
    /// ends).
    fn reserve(&mut self, key: &WindowKey, now: Instant) -> Option<Instant> {
        let object = self.by_key.get_mut(key)?;
        if object.waiting.is_empty() {
            object.sending = false;
            return None;
        }
        Some(object.limit.reserve(1, now))
    }

    /// The Events waiting about `key`, merged (`merge`): the first of them, to be sent now.
    fn take_one(&mut self, key: &WindowKey) -> Option<Pending> {
        let object = self.by_key.get_mut(key)?;
        let mut merged = merge(std::mem::take(&mut object.waiting));
        if merged.is_empty() {
            return None;
        }
        let first = merged.remove(0);
        let sent = first.count as usize;
        object.waiting = merged;
        self.queued = self.queued.saturating_sub(sent);
        Some(first)
    }

    /// Now and then, forgets the objects with nothing waiting whose limit is whole again:
    /// remembering them would change nothing.
    fn sweep(&mut self, now: Instant) {
        self.since_sweep += 1;
        if self.since_sweep <= self.by_key.len().max(1024) {
            return;
        }
        self.since_sweep = 0;
        self.by_key
            .retain(|_, o| o.sending || !o.waiting.is_empty() || !o.limit.is_full(now));
    }
}

/// Joins the notes of Events merged into one.
const JOIN: &str = " | ";

/// Events to send together: the Events of one reason and type become one Event with their count
/// (its series), at the time of the first, whose note joins theirs in order (a person reads
/// every one) as long as it stays within what the API server accepts. An agent that backs off
/// between crashes alternates `Crashed` and its restarts: each reason is still told once.
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
            if !last.full && so_far.len() + JOIN.len() + note.len() <= NOTE_LIMIT {
                last.event.note = Some(format!("{so_far}{JOIN}{note}"));
            } else {
                last.full = true;
            }
            // Beyond what a note holds, a repeat is still counted: the note keeps the first.
            last.event.secondary = next.event.secondary;
            last.count += next.count;
            last.last = next.last;
            continue;
        }
        merged.push(next);
    }
    merged
}

/// The Event object for `pending` about `regarding`, with its count when it happened more than
/// once: named after the object and the time of sending (made unique within this process), as kube's `Recorder` names them.
fn event_object(pending: &Pending, regarding: &ObjectReference) -> EventObject {
    use k8s_openapi::api::events::v1::EventSeries;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    let event = &pending.event;
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
        event_time: Some(MicroTime(pending.at)),
        // A series counts two or more: one Event told once has none.
        series: (pending.count > 1).then(|| EventSeries {
            count: i32::try_from(pending.count).unwrap_or(i32::MAX),
            last_observed_time: MicroTime(pending.last),
        }),
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
