//! The sender of the decisions' Events: an object's first at once, the ones that follow
//! within a window merged, a bounded queue, and nothing kept once a window closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as EventObject;
use kube::api::PostParams;
use kube::runtime::events::{Event as KubeEvent, EventType};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Semaphore;
use tracing::warn;

use super::NOTE_LIMIT;

/// How long after an Event about an agent its next ones wait, to be sent together. An agent
/// that crashes now and then has each Event sent at once; one crashing every few seconds has
/// its Events merged, a few per request (see `merge`), instead of one request each while the
/// API server is busiest. The status records every crash at once either way.
pub const WINDOW: Duration = Duration::from_secs(10);

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
}

impl Sender {
    /// A sender holding an object's Events for `window` after one is sent (`WINDOW` outside
    /// tests).
    pub fn new(client: kube::Client, window: Duration, dropped: Counter) -> Self {
        Sender {
            client,
            window,
            windows: Arc::new(Mutex::new(Windows::new(QUEUED))),
            turns: Arc::new(Semaphore::new(SENDING)),
            dropped,
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
                let sent = batch.len();
                sender.send_all(&regarding, merge(batch)).await;
                lock(&sender.windows).sent(sent);
                tokio::time::sleep(sender.window).await;
                match lock(&sender.windows).take_or_close(&key) {
                    Some(next) => batch = next,
                    None => return,
                }
            }
        });
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

