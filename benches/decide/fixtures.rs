//! The building blocks of the decide bench's inputs: a clock, a policy, a history, pods.

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, CircuitBreakerPolicy, CircuitBreakerStatus, Condition,
    Duration, Failure, FailureClass, FailureReason, Heartbeat, Limits, Phase, RestartPolicySpec,
    RestartRecord, Time, Trigger,
};
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{AgentFacts, PodFacts, pod_name};
use jiff::Timestamp;
use serde_json::json;

pub const AGENT: &str = "researcher";
pub const UID: &str = "3f2b6c1e-8d4a-4c1b-9e7f-0a5d2c9b1e47";
pub const TEMPLATE_HASH: &str = "7d9f4c2a1b8e6f30";
pub const POLICY: &str = "standard";
pub const HISTORY_LIMIT: u32 = 50;
/// The attempt running (or just ended) in the steady-state scenarios.
pub const ATTEMPT: u32 = 51;

/// The decision's clock: not on a whole second, as a real clock is not.
pub fn now() -> Timestamp {
    "2025-06-01T12:00:00.734215Z".parse().expect("a timestamp")
}

pub fn ago(secs: i64) -> Timestamp {
    now() - jiff::SignedDuration::from_secs(secs)
}

pub fn at(secs_ago: i64) -> Time {
    Time(Timestamp::from_second(ago(secs_ago).as_second()).expect("a whole second"))
}

/// A Python-style traceback, as agents write to `/dev/termination-log`.
pub fn traceback(len: usize) -> String {
    let mut s = String::from(
        "Traceback (most recent call last):\n  File \"/app/agent/loop.py\", line 214, in run\n    \
         result = await self.tools.call(step)\n",
    );
    while s.len() < len {
        s.push_str(
            "  File \"/app/agent/tools.py\", line 88, in call\n    return await fn(**args)\n",
        );
    }
    s.truncate(len - 40);
    s.push_str("\nRuntimeError: upstream returned 502\n");
    s.truncate(len);
    s
}

/// The policy of a production agent: exponential backoff with jitter, a restart limit, a
/// breaker, a full-size history and a few rules.
pub fn policy() -> RestartPolicySpec {
    RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Exponential,
            initial_delay: Duration::from_secs(10),
            max_delay: Duration::from_secs(300),
            multiplier: 2.0,
            jitter: 0.25,
        },
        reset_after: Duration::from_secs(600),
        limits: Limits {
            max_restarts: 30,
            window: Duration::from_secs(3600),
        },
        circuit_breaker: CircuitBreakerPolicy::default(),
        startup_timeout: Duration::from_secs(600),
        history_limit: HISTORY_LIMIT,
        rules: serde_json::from_value(json!([
            { "exitCodes": { "operator": "In", "values": [42] }, "action": "EconomicShutdown" },
            { "exitCodes": { "operator": "In", "values": [3, 4] }, "action": "Stop" },
            { "reasons": ["Evicted", "Preempted", "NodeLost"], "action": "Ignore" }
        ]))
        .expect("rules"),
        max_retry_after: Duration::from_secs(3600),
        outage: None,
        checkpoints: Default::default(),
        progress: None,
        budget: None,
    }
}

pub fn agent(heartbeat: bool) -> AgentFacts {
    AgentFacts {
        name: AGENT.to_string(),
        uid: UID.to_string(),
        generation: 3,
        suspend: false,
        heartbeat: heartbeat.then(|| Heartbeat {
            timeout: Duration::from_secs(60),
            grace_period: Some(Duration::from_secs(120)),
        }),
        template_hash: TEMPLATE_HASH.to_string(),
        restart_requested: Some("2025-05-30T09:00:00Z".to_string()),
        reset_requested: None,
        blocked: None,
        sandbox: None,
    }
}

