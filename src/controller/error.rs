//! What can go wrong while reconciling, one type per step, and how soon to try again: one
//! model for the Agent, AgentGroup and RestartPolicy controllers alike.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::reflector::{Lookup, ObjectRef};

use crate::controller::metrics::{Metrics, ReasonLabel};

/// A failed reconcile: the step that failed, with its cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("gathering facts: {0}")]
    Gather(#[from] GatherError),
    #[error("acting: {0}")]
    Act(#[from] ActError),
    #[error("recording: {0}")]
    Record(#[from] RecordError),
}

/// Reading what a decision needs from the API server.
#[derive(Debug, thiserror::Error)]
#[error("reading {what}: {source}")]
pub struct GatherError {
    pub what: String,
    #[source]
    pub source: kube::Error,
}

/// Carrying out the plan's pod actions.
#[derive(Debug, thiserror::Error)]
pub enum ActError {
    #[error("creating {what}: {source}")]
    Create {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The dry run of a replacement pod was refused: the running pod is kept.
    #[error("the API server refuses the replacement pod {pod}: {source}")]
    Refused {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting pod {pod}: {source}")]
    Delete {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading {what}: {source}")]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0} exists but is not controlled by this Agent")]
    NameTaken(String),
}

/// Writing the Agent's status.
#[derive(Debug, thiserror::Error)]
#[error("writing status: {0}")]
pub struct RecordError(#[source] pub kube::Error);

impl Error {
    /// A short CamelCase name, for metric labels, logs and Event reasons.
    /// Every value `reason` gives, for metrics that start at zero.
    pub const REASONS: [&'static str; 7] = [
        "ReadFailed",
        "CreateFailed",
        "PodRefused",
        "DeleteFailed",
        "NameTaken",
        "StatusConflict",
        "StatusWriteFailed",
    ];

    pub fn reason(&self) -> &'static str {
        match self {
            Error::Gather(_) => "ReadFailed",
            Error::Act(ActError::Create { .. }) => "CreateFailed",
            Error::Act(ActError::Refused { .. }) => "PodRefused",
            Error::Act(ActError::Delete { .. }) => "DeleteFailed",
            Error::Act(ActError::Read { .. }) => "ReadFailed",
            Error::Act(ActError::NameTaken(_)) => "NameTaken",
            Error::Record(RecordError(e)) if is_conflict(e) => "StatusConflict",
            Error::Record(_) => "StatusWriteFailed",
        }
    }

    /// Someone else wrote first: the decision is made again on what they wrote. Expected, not
    /// a failure.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Record(RecordError(e)) if is_conflict(e))
    }

    /// The API server refused to make a pod (its dry run or its create): a quota, an admission
    /// policy, Pod Security, an invalid template. Said on the Agent, and tried again within
    /// `REFUSED_RETRY_MAX`.
    pub fn is_refused(&self) -> bool {
        match self {
            Error::Act(ActError::Create { source, .. } | ActError::Refused { source, .. }) => {
                matches!(source, kube::Error::Api(s) if matches!(s.code, 400 | 403 | 422))
            }
            _ => false,
        }
    }

    /// What the API server said, for a person: its message when it answered, else the error.
    pub fn server_message(&self) -> String {
        let source = match self {
            Error::Act(ActError::Create { source, .. } | ActError::Refused { source, .. }) => {
                source
            }
            _ => return self.to_string(),
        };
        match source {
            kube::Error::Api(s) => s.message.clone(),
            other => other.to_string(),
        }
    }

    /// A pod's create was refused because its namespace is being deleted.
    pub fn refused_for_deletion(&self) -> bool {
        matches!(self, Error::Act(ActError::Create { source, .. })
            if super::terminating::refused_for_deletion(source))
    }

    /// The API server refused the request itself: retrying the same will not help until
    /// something changes (the Agent, a namespace's policy, a quota).
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Act(ActError::NameTaken(_)) => true,
            Error::Act(ActError::Create { source, .. } | ActError::Refused { source, .. }) => {
                is_refusal(source)
            }
            _ => false,
        }
    }
}

/// How long a pod the API server refuses waits, at most, before it is tried again: SPEC
/// promises the restart within a minute of the refusal's end (a quota freed, a policy changed).
/// Longer breaks that promise; shorter costs a create request more often for as long as the
/// refusal lasts (one a minute per Agent at most, and the status is not written again).
pub const REFUSED_RETRY_MAX: Duration = Duration::from_secs(60);

/// Per-object retry delays: exponential from about a second to about five minutes, reset by a
/// reconcile that succeeds; a refused pod's to `REFUSED_RETRY_MAX`. Any other refusal waits
/// longest (the Agent's next change retries at once).
pub fn retry_delay(error: &Error, failures: u32) -> Duration {
    const FIRST: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(300);
    if error.is_conflict() {
        return Duration::from_millis(200);
    }
    let doublings = failures.saturating_sub(1).min(16);
    let backoff = FIRST.saturating_mul(1 << doublings);
    if error.is_refused() {
        return backoff.min(REFUSED_RETRY_MAX);
    }
    if error.is_permanent() {
        return MAX;
    }
    backoff.min(MAX)
}

