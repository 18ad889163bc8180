//! The sender of the operator's Events, as Kubernetes' own recorder (client-go's
//! `EventCorrelator`) sends them: a repeat of a reason on one object updates the Event it made
//! before (its count, last time and note) instead of making another; each object has client-go's
//! spam filter (`LIMIT`); the Events that say why an agent stopped or changed course
//! (`NEVER_HELD`) are never held behind the others. A bounded queue, and nothing kept of an
//! object once idle (`objects`).
//!
//! The Events are written through the core `v1` API, as client-go's legacy recorder writes
//! them, with the fields of both APIs (`eventTime`, `series`, `reportingComponent` and
//! `count`, `firstTimestamp`, `lastTimestamp`): the API server lets a core `v1` update change
//! the message (`ValidateEventUpdate` checks only the legacy rules for it), where an
//! `events.k8s.io/v1` update may change nothing but the series (its note, related object and
//! times are immutable). So `kubectl describe` shows a repeat's newest note, with "(xN over M)",
//! and the pod of the newest crash as the related object. `events.k8s.io/v1` readers see the
//! same object: `series.count`, `deprecatedCount`.

mod objects;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event as EventObject, EventSeries, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event as KubeEvent, EventType};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::Semaphore;
use tracing::warn;

use objects::{Objects, Pending, Send, Step, WindowKey};

use crate::controller::FIELD_MANAGER;
use crate::controller::budget::BudgetConfig;

/// Each object's limit, client-go's spam filter (`defaultSpamBurst`, `defaultSpamQPS`): 25
/// Events at once, then one every five minutes. Every Event sent spends a token, an update of a
/// repeat too (client-go's filter runs on the correlated Event, after the repeat is counted, so
/// it holds back updates as well); a repeat held back here is not lost but counted, and told by
/// the next update. Higher lets a crash loop cost more requests before it is paced; lower makes a
/// busy agent's Events (a crash, its restart) wait sooner for the next token.
pub const LIMIT: BudgetConfig = BudgetConfig {
    rate: 1.0 / 300.0,
    burst: 25,
};

/// The reasons that say why an agent stopped, is held or changed course: never held behind the
/// repeats of others. Such an Event goes at once, whether or not the object has a token left
/// (it takes one if there is). Matched by name, so that an Event of a decision and a warning
/// about an error with the same reason are alike.
pub const NEVER_HELD: [&str; 6] = [
    "BudgetExhausted",
    "RestartLimitExceeded",
    "CircuitOpened",
    "ShutdownRespected",
    "ReplacementRefused",
    "CheckpointPoisoned",
];

/// How long after its last repeat a reason's Event is still updated by the next one: after it, a
/// repeat makes a new Event. The API server keeps an Event for an hour after its last write (its
/// default `--event-ttl`): while it is there, a repeat updates it, as client-go's legacy
/// recorder does (it updates an Event for as long as it remembers it; client-go's
/// `events.k8s.io` broadcaster ends a series after 6 minutes without a repeat, which would give
/// an agent crashing every ten minutes one Event a crash). Shorter makes a slow crash loop show
/// as many Events; longer only keeps memory longer (an Event gone meanwhile is made again: the
/// update answers 404).
pub const WINDOW: Duration = Duration::from_secs(60 * 60);

/// How many objects are remembered at most (their tokens, their reasons' Events), those with
/// Events waiting aside: past it, the ones idle longest are forgotten (a repeat of theirs makes
/// a new Event, and they have their whole burst again). client-go's recorder remembers 4,096 per
/// process, made for one component's objects; the operator of ten thousand Agents needs one an
/// Agent. Lower makes a large fleet's repeats new Events; higher costs about 200 bytes an
/// object.
pub const KEPT: usize = 16_384;

/// How many Events are being sent at once, at most.
const SENDING: usize = 32;

/// How many Events may wait to be sent, at most, across all objects: a first start of ten
/// thousand Agents fits; past it, an Event is dropped and counted
/// (`agent_supervisor_events_dropped_total`), never waited for. A repeat of an Event that waits
/// takes no room: it is counted into it.
const QUEUED: usize = 16_384;

/// Sends the operator's Events: one task per object with Events waiting, which sends each when
/// the object's limit has a token for it (an Event never held at once), the repeats that came
/// meanwhile counted into it.
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
            objects: Arc::new(Mutex::new(Objects::new(QUEUED, KEPT))),
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
            loop {
                let step = lock(&sender.objects).next(&key, Instant::now());
                match step {
                    Step::Send(send) => sender.send(&regarding, *send).await,
                    Step::Wait(at, wake) => {
                        tokio::select! {
                            () = tokio::time::sleep_until(at.into()) => {}
                            () = wake.notified() => {}
                        }
                    }
                    Step::Done => return,
                }
            }
        });
    }

    /// Makes the Event, or updates it with a repeat: if it is gone (deleted, or past the API
    /// server's TTL), it is made again under its name with the whole count, as client-go does.
    async fn send(&self, regarding: &ObjectReference, send: Send) {
        let Ok(_turn) = self.turns.acquire().await else {
            return;
        };
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api: kube::Api<EventObject> = kube::Api::namespaced(self.client.clone(), namespace);
        if send.update {
            let patch = Patch::Merge(update(&send));
            match api.patch(&send.name, &PatchParams::default(), &patch).await {
                Ok(_) => return,
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => {
                    warn!(reason = %send.event.reason, error = %e, "could not update an Event");
                    return;
                }
            }
        }
        let object = event_object(&send, regarding);
        if let Err(e) = api.create(&PostParams::default(), &object).await {
            warn!(reason = %send.event.reason, error = %e, "could not record an Event");
        }
    }
}

fn lock(objects: &Mutex<Objects>) -> std::sync::MutexGuard<'_, Objects> {
    objects
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a repeat changes of the Event: its counts, last times, note and related object.
fn update(send: &Send) -> serde_json::Value {
    let object = event_object(send, &ObjectReference::default());
    serde_json::json!({
        "count": object.count,
        "lastTimestamp": object.last_timestamp,
        "series": object.series,
        "message": object.message,
        "related": object.related,
    })
}

/// The Event object `send` makes about `regarding`: first seen at `send.first`, told
/// `send.count` times, the newest at `send.last` with its note. A series counts two or more:
/// an Event told once has none.
fn event_object(send: &Send, regarding: &ObjectReference) -> EventObject {
    let event = &send.event;
    let count = i32::try_from(send.count).unwrap_or(i32::MAX);
    EventObject {
        metadata: ObjectMeta {
            name: Some(send.name.clone()),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        involved_object: regarding.clone(),
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        message: event.note.clone(),
        type_: Some(
            match event.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        event_time: Some(MicroTime(send.first)),
        series: (count > 1).then_some(EventSeries {
            count: Some(count),
            last_observed_time: Some(MicroTime(send.last)),
        }),
        count: Some(count),
        first_timestamp: Some(Time(send.first)),
        last_timestamp: Some(Time(send.last)),
        related: event.secondary.clone(),
        reporting_component: Some(FIELD_MANAGER.to_string()),
        reporting_instance: Some(FIELD_MANAGER.to_string()),
        ..EventObject::default()
    }
}

#[cfg(test)]
mod tests;
