//! Classification: what a pod's observed state means — still starting, running (and until when
//! it is trusted), or ended with a failure reason, per SPEC.md's table.

use jiff::{SignedDuration, Timestamp};

use super::input::{ContainerPhase, LeaseFacts, PodFacts, PodPhase, Termination};
use super::last_words::{RetryAfter, ShutdownRequest};
use crate::api::{FailureReason, Heartbeat};

/// Termination messages are cut to this many bytes before they are stored.
pub const MESSAGE_LIMIT: usize = 1024;
/// A shutdown's reason is cut to this many bytes (the schema allows 256 characters).
pub const REASON_LIMIT: usize = 256;

/// What a pod's state means for supervision.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Not running yet; it fails with `StartupTimeout` at `deadline`.
    Starting { deadline: Timestamp },
    /// Running since `since`. With a heartbeat, it must prove itself again by `heartbeat_deadline`.
    Running {
        since: Timestamp,
        ready: bool,
        heartbeat_deadline: Option<Timestamp>,
    },
    /// The attempt is over. `kill`: the pod is still live and must be deleted (hung, or never
    /// started).
    Ended { ending: Ending, kill: bool },
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    pub reason: FailureReason,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// At most `MESSAGE_LIMIT` bytes.
    pub message: Option<String>,
    pub container: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// A shutdown the agent asked for through its termination message.
    pub shutdown: Option<ShutdownRequest>,
    /// When the agent asked to be restarted, through its termination message.
    pub retry_after: Option<RetryAfter>,
    /// The agent said, through its termination message, that its failure is permanent: no
    /// restart (its reason, if it gave one, is the ending's message).
    pub permanent: bool,
    /// The progress and checkpoint the agent reported in its termination message (boxed: most
    /// endings report none, and a verdict stays small).
    pub reported: Box<super::progress::Reported>,
}

/// What the heartbeat check needs.
#[derive(Clone, Copy, Debug)]
pub struct Liveness<'a> {
    pub heartbeat: Option<&'a Heartbeat>,
    pub lease: Option<&'a LeaseFacts>,
}

/// Classifies a pod at `now`.
pub fn classify(
    pod: &PodFacts,
    startup_timeout: std::time::Duration,
    liveness: Liveness<'_>,
    now: Timestamp,
) -> Verdict {
    if let Some(ending) = ended(pod) {
        // A disrupted pod may still be live for a moment before its disruptor deletes it; the
        // replacement must not join it. One whose containers have all ended runs nothing: it is
        // left for its log (should its phase still say Running when the replacement is due, the
        // restart deletes it then, so the two are never live together).
        return Verdict::Ended {
            ending,
            kill: pod.needs_kill(),
        };
    }
    match pod.phase {
        PodPhase::Running => running(pod, liveness, now),
        // A node that stopped reporting: wait for the control plane to decide (it marks the
        // pod for deletion, which ends the attempt as NodeLost).
        PodPhase::Unknown => Verdict::Running {
            since: pod.started_at().unwrap_or(pod.created_at),
            ready: false,
            heartbeat_deadline: None,
        },
        _ => {
            let deadline = add(pod.created_at, startup_timeout);
            if now < deadline {
                return Verdict::Starting { deadline };
            }
            let waiting = pod.containers.iter().find_map(|c| match &c.state {
                ContainerPhase::Waiting {
                    reason: Some(r),
                    message,
                } => Some((r, message)),
                _ => None,
            });
            let detail = match (waiting, &pod.unschedulable) {
                (Some((reason, Some(message))), _) => format!("{reason}: {message}"),
                (Some((reason, None)), _) => reason.clone(),
                (None, Some(reason)) => reason.clone(),
                (None, None) => "Pending".to_string(),
            };
            let message = format!(
                "not running after {}: {detail}",
                crate::api::Duration::from(startup_timeout)
            );
            Verdict::Ended {
                ending: Ending::bare(FailureReason::StartupTimeout, message),
                kill: true,
            }
        }
    }
}

fn running(pod: &PodFacts, liveness: Liveness<'_>, now: Timestamp) -> Verdict {
    let since = pod.started_at().unwrap_or(pod.created_at);
    let Some(heartbeat) = liveness.heartbeat else {
        return Verdict::Running {
            since,
            ready: pod.ready,
            heartbeat_deadline: None,
        };
    };
    // A pod taken while it ran (a Sandbox's) could not have heartbeaten as its attempt before.
    let grace_from = pod.adopted_at.map_or(since, |at| at.max(since));
    let grace_end = add(grace_from, heartbeat.grace().as_std());
    let timeout = heartbeat.timeout.as_std();
    let lease = liveness.lease.cloned().unwrap_or_default();
    let renewed_by_pod = lease.holder.as_deref() == Some(pod.name.as_str());
    let expires = lease
        .renew_time
        .filter(|_| renewed_by_pod)
        .map(|t| add(t, timeout));
    let deadline = match expires {
        Some(expires) => expires.max(grace_end),
        None => grace_end,
    };
    if now < deadline {
        return Verdict::Running {
            since,
            ready: pod.ready,
            heartbeat_deadline: Some(deadline),
        };
    }
    let message = match (&lease.holder, lease.renew_time) {
        (Some(holder), _) if !renewed_by_pod => {
            format!("the heartbeat Lease is held by {holder}, not by this pod")
        }
        (_, Some(renewed)) => format!(
            "no heartbeat for {}s (timeout {})",
            (now - renewed).get_seconds(),
            heartbeat.timeout
        ),
        _ if grace_from > since => {
            format!("no heartbeat within {} of its adoption", heartbeat.grace())
        }
        _ => format!("no heartbeat within {} of starting", heartbeat.grace()),
    };
    let mut ending = Ending::bare(FailureReason::HeartbeatLost, message);
    ending.started_at = Some(since);
    ending.container = pod.agent().map(|c| c.name.clone());
    Verdict::Ended { ending, kill: true }
}

