//! Events on the Agent, as `kubectl describe` shows them. Notes are cut to what the API server
//! accepts (1 KiB), so no Event is ever refused for its length. The decisions' Events and the
//! warnings about errors go through one `Sender` for the process (`sender`), so that their
//! repeats update one Event, as do the warnings about objects that cannot be decoded.

mod sender;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::{Resource, ResourceExt};
use tracing::warn;

pub use sender::{LIMIT, Sender};

use super::{Context, Error};
use crate::api::Agent;
use crate::supervise::classify::truncate_to;
use crate::supervise::{Event, Plan};

/// The API server refuses an Event whose note is longer than this.
const NOTE_LIMIT: usize = 1024;

/// Records the plan's Events on the Agent, in order, without holding up the reconcile (see
/// `Sender`).
pub fn publish(agent: &Agent, plan: &Plan, ctx: &Context) {
    let events = plan
        .events
        .iter()
        .map(|e| to_kube_event(e, agent.namespace()))
        .collect();
    ctx.events.send_later(agent.object_ref(&()), events);
}

/// A decision's Event as the API server takes it: the note cut to 1 KiB, the pod it concerns
/// as the related object.
fn to_kube_event(event: &Event, namespace: Option<String>) -> KubeEvent {
    let related = event
        .pod
        .as_ref()
        .map(|pod| related("v1", "Pod", pod, namespace));
    kube_event(event.reason.as_str(), event.warning(), &event.note, related)
}

/// An Event as the API server takes it: `reason` (also its action), Warning or Normal, the note
/// cut to 1 KiB, and the object it concerns besides the one it is about, if any.
pub(crate) fn kube_event(
    reason: &str,
    warning: bool,
    note: &str,
    related: Option<ObjectReference>,
) -> KubeEvent {
    KubeEvent {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_string(),
        note: Some(truncate_to(note.to_string(), NOTE_LIMIT)),
        action: reason.to_string(),
        secondary: related,
    }
}

/// A reference to `kind` `name` in `namespace`, as an Event's related object.
pub(crate) fn related(
    api_version: &str,
    kind: &str,
    name: &str,
    namespace: Option<String>,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.to_string()),
        name: Some(name.to_string()),
        namespace,
        ..ObjectReference::default()
    }
}

/// A request the API server refuses for good (an invalid pod template, a name taken by someone
/// else) will not succeed on retry: say so on the Agent, where `kubectl describe` shows it.
pub fn warn_user(agent: &Agent, error: &Error, ctx: &Context) {
    if error.is_permanent() {
        warn(agent, error, ctx);
    }
}

/// A Warning Event on the Agent naming `error`, sent without holding up the reconcile (see
/// `Sender`: a repeat updates the Event of the one before).
pub fn warn(agent: &Agent, error: &Error, ctx: &Context) {
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: error.reason().to_string(),
        note: Some(truncate_to(error.to_string(), NOTE_LIMIT)),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    ctx.events.send_later(agent.object_ref(&()), vec![event]);
}

/// An object of `kind` that cannot be decoded (a field written by a newer version, a value out
/// of range): logged and, on the object itself, a Warning Event (sent as the decisions' are, by
/// `sender`). It is skipped; nothing else waits for it.
pub fn report_invalid(sender: &Sender, kind: &str, invalid: &InvalidObject) {
    let meta = &invalid.metadata;
    let name = meta.name.clone().unwrap_or_default();
    warn!(
        kind,
        namespace = meta.namespace.as_deref().unwrap_or_default(),
        name,
        error = %invalid.error,
        "cannot decode the object: skipped until it changes"
    );
    let reference = ObjectReference {
        api_version: Some(format!("{}/v1alpha1", crate::api::GROUP)),
        kind: Some(kind.to_string()),
        name: Some(name),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    };
    let note = format!(
        "The operator cannot read this {kind} and leaves it alone until it is fixed: {}",
        invalid.error
    );
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: "InvalidObject".to_string(),
        note: Some(truncate_to(note, NOTE_LIMIT)),
        action: "Decode".to_string(),
        secondary: None,
    };
    sender.send_later(reference, vec![event]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervise::EventReason;

    #[test]
    fn no_note_exceeds_a_kibibyte_and_the_pod_is_the_related_object() {
        let event = Event {
            reason: EventReason::ShutdownRespected,
            note: format!(
                "Agent shut down, economic ({}): left alone",
                "é".repeat(900)
            ),
            pod: Some("a-3".to_string()),
        };
        let kube_event = to_kube_event(&event, Some("team".to_string()));
        let note = kube_event.note.unwrap();
        assert!(note.len() <= 1024, "{} bytes", note.len());
        assert!(note.starts_with("Agent shut down, economic (éé"));
        let related = kube_event.secondary.unwrap();
        assert_eq!(related.name.as_deref(), Some("a-3"));
        assert_eq!(related.namespace.as_deref(), Some("team"));
        assert_eq!(kube_event.type_, EventType::Normal);
    }
}
