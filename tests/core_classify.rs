//! Failure classification, table-driven: every row of SPEC.md's table, the typed shutdown
//! channel and hostile termination messages. The shared builders are here; the tests, by topic,
//! in `core_classify/`: exit codes, heartbeats, startup, disruptions, the shutdown channel,
//! message bounds, `retryAfter`, and reading real `Pod` objects (`facts`).

// `facts.rs` and `retry_after.rs` take what they need of these with `use super::*`.
use agent_supervisor::api::{FailureReason, Heartbeat, ShutdownType};
use agent_supervisor::supervise::classify::{Ending, Liveness, Verdict, classify};
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::last_words::ShutdownRequest;
use agent_supervisor::supervise::{LeaseFacts, PodFacts};
use jiff::{SignedDuration, Timestamp};

const STARTUP: std::time::Duration = std::time::Duration::from_secs(600);
const POD: &str = "researcher-3";

#[path = "common/clock.rs"]
mod clock;
use clock::t;

fn no_heartbeat() -> Liveness<'static> {
    Liveness {
        heartbeat: None,
        lease: None,
    }
}

fn base_pod(phase: PodPhase) -> PodFacts {
    PodFacts {
        name: POD.to_string(),
        attempt: 3,
        template_hash: Some("h1".to_string()),
        created_at: t(0),
        adopted_at: None,
        deleting: false,
        phase,
        reason: None,
        message: None,
        disruption: None,
        unschedulable: None,
        scheduled_at: None,
        ready: false,
        containers: Vec::new(),
        agent_container: None,
        origin: Default::default(),
    }
}

fn termination(exit_code: i32, reason: Option<&str>, message: Option<&str>) -> Termination {
    Termination {
        exit_code,
        signal: None,
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        started_at: Some(t(5)),
        finished_at: Some(t(65)),
    }
}

fn container(name: &str, state: ContainerPhase) -> ContainerFacts {
    ContainerFacts {
        name: name.to_string(),
        state,
    }
}

/// A finished pod whose one container `agent` ended with `term`.
fn ended_pod(term: Termination) -> PodFacts {
    let phase = if term.exit_code == 0 {
        PodPhase::Succeeded
    } else {
        PodPhase::Failed
    };
    PodFacts {
        containers: vec![container("agent", ContainerPhase::Terminated(term))],
        ..base_pod(phase)
    }
}

fn running_pod(started: Timestamp) -> PodFacts {
    PodFacts {
        ready: true,
        containers: vec![container(
            "agent",
            ContainerPhase::Running {
                started_at: Some(started),
            },
        )],
        ..base_pod(PodPhase::Running)
    }
}

fn waiting(reason: &str, message: Option<&str>) -> ContainerPhase {
    ContainerPhase::Waiting {
        reason: Some(reason.to_string()),
        message: message.map(str::to_string),
    }
}

/// The ending of a verdict that must be `Ended`, with its kill flag.
#[track_caller]
fn ended(verdict: Verdict) -> (Ending, bool) {
    match verdict {
        Verdict::Ended { ending, kill } => (ending, kill),
        other => panic!("expected the attempt to have ended, got {other:?}"),
    }
}

#[track_caller]
fn classify_ended(pod: &PodFacts) -> (Ending, bool) {
    ended(classify(pod, STARTUP, no_heartbeat(), t(120)))
}

fn heartbeat(timeout: u64, grace: Option<u64>) -> Heartbeat {
    Heartbeat {
        timeout: agent_supervisor::api::Duration::from_secs(timeout),
        grace_period: grace.map(agent_supervisor::api::Duration::from_secs),
    }
}

fn lease(holder: Option<&str>, renewed: Option<Timestamp>) -> LeaseFacts {
    LeaseFacts {
        expect_slow_until: None,
        holder: holder.map(str::to_string),
        renew_time: renewed,
        reported: Default::default(),
    }
}

#[path = "core_classify/disruptions.rs"]
mod disruptions;
#[path = "core_classify/exit_codes.rs"]
mod exit_codes;
#[path = "core_classify/facts.rs"]
mod facts;
#[path = "core_classify/heartbeats.rs"]
mod heartbeats;
#[path = "core_classify/message_bounds.rs"]
mod message_bounds;
#[path = "core_classify/retry_after.rs"]
mod retry_after;
#[path = "core_classify/shutdown.rs"]
mod shutdown;
#[path = "core_classify/startup.rs"]
mod startup;
