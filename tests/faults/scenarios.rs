//! The scenarios, each a short story that ends in a steady state: the uninterrupted run's end
//! state is what every crashed run must reach too. These have one agent; those with groups are
//! in `groups.rs`.

use agent_supervisor::api::{BreakerState, Phase};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::groups::{GROUP_ESCALATION, GROUP_ONE_FOR_ALL, GROUP_RESET, GROUP_REST_FOR_ONE};
use crate::normal::End;
use crate::steps::Run;
pub use crate::stops::{CHECKPOINTS, SHUTDOWN_EXTERNAL, SHUTDOWN_MESSAGE};

/// A scenario: its name, its agents and groups (whose end states are compared), and the story
/// (policy, agents, groups, what the user and the kubelet do, and the end state waited for).
pub struct Scenario {
    pub name: &'static str,
    /// The agents, by name; the story's steps act on the first unless it picks another.
    pub agents: &'static [&'static str],
    pub groups: &'static [&'static str],
    /// Run with a status interval the story's crashes come within: a restart's record waits,
    /// merged with those that follow, for the interval (`controller::writer`).
    pub pending: bool,
    pub drive: for<'a> fn(&'a Run) -> BoxFuture<'a, ()>,
    /// What the uninterrupted run's end state must be, beyond what the story waited for: the
    /// ways it is not. Every crashed run must then end as the uninterrupted one did.
    pub expect: fn(&End) -> Vec<String>,
}

/// Nothing beyond what the story waits for.
pub fn as_waited(_: &End) -> Vec<String> {
    Vec::new()
}

/// Exponential from 1s, no jitter, no breaker, nothing reset during a run.
pub fn fast_policy() -> Value {
    json!({
        "backoff": { "type": "Exponential", "initialDelay": "1s", "maxDelay": "1m", "jitter": 0.0 },
        "circuitBreaker": { "failureThreshold": 0 },
        "resetAfter": "10m",
    })
}