/// Events to send together, in order: each run of Events of one reason and type becomes one
/// Event whose note joins theirs (a person reads every one), at the time of the first, as long
/// as the note stays within what the API server accepts; beyond that a new Event begins.
fn merge(events: Vec<Pending>) -> Vec<Pending> {
    let mut merged: Vec<Pending> = Vec::with_capacity(events.len());
    for next in events {
        if let Some(last) = merged.last_mut()
            && last.event.reason == next.event.reason
            && last.event.type_ == next.event.type_
        {
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
mod tests {
    use super::*;
    use crate::controller::events::{kube_event, related};

    #[test]
    fn events_sent_at_once_about_one_agent_have_names_of_their_own() {
        let regarding = related("supervisor.dev/v1alpha1", "Agent", "a", Some("team".into()));
        let event = kube_event("Crashed", true, "exit 1", None);
        let now = jiff::Timestamp::now();
        let names: std::collections::HashSet<String> = (0..1000)
            .map(|_| event_object(&event, &regarding, now).metadata.name.unwrap())
            .collect();
        assert_eq!(names.len(), 1000);
        let object = event_object(&event, &regarding, now);
        assert_eq!(object.type_.as_deref(), Some("Warning"));
        assert_eq!(object.reason.as_deref(), Some("Crashed"));
        assert_eq!(object.regarding, Some(regarding));
        assert!(object.metadata.name.unwrap().starts_with("a."));
    }

    fn pending(reason: &str, note: &str, pod: &str, second: i64) -> Pending {
        let related = related("v1", "Pod", pod, Some("team".into()));
        Pending {
            at: jiff::Timestamp::from_second(second).unwrap(),
            event: kube_event(reason, reason == "Crashed", note, Some(related)),
        }
    }

    fn key(uid: &str) -> WindowKey {
        WindowKey {
            namespace: Some("team".into()),
            name: Some("a".into()),
            uid: Some(uid.into()),
        }
    }

    #[test]
    fn a_run_of_one_reason_becomes_one_event_that_tells_every_one() {
        let merged = merge(vec![
            pending("Crashed", "Pod a-1 failed", "a-1", 10),
            pending("Crashed", "Pod a-2 failed", "a-2", 12),
            pending("CircuitOpened", "open", "a-2", 12),
            pending("Crashed", "Pod a-3 failed", "a-3", 14),
        ]);
        let told: Vec<(&str, &str, i64, &str)> = merged
            .iter()
            .map(|p| {
                (
                    p.event.reason.as_str(),
                    p.event.note.as_deref().unwrap(),
                    p.at.as_second(),
                    p.event.secondary.as_ref().unwrap().name.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            told,
            [
                ("Crashed", "Pod a-1 failed | Pod a-2 failed", 10, "a-2"),
                ("CircuitOpened", "open", 12, "a-2"),
                ("Crashed", "Pod a-3 failed", 14, "a-3"),
            ]
        );
    }

    #[test]
    fn a_window_keeps_what_comes_while_it_is_open_and_closes_when_nothing_came() {
        let mut windows = Windows::new(100);
        // A decision with no Events (what every caller hands over) opens no window.
        let (sent, dropped) = windows.offer(&key("u1"), []);
        assert!(sent.is_none() && dropped == 0);
        assert!(windows.open.is_empty());
        let (sent, dropped) = windows.offer(&key("u1"), [pending("Crashed", "1", "a-1", 1)]);
        assert_eq!(sent.map(|s| s.len()), Some(1), "the first is sent at once");
        assert_eq!(dropped, 0);
        for n in ["2", "3"] {
            let (sent, _) = windows.offer(&key("u1"), [pending("Crashed", n, "a-2", 2)]);
            assert!(sent.is_none(), "kept for the window's end");
        }
        // A namesake created since is another object, with a window of its own.
        let (sent, _) = windows.offer(&key("u2"), [pending("Crashed", "x", "a-1", 3)]);
        assert!(sent.is_some());
        let next = windows.take_or_close(&key("u1")).expect("what waited");
        let notes: Vec<_> = next.iter().map(|p| p.event.note.clone().unwrap()).collect();
        assert_eq!(notes, ["2", "3"]);
        assert!(windows.take_or_close(&key("u1")).is_none(), "nothing came");
        assert!(
            !windows.open.contains_key(&key("u1")),
            "closed: nothing kept"
        );
        let (sent, _) = windows.offer(&key("u1"), [pending("Crashed", "4", "a-4", 30)]);
        assert!(sent.is_some(), "closed: the next is sent at once");
    }

    #[test]
    fn events_past_the_queue_are_dropped_and_counted_until_some_are_sent() {
        let mut windows = Windows::new(3);
        let (sent, dropped) = windows.offer(
            &key("u1"),
            [
                pending("Crashed", "1", "a-1", 1),
                pending("Restarted", "2", "a-2", 1),
            ],
        );
        assert_eq!((sent.map(|s| s.len()), dropped), (Some(2), 0));
        let (sent, dropped) = windows.offer(
            &key("u2"),
            [
                pending("Crashed", "x", "b-1", 1),
                pending("Crashed", "y", "b-2", 1),
            ],
        );
        assert_eq!(
            (sent.map(|s| s.len()), dropped),
            (Some(1), 1),
            "one fits, one over"
        );
        let (sent, dropped) = windows.offer(&key("u3"), [pending("Crashed", "z", "c-1", 1)]);
        assert!(sent.is_none(), "nothing accepted opens no window");
        assert_eq!(dropped, 1);
        assert!(!windows.open.contains_key(&key("u3")));
        // Once the first two are sent, there is room again.
        windows.sent(2);
        let (sent, dropped) = windows.offer(&key("u3"), [pending("Crashed", "z", "c-1", 2)]);
        assert_eq!((sent.map(|s| s.len()), dropped), (Some(1), 0));
    }

    proptest::proptest! {
        #[test]
        fn merging_loses_no_note_changes_no_order_and_stays_within_the_limit(
            events in proptest::collection::vec((0..3usize, "[a-z ]{0,400}"), 0..40)
        ) {
            let reasons = ["Crashed", "Restarted", "CircuitOpened"];
            let input: Vec<Pending> = events
                .iter()
                .enumerate()
                .map(|(i, (r, note))| pending(reasons[*r], note, "a-1", i as i64))
                .collect();
            let merged = merge(input);
            proptest::prop_assert!(merged.len() <= events.len());
            let mut told = Vec::new();
            for p in &merged {
                let note = p.event.note.as_deref().unwrap();
                proptest::prop_assert!(note.len() <= NOTE_LIMIT);
                for part in note.split(JOIN) {
                    told.push((p.event.reason.clone(), part.to_string()));
                }
            }
            let want: Vec<(String, String)> = events
                .iter()
                .map(|(r, note)| (reasons[*r].to_string(), note.clone()))
                .collect();
            proptest::prop_assert_eq!(told, want);
            // Merged only within a run of one reason: neighbours differ, or the note was full.
            for pair in merged.windows(2) {
                let (a, b) = (&pair[0].event, &pair[1].event);
                let full = a.note.as_ref().unwrap().len() + JOIN.len() + b.note.as_ref().unwrap().len() > NOTE_LIMIT;
                proptest::prop_assert!(a.reason != b.reason || full);
            }
        }
    }
}
