//! What the sender remembers of each object, and what it sends next: the object's Events
//! waiting for a token, its tokens, and the Event each of its reasons made last (its series), so
//! that a repeat updates that Event. Pure: the caller passes the time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::Event as KubeEvent;
use tokio::sync::Notify;

use super::{NEVER_HELD, WINDOW};
use crate::controller::budget::{Bucket, BudgetConfig};

/// An Event waiting to be sent: when it first and last happened, how many times, and the newest
/// note and related object.
pub struct Pending {
    pub at: jiff::Timestamp,
    pub last: jiff::Timestamp,
    pub count: u32,
    pub event: KubeEvent,
}

impl Pending {
    pub fn new(event: KubeEvent, at: jiff::Timestamp) -> Self {
        Pending {
            at,
            last: at,
            count: 1,
            event,
        }
    }

    /// Whether `other` is a repeat of this one: the same reason and type.
    fn repeats(&self, other: &KubeEvent) -> bool {
        self.event.reason == other.reason && self.event.type_ == other.type_
    }

    /// Counts `next`, a repeat that came after: its note and related object are the newest.
    fn absorb(&mut self, next: Pending) {
        self.count += next.count;
        self.last = next.last;
        self.event.note = next.event.note;
        self.event.secondary = next.event.secondary;
    }

    fn is_never_held(&self) -> bool {
        NEVER_HELD.contains(&self.event.reason.as_str())
    }
}

/// What to send: the Event `name`, told `count` times since `first` (the newest at `last`, with
/// its note), made anew or updated (`update`: a repeat of the Event sent before under that name;
/// if it is gone, it is made again with the whole count).
pub struct Send {
    pub name: String,
    pub update: bool,
    pub count: u32,
    pub first: jiff::Timestamp,
    pub last: jiff::Timestamp,
    pub event: KubeEvent,
}

/// What an object's task does next.
pub enum Step {
    Send(Box<Send>),
    /// Wait until the object's next token, or until woken (an Event never held came).
    Wait(Instant, Arc<Notify>),
    /// Nothing waits: the task ends.
    Done,
}

/// The object an Event is about: a namesake created after it is another object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WindowKey {
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub uid: Option<String>,
}

impl WindowKey {
    pub fn of(regarding: &ObjectReference) -> Self {
        WindowKey {
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone(),
            uid: regarding.uid.clone(),
        }
    }
}

/// The Event a reason of an object made last, and what it told so far.
struct Series {
    reason: String,
    warning: bool,
    name: String,
    count: u32,
    first: jiff::Timestamp,
    /// When it was last sent.
    sent: Instant,
}

pub struct Object {
    /// At most one a reason and type: a repeat that comes while one waits is counted into it.
    waiting: Vec<Pending>,
    limit: Bucket,
    /// A task sends its Events.
    sending: bool,
    wake: Arc<Notify>,
    series: Vec<Series>,
    /// When it was last offered an Event or sent one.
    used: Instant,
}

impl Object {
    /// Forgetting it would change nothing: nothing waits, every token is back, and none of its
    /// Events would be updated by a repeat.
    fn is_spent(&mut self, now: Instant) -> bool {
        !self.sending
            && self.waiting.is_empty()
            && self.limit.is_full(now)
            && self.series.iter().all(|s| now >= s.sent + WINDOW)
    }

    /// `pending`, sent now: an update of its reason's Event while that is within `WINDOW` of
    /// its last send, else a new Event named after the object.
    fn record(&mut self, pending: Pending, object: &str, now: Instant) -> Send {
        let warning = pending.event.type_ == kube::runtime::events::EventType::Warning;
        let same = |s: &Series| s.reason == pending.event.reason && s.warning == warning;
        self.series.retain(|s| now < s.sent + WINDOW || !same(s));
        let (update, series) = match self.series.iter_mut().find(|s| same(s)) {
            Some(series) => {
                series.count = series.count.saturating_add(pending.count);
                (true, series)
            }
            None => {
                self.series.push(Series {
                    reason: pending.event.reason.clone(),
                    warning,
                    name: unique_name(object),
                    count: pending.count,
                    first: pending.at,
                    sent: now,
                });
                (false, self.series.last_mut().expect("just pushed"))
            }
        };
        series.sent = now;
        Send {
            name: series.name.clone(),
            update,
            count: series.count,
            first: series.first,
            last: pending.last,
            event: pending.event,
        }
    }
}

/// Every object's Events waiting, tokens and series; with how many Events wait, bounded.
pub struct Objects {
    pub(super) by_key: HashMap<WindowKey, Object>,
    pub(super) queued: usize,
    capacity: usize,
    kept: usize,
    /// Offers since the last sweep.
    since_sweep: usize,
}

