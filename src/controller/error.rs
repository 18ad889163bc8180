//! What can go wrong while reconciling, sorted into "retry soon" and "wait".

use std::time::Duration;

/// A failed reconcile step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {what}: {source}")]
    Read {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("creating {what}: {source}")]
    Create {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting pod {pod}: {source}")]
    Delete {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0} exists but is not controlled by this Agent")]
    NameTaken(String),
    #[error("writing status: {0}")]
    Status(#[source] kube::Error),
}

impl Error {
    /// A short CamelCase name, for metric labels and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Read { .. } => "ReadFailed",
            Error::Create { .. } => "CreateFailed",
            Error::Delete { .. } => "DeleteFailed",
            Error::NameTaken(_) => "NameTaken",
            Error::Status(e) if is_conflict(e) => "StatusConflict",
            Error::Status(_) => "StatusWriteFailed",
        }
    }

    /// The API server refused the request itself: retrying the same will not help.
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::NameTaken(_) => true,
            Error::Create { source, .. } => is_invalid(source),
            _ => false,
        }
    }

    /// How soon to try again: at once after a conflict (someone else wrote first and the cache
    /// will catch up), later when the server refuses the request itself.
    pub fn retry_after(&self) -> Duration {
        match self {
            Error::Status(e) if is_conflict(e) => Duration::from_millis(500),
            e if e.is_permanent() => Duration::from_secs(60),
            _ => Duration::from_secs(5),
        }
    }
}

pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn is_invalid(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422 || s.code == 403 || s.code == 400)
}