/// Failed reconciles in a row, per object: the retry delay grows with them.
pub(crate) struct Retries<K: Lookup>(Mutex<HashMap<ObjectRef<K>, u32>>)
where
    K::DynamicType: Hash + Eq;

impl<K: Lookup> Default for Retries<K>
where
    K::DynamicType: Hash + Eq,
{
    fn default() -> Self {
        Retries(Mutex::default())
    }
}

impl<K: Lookup> Retries<K>
where
    K::DynamicType: Hash + Eq,
{
    fn failed(&self, object: ObjectRef<K>) -> u32 {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = map.entry(object).or_default();
        *count = count.saturating_add(1);
        *count
    }

    pub(crate) fn succeeded(&self, object: &ObjectRef<K>) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(object);
    }
}

/// What each controller does with a failed reconcile of `object` (a `kind`): counts it by
/// reason, logs it (a conflict only at debug: it is expected), and retries it after
/// `retry_delay`.
pub(crate) fn retry<K: Lookup>(
    kind: &str,
    object: ObjectRef<K>,
    error: &Error,
    retries: &Retries<K>,
    metrics: &Metrics,
) -> Action
where
    K::DynamicType: Hash + Eq,
{
    let namespace = object.namespace.clone().unwrap_or_default();
    let name = object.name.clone();
    let failures = if error.is_conflict() {
        0
    } else {
        retries.failed(object)
    };
    let retry = retry_delay(error, failures);
    let reason = ReasonLabel {
        reason: error.reason().to_string(),
    };
    metrics.reconcile_errors.get_or_create(&reason).inc();
    if error.is_conflict() {
        tracing::debug!(kind, namespace, name, error = %error, "conflict: deciding again");
    } else {
        tracing::warn!(kind, namespace, name, reason = error.reason(), failures, error = %error, retry_in = ?retry, "reconcile failed");
    }
    Action::requeue(retry)
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Invalid (400, 422) or forbidden (403) for good. A 403 for an exceeded quota is not: the
/// quota frees up when other pods end.
fn is_refusal(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) if s.code == 403 => !s.message.contains("exceeded quota"),
        kube::Error::Api(s) => s.code == 400 || s.code == 422,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.to_string(),
            ..kube::core::Status::default()
        }))
    }

    fn create(source: kube::Error) -> Error {
        Error::Act(ActError::Create {
            what: "pod a-1".into(),
            source,
        })
    }

    #[test]
    fn retries_back_off_per_object_from_a_second_to_five_minutes() {
        let transient = create(api(500, "etcd timeout"));
        let delays: Vec<u64> = [1, 2, 3, 4, 9, 10, 100]
            .map(|n| retry_delay(&transient, n).as_secs())
            .into();
        assert_eq!(delays, [1, 2, 4, 8, 256, 300, 300]);
    }

    #[test]
    fn a_quota_refusal_is_retried_and_a_policy_refusal_waits() {
        let quota = create(api(
            403,
            "pods \"a-2\" is forbidden: exceeded quota: pods, requested: pods=1",
        ));
        assert!(!quota.is_permanent());
        assert_eq!(retry_delay(&quota, 1), Duration::from_secs(1));
        let security = create(api(403, "violates PodSecurity \"restricted:latest\""));
        assert!(security.is_permanent());
        // A refused pod is tried again within a minute, however long the refusal lasts.
        assert_eq!(retry_delay(&security, 1), Duration::from_secs(1));
        assert_eq!(retry_delay(&security, 20), REFUSED_RETRY_MAX);
        assert_eq!(retry_delay(&quota, 20), REFUSED_RETRY_MAX);
        let name_taken = Error::Act(ActError::NameTaken("Pod a-2".into()));
        assert_eq!(retry_delay(&name_taken, 1), Duration::from_secs(300));
        assert!(create(api(422, "spec.containers: Required value")).is_permanent());
    }

    #[test]
    fn every_reason_is_listed_and_every_listed_reason_given() {
        let e = || api(500, "etcd timeout");
        let read = || GatherError {
            what: "Agent a".into(),
            source: e(),
        };
        let errors = [
            Error::Gather(read()),
            create(e()),
            Error::Act(ActError::Refused {
                pod: "a-2".into(),
                source: e(),
            }),
            Error::Act(ActError::Delete {
                pod: "a-1".into(),
                source: e(),
            }),
            Error::Act(ActError::Read {
                what: "pod a-1".into(),
                source: e(),
            }),
            Error::Act(ActError::NameTaken("pod a-1".into())),
            Error::Record(RecordError(api(409, "the object has been modified"))),
            Error::Record(RecordError(e())),
        ];
        let mut given: Vec<&str> = errors.iter().map(Error::reason).collect();
        given.sort_unstable();
        given.dedup();
        let mut listed = Error::REASONS.to_vec();
        listed.sort_unstable();
        assert_eq!(given, listed);
    }

    #[test]
    fn conflicts_are_expected_and_retried_at_once() {
        let conflict = Error::Record(RecordError(api(409, "the object has been modified")));
        assert!(conflict.is_conflict());
        assert_eq!(conflict.reason(), "StatusConflict");
        assert!(retry_delay(&conflict, 7) < Duration::from_secs(1));
    }
}