impl Objects {
    /// At most `capacity` Events waiting, and `kept` objects remembered besides those with
    /// Events waiting.
    pub fn new(capacity: usize, kept: usize) -> Self {
        Objects {
            by_key: HashMap::new(),
            queued: 0,
            capacity,
            kept,
            since_sweep: 0,
        }
    }

    /// Events about `key`, kept to be sent; with whether a task must start to send them, and
    /// how many were dropped, the queue being full. A repeat of one waiting is counted into it;
    /// an Event never held wakes the object's task.
    pub fn offer(
        &mut self,
        key: &WindowKey,
        events: impl IntoIterator<Item = Pending>,
        limit: BudgetConfig,
        now: Instant,
    ) -> (bool, usize) {
        let mut events = events.into_iter().peekable();
        if events.peek().is_none() {
            return (false, 0);
        }
        self.sweep(now);
        if !self.by_key.contains_key(key) && self.by_key.len() >= self.kept {
            self.forget_idle(now);
        }
        let object = self.by_key.entry(key.clone()).or_insert_with(|| Object {
            waiting: Vec::new(),
            limit: Bucket::new(limit, now),
            sending: false,
            wake: Arc::new(Notify::new()),
            series: Vec::new(),
            used: now,
        });
        object.used = now;
        let (mut dropped, mut urgent) = (0, false);
        for event in events {
            urgent |= event.is_never_held();
            if let Some(waiting) = object.waiting.iter_mut().find(|w| w.repeats(&event.event)) {
                waiting.absorb(event);
            } else if self.queued < self.capacity {
                self.queued += 1;
                object.waiting.push(event);
            } else {
                dropped += 1;
            }
        }
        if urgent && object.sending {
            object.wake.notify_one();
        }
        if object.waiting.is_empty() {
            // Every one dropped: nothing to send, and an object new here is not remembered.
            if !object.sending && object.series.is_empty() && object.limit.is_full(now) {
                self.by_key.remove(key);
            }
            return (false, dropped);
        }
        let start = !std::mem::replace(&mut object.sending, true);
        (start, dropped)
    }

    /// What `key`'s task does next: send an Event never held at once; else the first waiting,
    /// if the object has a token; else wait for one.
    pub fn next(&mut self, key: &WindowKey, now: Instant) -> Step {
        let Some(object) = self.by_key.get_mut(key) else {
            return Step::Done;
        };
        if object.waiting.is_empty() {
            object.sending = false;
            return Step::Done;
        }
        let index = match object.waiting.iter().position(Pending::is_never_held) {
            Some(index) => {
                // It takes a token if there is one, and goes without one otherwise.
                object.limit.take(now);
                index
            }
            None if object.limit.take(now) => 0,
            None => return Step::Wait(object.limit.next_token(now), object.wake.clone()),
        };
        let pending = object.waiting.remove(index);
        self.queued -= 1;
        object.used = now;
        let name = key
            .name
            .as_deref()
            .unwrap_or(crate::controller::FIELD_MANAGER);
        Step::Send(Box::new(object.record(pending, name, now)))
    }

    /// Now and then, forgets the objects whose memory would change nothing (`Object::is_spent`).
    fn sweep(&mut self, now: Instant) {
        self.since_sweep += 1;
        if self.since_sweep <= self.by_key.len().max(1024) {
            return;
        }
        self.since_sweep = 0;
        self.by_key.retain(|_, o| !o.is_spent(now));
    }

    /// Makes room for a new object: forgets the idle objects (nothing waiting) used longest
    /// ago, an eighth of those remembered, so that this happens once in many new objects.
    fn forget_idle(&mut self, now: Instant) {
        self.by_key.retain(|_, o| !o.is_spent(now));
        let mut idle: Vec<(Instant, WindowKey)> = self
            .by_key
            .iter()
            .filter(|(_, o)| !o.sending && o.waiting.is_empty())
            .map(|(k, o)| (o.used, k.clone()))
            .collect();
        let excess = (self.by_key.len() + 1).saturating_sub(self.kept - self.kept / 8);
        if excess == 0 {
            return;
        }
        idle.sort_unstable_by_key(|(used, _)| *used);
        for (_, key) in idle.into_iter().take(excess) {
            self.by_key.remove(&key);
        }
    }
}

/// A name for a new Event about `object`: the object's name and the time, made unique within
/// the process, as client-go names them.
pub(super) fn unique_name(object: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let wanted = u64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or_default();
    let next = |last: u64| wanted.max(last + 1);
    let unique = match LAST.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| Some(next(l))) {
        Ok(last) | Err(last) => next(last),
    };
    format!("{object}.{unique:x}")
}