/// `HISTORY_LIMIT` completed restarts, newest first, ending at attempt `ATTEMPT - 1`.
fn history() -> Vec<RestartRecord> {
    (0..HISTORY_LIMIT)
        .map(|i| {
            let attempt = ATTEMPT - 1 - i;
            let failed = 7200 + i64::from(i) * 900;
            let (reason, exit_code, signal, message) = match i % 5 {
                0 => (FailureReason::OomKilled, 137, None, "OOMKilled".to_string()),
                1 => (
                    FailureReason::Signal,
                    143,
                    Some(15),
                    "terminated".to_string(),
                ),
                _ => (FailureReason::Error, 1, None, traceback(300)),
            };
            RestartRecord {
                attempt,
                trigger: Trigger::Failure,
                failed_at: Some(at(failed)),
                reason: Some(reason),
                class: Some(FailureClass::Transient),
                exit_code: Some(exit_code),
                signal,
                message: Some(message.into()),
                ran_for: Some(Duration::from_secs(840)),
                fingerprint: None,
                backoff: Some(Duration::from_millis(9_312)),
                restarted_at: Some(at(failed - 10)),
                checkpoint: None,
                progress: None,
                spend: None,
            }
        })
        .collect()
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: Some(3),
        last_transition_time: at(3600),
    }
}

/// The status of an agent that has been restarted `ATTEMPT - 1` times and is running now.
pub fn running_status() -> AgentStatus {
    let history = history();
    let last = &history[0];
    AgentStatus {
        phase: Some(Phase::Running),
        pod_name: Some(pod_name(AGENT, ATTEMPT)),
        attempt: ATTEMPT,
        restart_count: ATTEMPT - 1,
        consecutive_failures: 0,
        next_restart_at: None,
        last_failure: Some(Failure {
            time: last.failed_at.clone().expect("failed_at"),
            reason: last.reason.expect("reason"),
            class: FailureClass::Transient,
            exit_code: last.exit_code,
            signal: last.signal,
            message: last.message.clone(),
            container: Some("agent".to_string()),
            pod_name: Some(pod_name(AGENT, ATTEMPT - 1)),
            ran_for: last.ran_for,
            fingerprint: None,
        }),
        restart_history: history,
        circuit_breaker: Some(CircuitBreakerStatus::default()),
        shutdown: None,
        group: None,
        progress: None,
        checkpoints: Vec::new(),
        resumed_from: None,
        ignored_report: None,
        spend: None,
        conditions: vec![
            condition("CircuitBreakerOpen", false, "Closed", ""),
            condition(
                "PolicyResolved",
                true,
                "Found",
                &format!("using RestartPolicy {POLICY}"),
            ),
            condition(
                "Ready",
                true,
                "PodReady",
                &format!("pod {}", pod_name(AGENT, ATTEMPT)),
            ),
        ],
        observed_generation: Some(3),
        recent_restarts: Vec::new(),
        handled_restart_request: Some("2025-05-30T09:00:00Z".to_string()),
        handled_reset_request: None,
    }
}

fn running(name: &str, started_secs_ago: i64) -> ContainerFacts {
    ContainerFacts {
        name: name.to_string(),
        state: ContainerPhase::Running {
            started_at: Some(ago(started_secs_ago)),
        },
    }
}

fn terminated(name: &str, t: Termination) -> ContainerFacts {
    ContainerFacts {
        name: name.to_string(),
        state: ContainerPhase::Terminated(t),
    }
}

/// The current attempt's pod, running and ready, with the agent and a log-shipping sidecar.
pub fn running_pod(started_secs_ago: i64) -> PodFacts {
    PodFacts {
        name: pod_name(AGENT, ATTEMPT),
        attempt: ATTEMPT,
        template_hash: Some(TEMPLATE_HASH.to_string()),
        created_at: ago(started_secs_ago + 4),
        adopted_at: None,
        deleting: false,
        phase: PodPhase::Running,
        reason: None,
        message: None,
        disruption: None,
        unschedulable: None,
        scheduled_at: None,
        ready: true,
        containers: vec![
            running("agent", started_secs_ago),
            running("log-shipper", started_secs_ago),
        ],
        agent_container: None,
        origin: Default::default(),
    }
}

/// The current pod, failed: the agent container ended with `t`, the sidecar was stopped.
pub fn failed_pod(t: Termination) -> PodFacts {
    let started = t.started_at;
    let finished = t.finished_at;
    PodFacts {
        created_at: started.map_or(ago(60), |s| s - jiff::SignedDuration::from_secs(4)),
        phase: PodPhase::Failed,
        ready: false,
        containers: vec![
            terminated("agent", t),
            terminated(
                "log-shipper",
                Termination {
                    exit_code: 0,
                    signal: None,
                    reason: Some("Completed".to_string()),
                    message: None,
                    started_at: started,
                    finished_at: finished,
                },
            ),
        ],
        ..running_pod(0)
    }
}