pub const CRASH_RESTART: Scenario = Scenario {
    name: "crash-backoff-restart",
    agents: &["crasher"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(crash_restart(run)),
    expect: as_waited,
};

/// Two crashes, each restarted after its backoff (1s, then 2s).
async fn crash_restart(run: &Run) {
    run.create_policy(fast_policy()).await;
    run.create_agent(json!({})).await;
    run.end(1, 1, "Error", "boom: model API returned 500").await;
    run.end(2, 137, "OOMKilled", "").await;
    run.running(3).await;
    run.until("restartCount 2", |s| s.restart_count >= 2).await;
}

pub const CRASH_STORM: Scenario = Scenario {
    name: "crash-storm",
    agents: &["stormy"],
    groups: &[],
    pending: true,
    drive: |run| Box::pin(crash_storm(run)),
    expect: as_waited,
};

/// Three crashes in a row, each restarted at once, within one status interval: a restart's
/// record waits, and one write records them all.
async fn crash_storm(run: &Run) {
    three_crashes(run, restart_at_once()).await;
}

/// Restarts at once, with no breaker: a crash storm's policy.
fn restart_at_once() -> Value {
    json!({
        "backoff": { "type": "Immediate", "jitter": 0.0 },
        "circuitBreaker": { "failureThreshold": 0 },
        "resetAfter": "10m",
    })
}

/// Under `policy`, three crashes in a row and the fourth attempt running, every crash recorded.
async fn three_crashes(run: &Run, policy: Value) {
    run.create_policy(policy).await;
    run.create_agent(json!({})).await;
    run.end(1, 1, "Error", "first").await;
    run.end(2, 1, "Error", "second").await;
    run.end(3, 137, "OOMKilled", "").await;
    run.running(4).await;
    run.until("every crash recorded", |s| {
        s.restart_count >= 3 && s.restart_history.len() >= 3
    })
    .await;
}

pub const CRASH_STORM_BACKOFF: Scenario = Scenario {
    name: "crash-storm-backoff",
    agents: &["backer"],
    groups: &[],
    pending: true,
    drive: |run| Box::pin(crash_storm_backoff(run)),
    expect: as_waited,
};

/// Three crashes, each restarted after its backoff (1s, 2s, 4s), within about one status
/// interval: a failure's record waits through its backoff and its restart.
async fn crash_storm_backoff(run: &Run) {
    three_crashes(run, fast_policy()).await;
}

pub const CRASH_STORM_CHAIN: Scenario = Scenario {
    name: "crash-storm-chain",
    agents: &["chain"],
    groups: &[],
    pending: true,
    drive: |run| Box::pin(crash_storm_chain(run)),
    expect: as_waited,
};

/// Three crashes in a row, each before the one before it is recorded: their records wait
/// together, and a successor decides each again from its pod, newest first.
async fn crash_storm_chain(run: &Run) {
    run.create_policy(restart_at_once()).await;
    run.create_agent(json!({})).await;
    run.running(1).await;
    run.crash(1, 1, "Error", "first").await;
    run.crash(2, 1, "Error", "second").await;
    run.crash(3, 137, "OOMKilled", "").await;
    run.running(4).await;
}

pub const CRASH_STORM_FIRST: Scenario = Scenario {
    name: "crash-storm-first",
    agents: &["early"],
    groups: &[],
    pending: true,
    drive: |run| Box::pin(crash_storm_first(run)),
    expect: as_waited,
};

/// Two crashes of pods never placed, the first just after the agent's first write: their
/// records wait together, and a successor decides them again from the pods.
async fn crash_storm_first(run: &Run) {
    run.create_policy(restart_at_once()).await;
    run.create_agent(json!({ "template": { "spec": {
        "containers": [{ "name": "agent", "image": "example.invalid/agent:1" }],
        "nodeSelector": { "example.invalid/no-such-node": "true" },
    } } }))
    .await;
    run.fail_unplaced(1, 1, "Error", "first").await;
    run.fail_unplaced(2, 137, "OOMKilled", "").await;
    run.until("both crashes recorded", |s| {
        s.restart_count >= 2 && s.restart_history.len() >= 2
    })
    .await;
}

pub const MANUAL_RESTART: Scenario = Scenario {
    name: "manual-restart",
    agents: &["worker"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(manual_restart(run)),
    expect: as_waited,
};

/// A restart requested with the annotation, carried out once.
async fn manual_restart(run: &Run) {
    run.create_policy(fast_policy()).await;
    run.create_agent(json!({})).await;
    run.running(1).await;
    run.patch(json!({ "metadata": { "annotations": {
        "supervisor.dev/restart-requested-at": "2026-11-21T10:00:00Z" } } }))
        .await;
    run.running(2).await;
    run.until("the request handled", |s| {
        s.handled_restart_request.as_deref() == Some("2026-11-21T10:00:00Z")
    })
    .await;
    run.pod_stopped(1).await;
}

pub const ROLLOUT: Scenario = Scenario {
    name: "rollout",
    agents: &["roller"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(rollout(run)),
    expect: as_waited,
};

/// A template change replaces the pod, counting toward nothing.
async fn rollout(run: &Run) {
    run.create_policy(fast_policy()).await;
    run.create_agent(json!({})).await;
    run.running(1).await;
    run.patch(json!({ "spec": { "template": { "spec": { "containers": [
        { "name": "agent", "image": "example.invalid/agent:2" }] } } } }))
        .await;
    run.running(2).await;
    run.until("generation 2 observed", |s| {
        s.observed_generation >= Some(2)
    })
    .await;
    run.pod_stopped(1).await;
}

pub const HEARTBEAT: Scenario = Scenario {
    name: "heartbeat-kill",
    agents: &["beater"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(heartbeat(run)),
    expect: as_waited,
};

/// The Lease is renewed only by attempt 2's holder: attempt 1 is hung once its grace period is
/// over, killed, and restarted at once; attempt 2 stays.
async fn heartbeat(run: &Run) {
    run.create_policy(json!({
        "backoff": { "type": "Immediate" },
        "circuitBreaker": { "failureThreshold": 0 },
        "resetAfter": "10m",
    }))
    .await;
    run.heartbeat(run.pod(2));
    // Attempt 1 never holds the Lease, so it is hung at its grace period's end; attempt 2's
    // holder renews it twice a second, and the long timeout keeps a slow renewal on a loaded
    // machine from counting as a second hang (2 s did not always).
    run.create_agent(json!({ "heartbeat": { "timeout": "30s", "gracePeriod": "3s" } }))
        .await;
    run.pod_running(1).await;
    run.running(2).await;
    run.until("the HeartbeatLost restart", |s| s.restart_count >= 1)
        .await;
    run.pod_stopped(1).await;
}

pub const BREAKER: Scenario = Scenario {
    name: "breaker-open-probe-reopen",
    agents: &["flaky"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(breaker(run)),
    expect: as_waited,
};

/// Two crashes open the breaker (2s); the probe crashes too and opens it again, for a minute.
async fn breaker(run: &Run) {
    run.create_policy(json!({
        "backoff": { "type": "Immediate", "jitter": 0.0 },
        "resetAfter": "10m",
        "circuitBreaker": { "failureThreshold": 2, "openDuration": "2s",
            "openDurationMultiplier": 30.0, "maxOpenDuration": "5m" },
    }))
    .await;
    run.create_agent(json!({})).await;
    run.end(1, 1, "Error", "crash").await;
    run.end(2, 1, "Error", "crash").await;
    // Open for 2 s, then half-open: a look that comes later on a loaded machine sees the
    // probe, and the trip is what it waits for.
    run.until("the breaker open", |s| {
        s.circuit_breaker.as_ref().is_some_and(|b| b.trips >= 1)
    })
    .await;
    run.until("the probe", |s| {
        s.circuit_breaker
            .as_ref()
            .is_some_and(|b| b.state == BreakerState::HalfOpen)
    })
    .await;
    run.end(3, 1, "Error", "crash").await;
    run.until("the breaker open again", |s| {
        s.phase == Some(Phase::CircuitOpen)
            && s.circuit_breaker.as_ref().is_some_and(|b| b.trips >= 2)
    })
    .await;
    run.pod_stopped(3).await;
}

pub const SUSPEND: Scenario = Scenario {
    name: "suspend-resume",
    agents: &["sleeper"],
    groups: &[],
    pending: false,
    drive: |run| Box::pin(suspend(run)),
    expect: as_waited,
};

/// Suspend stops the pod; resume starts the next attempt.
async fn suspend(run: &Run) {
    run.create_policy(fast_policy()).await;
    run.create_agent(json!({})).await;
    run.running(1).await;
    run.patch(json!({ "spec": { "suspend": true } })).await;
    run.until("Suspended", |s| s.phase == Some(Phase::Suspended))
        .await;
    run.pod_stopped(1).await;
    run.patch(json!({ "spec": { "suspend": false } })).await;
    run.running(2).await;
}

/// Every scenario, for the runs that take them all.
pub const ALL: [&Scenario; 19] = [
    &crate::outage::OUTAGE,
    &crate::budget::BUDGET,
    &CRASH_RESTART,
    &CRASH_STORM,
    &CRASH_STORM_BACKOFF,
    &CRASH_STORM_CHAIN,
    &CRASH_STORM_FIRST,
    &MANUAL_RESTART,
    &ROLLOUT,
    &HEARTBEAT,
    &BREAKER,
    &SUSPEND,
    &SHUTDOWN_MESSAGE,
    &SHUTDOWN_EXTERNAL,
    &CHECKPOINTS,
    &GROUP_ONE_FOR_ALL,
    &GROUP_REST_FOR_ONE,
    &GROUP_ESCALATION,
    &GROUP_RESET,
];
