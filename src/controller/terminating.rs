//! Namespaces being deleted, as the refusals of pod creates in them tell.
//!
//! A namespace being deleted loses its pods before its Agents (the namespace controller deletes
//! each kind in turn), and nothing new can be made in it. Each Agent then saw its pod go,
//! recorded it, looked for it on the server and tried to make the next, refused, with an Event
//! refused too, and did so twice: seven requests an Agent, 7,000 in ten seconds for a namespace
//! of 1,000 Agents (bench-scale's converge, as its namespace went). Once a create is refused
//! because its namespace is being deleted, the Agents made there before it are left alone: they
//! go with their namespace, and a namespace being deleted is never kept.

use std::collections::HashMap;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};

/// How much older than a refusal an Agent must be to be left alone: the API server's clock and
/// this process's may differ by this much. (A namespace of the same name made again, once the
/// old one is gone, holds only Agents made after the refusal; one made within this of it is
/// reconciled as any, and meets a refusal of its own if its namespace is the old one.)
const SKEW: SignedDuration = SignedDuration::from_secs(2);

/// How long a refusal is remembered: a namespace being deleted with Agents left in it for longer
/// is stuck (a finalizer), and nothing can be made in it meanwhile; its Agents refused again
/// after this are remembered again.
const KEPT: SignedDuration = SignedDuration::from_secs(3600);

/// The last refusal seen in each namespace because it was being deleted.
#[derive(Default)]
pub struct Terminating(Mutex<HashMap<String, Timestamp>>);

impl Terminating {
    /// A create in `namespace` was refused at `at` because the namespace is being deleted.
    pub fn saw(&self, namespace: &str, at: Timestamp) {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|_, refused| at.duration_since(*refused) < KEPT);
        seen.insert(namespace.to_string(), at);
    }

    /// Whether an Agent created at `created` in `namespace` is in a namespace being deleted: it
    /// was made before a refusal seen there (by more than `SKEW`).
    pub fn holds(&self, namespace: &str, created: Option<Timestamp>) -> bool {
        let seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match (seen.get(namespace), created) {
            (Some(refused), Some(created)) => refused.duration_since(created) > SKEW,
            _ => false,
        }
    }
}

/// Whether `error` is the API server refusing to make something in a namespace being deleted.
pub fn refused_for_deletion(error: &kube::Error) -> bool {
    let kube::Error::Api(status) = error else {
        return false;
    };
    let cause = status
        .details
        .as_ref()
        .is_some_and(|d| d.causes.iter().any(|c| c.reason == NAMESPACE_TERMINATING));
    status.code == 403 && (cause || status.message.contains("because it is being terminated"))
}

/// The cause the API server gives for such a refusal (`metav1.NamespaceTerminatingCause`).
const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn agents_made_before_a_refusal_are_left_alone_and_later_ones_are_not() {
        let terminating = Terminating::default();
        assert!(!terminating.holds("a", Some(at(0))), "nothing refused yet");
        terminating.saw("a", at(100));
        assert!(terminating.holds("a", Some(at(0))));
        assert!(!terminating.holds("b", Some(at(0))), "another namespace");
        assert!(
            !terminating.holds("a", Some(at(99))),
            "made within the clocks' skew of the refusal"
        );
        assert!(
            !terminating.holds("a", Some(at(200))),
            "made after: a namespace of the same name made again"
        );
        assert!(!terminating.holds("a", None));
    }

    #[test]
    fn refusals_are_forgotten_in_time() {
        let terminating = Terminating::default();
        terminating.saw("a", at(0));
        terminating.saw("b", at(KEPT.as_secs() + 1));
        assert!(!terminating.holds("a", Some(at(-10))), "forgotten");
        assert!(terminating.holds("b", Some(at(0))));
    }

    fn refusal(code: u16, message: &str, cause: Option<&str>) -> kube::Error {
        let details = cause.map(|reason| kube::core::response::StatusDetails {
            causes: vec![kube::core::response::StatusCause {
                reason: reason.into(),
                message: message.into(),
                field: "metadata.namespace".into(),
            }],
            name: "a-2".into(),
            group: String::new(),
            kind: "pods".into(),
            uid: String::new(),
            retry_after_seconds: 0,
        });
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            details,
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn a_refusal_for_a_namespace_being_deleted_is_told_from_others() {
        let message = "pods \"a-2\" is forbidden: unable to create new content in namespace n \
                       because it is being terminated";
        assert!(refused_for_deletion(&refusal(
            403,
            message,
            Some("NamespaceTerminating")
        )));
        assert!(refused_for_deletion(&refusal(403, message, None)));
        assert!(!refused_for_deletion(&refusal(
            403,
            "violates PodSecurity \"restricted:latest\"",
            None
        )));
        assert!(!refused_for_deletion(&refusal(409, "already exists", None)));
    }
}