/// The ending of a finished or disrupted pod; `None` while it is pending or running.
fn ended(pod: &PodFacts) -> Option<Ending> {
    if let Some(reason) = disruption(pod) {
        let detail = pod
            .message
            .clone()
            .or_else(|| pod.disruption.clone())
            .or_else(|| pod.reason.clone());
        let message = detail.unwrap_or_else(|| "the pod was deleted by someone else".to_string());
        let mut ending = Ending::bare(reason, message);
        ending.started_at = pod.started_at();
        return Some(ending);
    }
    // The attempt ends when the agent's own container terminates, even while sidecars run on.
    let agent = pod.agent().and_then(|c| match &c.state {
        ContainerPhase::Terminated(t) => Some((c.name.as_str(), t)),
        _ => None,
    });
    if !pod.is_finished() && agent.is_none() {
        return None;
    }
    let terminated: Vec<(&str, &Termination)> = pod
        .containers
        .iter()
        .filter_map(|c| match &c.state {
            ContainerPhase::Terminated(t) => Some((c.name.as_str(), t)),
            _ => None,
        })
        .collect();
    // The container that explains the failure: the agent's own; else (a pod that ended without
    // reporting it) the first that failed, else the first that ended.
    let Some((container, t)) = agent.or_else(|| {
        terminated
            .iter()
            .find(|(_, t)| t.exit_code != 0)
            .or_else(|| terminated.first())
            .copied()
    }) else {
        let message = pod.message.clone().or_else(|| pod.reason.clone());
        return Some(Ending {
            message: message.map(truncate),
            ..Ending::bare_reason(FailureReason::Unknown)
        });
    };
    let signal = t
        .signal
        .or_else(|| (t.exit_code > 128).then_some(t.exit_code - 128));
    let reason = if t.reason.as_deref() == Some("OOMKilled") {
        FailureReason::OomKilled
    } else if t.exit_code == 0 {
        FailureReason::Completed
    } else if signal.is_some() {
        FailureReason::Signal
    } else {
        FailureReason::Error
    };
    // Any container may speak for the agent through its termination message.
    let shutdown = terminated.iter().find_map(|(_, t)| {
        t.message
            .as_deref()
            .and_then(super::last_words::shutdown_request)
    });
    let retry_after = terminated.iter().find_map(|(_, t)| {
        t.message
            .as_deref()
            .and_then(super::last_words::retry_after)
    });
    let permanent = terminated
        .iter()
        .find_map(|(_, t)| t.message.as_deref().and_then(super::last_words::permanent));
    // The agent's own container first: it is the one that knows where the agent got to.
    let reported = std::iter::once(t)
        .chain(terminated.iter().map(|(_, t)| *t))
        .filter_map(|t| t.message.as_deref())
        .map(super::progress::from_message)
        .find(|r| *r != super::progress::Reported::default())
        .map(Box::new)
        .unwrap_or_default();
    Some(Ending {
        reason,
        exit_code: Some(t.exit_code),
        signal: if reason == FailureReason::OomKilled {
            None
        } else {
            signal
        },
        message: permanent
            .clone()
            .flatten()
            .or_else(|| {
                // A shutdown keeps its words whole: its reason is recorded in `shutdown`.
                let typed = t.message.as_deref().filter(|_| shutdown.is_none());
                typed.and_then(super::last_words::reason)
            })
            .or_else(|| t.message.clone())
            .or_else(|| t.reason.clone())
            .map(truncate),
        container: Some(container.to_string()),
        started_at: t.started_at,
        finished_at: t.finished_at,
        shutdown,
        retry_after,
        permanent: permanent.is_some(),
        reported,
    })
}

/// Evicted, preempted, or lost with its node (or deleted by someone else while live).
fn disruption(pod: &PodFacts) -> Option<FailureReason> {
    let by_condition = pod.disruption.as_deref().map(|reason| match reason {
        "PreemptionByScheduler" | "PreemptionByKubeScheduler" => FailureReason::Preempted,
        "DeletionByTaintManager" | "DeletionByPodGC" => FailureReason::NodeLost,
        _ => FailureReason::Evicted,
    });
    let by_reason = match pod.reason.as_deref() {
        Some("Evicted") => Some(FailureReason::Evicted),
        Some("Preempting" | "Preempted") => Some(FailureReason::Preempted),
        Some("NodeLost" | "NodeShutdown" | "Terminated") => Some(FailureReason::NodeLost),
        _ => None,
    };
    by_condition
        .or(by_reason)
        .or_else(|| (pod.deleting && !pod.is_finished()).then_some(FailureReason::NodeLost))
}

/// Cuts `s` to at most `MESSAGE_LIMIT` bytes, on a character boundary.
pub fn truncate(s: String) -> String {
    truncate_to(s, MESSAGE_LIMIT)
}

/// Cuts `s` to at most `limit` bytes, on a character boundary.
pub fn truncate_to(mut s: String, limit: usize) -> String {
    if s.len() > limit {
        let mut end = limit;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

impl Ending {
    fn bare_reason(reason: FailureReason) -> Ending {
        Ending {
            reason,
            exit_code: None,
            signal: None,
            message: None,
            container: None,
            started_at: None,
            finished_at: None,
            shutdown: None,
            retry_after: None,
            permanent: false,
            reported: Default::default(),
        }
    }

    pub fn bare(reason: FailureReason, message: String) -> Ending {
        Ending {
            message: Some(truncate(message)),
            ..Ending::bare_reason(reason)
        }
    }
}

pub(crate) fn add(t: Timestamp, d: std::time::Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}
