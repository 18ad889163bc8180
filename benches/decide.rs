//! How long one supervision decision takes, on realistic inputs.
//!
//! `cargo bench --bench decide`. The target is a median of at most 1 µs per `decide` call.
//! Every input is built once, outside the timed loop, and checked to take the path its name
//! says before it is timed.

use std::hint::black_box;
use std::time::Duration as StdDuration;

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, BreakerState, CircuitBreakerPolicy, CircuitBreakerStatus,
    Condition, Duration, Failure, FailureClass, FailureReason, Heartbeat, Limits, Phase,
    RestartPolicySpec, RestartRecord, Shutdown, ShutdownType, Time, Trigger,
};
use agent_supervisor::supervise::classify::{self, Liveness, Verdict};
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{
    AgentFacts, EventReason, Input, LeaseFacts, PodFacts, PolicyResolution, decide, pod_name,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

const AGENT: &str = "researcher";
const UID: &str = "3f2b6c1e-8d4a-4c1b-9e7f-0a5d2c9b1e47";
const TEMPLATE_HASH: &str = "7d9f4c2a1b8e6f30";
const POLICY: &str = "standard";
const HISTORY_LIMIT: u32 = 50;
/// The attempt running (or just ended) in the steady-state scenarios.
const ATTEMPT: u32 = 51;

/// The decision's clock: not on a whole second, as a real clock is not.
fn now() -> Timestamp {
    "2025-06-01T12:00:00.734215Z".parse().expect("a timestamp")
}

fn ago(secs: i64) -> Timestamp {
    now() - jiff::SignedDuration::from_secs(secs)
}

fn at(secs_ago: i64) -> Time {
    Time(Timestamp::from_second(ago(secs_ago).as_second()).expect("a whole second"))
}

/// A Python-style traceback, as agents write to `/dev/termination-log`.
fn traceback(len: usize) -> String {
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
fn policy() -> RestartPolicySpec {
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
    }
}

fn agent(heartbeat: bool) -> AgentFacts {
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
fn running_status() -> AgentStatus {
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
fn running_pod(started_secs_ago: i64) -> PodFacts {
    PodFacts {
        name: pod_name(AGENT, ATTEMPT),
        attempt: ATTEMPT,
        template_hash: Some(TEMPLATE_HASH.to_string()),
        created_at: ago(started_secs_ago + 4),
        deleting: false,
        phase: PodPhase::Running,
        reason: None,
        message: None,
        disruption: None,
        unschedulable: None,
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
fn failed_pod(t: Termination) -> PodFacts {
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

fn input(status: AgentStatus, pod: Option<PodFacts>, lease: Option<LeaseFacts>) -> Input {
    Input {
        now: now(),
        agent: agent(lease.is_some()),
        status,
        policy: PolicyResolution::Named(POLICY.to_string(), policy()),
        pod,
        previous: None,
        lease,
        group: None,
        outages: Vec::new(),
    }
}

fn steady_running() -> Input {
    let lease = LeaseFacts {
        holder: Some(pod_name(AGENT, ATTEMPT)),
        renew_time: Some(ago(7)),
    };
    input(running_status(), Some(running_pod(5400)), Some(lease))
}

fn crash_backoff() -> Input {
    let mut status = running_status();
    status.consecutive_failures = 2;
    // 20 restarts in the last hour, one every three minutes.
    status.recent_restarts = (0..20).map(|i| at(120 + i * 170)).collect();
    let pod = failed_pod(Termination {
        exit_code: 1,
        signal: None,
        reason: Some("Error".to_string()),
        message: Some(traceback(1024)),
        started_at: Some(ago(185)),
        finished_at: Some(ago(1)),
    });
    input(status, Some(pod), None)
}

fn half_open_probe_fails() -> Input {
    let mut status = running_status();
    status.consecutive_failures = 5;
    status.circuit_breaker = Some(CircuitBreakerStatus {
        state: BreakerState::HalfOpen,
        trips: 2,
        opened_at: Some(at(660)),
        half_open_at: Some(at(60)),
    });
    let pod = failed_pod(Termination {
        exit_code: 137,
        signal: None,
        reason: Some("OOMKilled".to_string()),
        message: None,
        started_at: Some(ago(55)),
        finished_at: Some(ago(2)),
    });
    input(status, Some(pod), None)
}

fn heartbeat_lost() -> Input {
    let lease = LeaseFacts {
        holder: Some(pod_name(AGENT, ATTEMPT)),
        renew_time: Some(ago(300)),
    };
    input(running_status(), Some(running_pod(5400)), Some(lease))
}

fn shutdown_left_alone() -> Input {
    let mut status = running_status();
    status.shutdown = Some(Shutdown {
        kind: ShutdownType::Economic,
        reason: Some("budget exhausted".to_string()),
        message: Some("spent 50.00 of 50.00 USD for 2025-06-01".to_string()),
        at: Some(at(3)),
        source: Some("economy-service".to_string()),
    });
    input(status, Some(running_pod(5400)), None)
}

fn first_start() -> Input {
    input(AgentStatus::default(), None, None)
}

/// Each input takes the path its benchmark is named after.
fn check_paths() {
    let reasons = |input: &Input| -> Vec<EventReason> {
        decide(input.clone())
            .events
            .iter()
            .map(|e| e.reason)
            .collect()
    };

    let plan = decide(steady_running());
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert!(plan.events.is_empty() && plan.create_pod.is_none() && plan.delete_pod.is_none());
    assert_eq!(
        plan.status,
        steady_running().status,
        "steady state writes nothing"
    );

    let plan = decide(crash_backoff());
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.restart_history.len(), HISTORY_LIMIT as usize);
    // One Event for the crash, which says when the restart comes.
    assert_eq!(reasons(&crash_backoff()), [EventReason::Crashed]);
    assert!(
        plan.events[0].note.contains("restarting"),
        "{}",
        plan.events[0].note
    );

    let plan = decide(half_open_probe_fails());
    assert_eq!(plan.status.phase, Some(Phase::CircuitOpen));
    let breaker = plan.status.circuit_breaker.expect("breaker");
    assert_eq!((breaker.state, breaker.trips), (BreakerState::Open, 3));
    assert_eq!(
        plan.status.last_failure.map(|f| f.reason),
        Some(FailureReason::OomKilled)
    );

    let plan = decide(heartbeat_lost());
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, ATTEMPT)));
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(reasons(&heartbeat_lost()), [EventReason::HeartbeatLost]);

    let plan = decide(shutdown_left_alone());
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert!(plan.create_pod.is_none() && plan.delete_pod.is_none());
    assert!(plan.record_shutdown.is_none());
    assert_eq!(
        reasons(&shutdown_left_alone()),
        [EventReason::ShutdownRespected]
    );

    let plan = decide(first_start());
    assert_eq!(plan.create_pod.map(|p| p.name), Some(pod_name(AGENT, 1)));
}

/// `decide` takes its input by value (the status it returns is the input's, updated): each
/// iteration gets a fresh copy, made just before and outside the timed section — warm in cache,
/// as a status just read by the controller is. (Batching many copies up front would measure
/// cache misses on hundreds of megabytes of inputs instead of the decision.) The per-iteration
/// timer's own cost is included.
fn bench_decide(c: &mut Criterion, name: &str, input: Input) {
    c.bench_function(&format!("decide/{name}"), |b| {
        b.iter_batched(
            || input.clone(),
            |input| decide(black_box(input)),
            BatchSize::PerIteration,
        )
    });
}

fn decide_steady_running(c: &mut Criterion) {
    check_paths();
    bench_decide(c, "steady_running", steady_running());
}

fn decide_crash_backoff(c: &mut Criterion) {
    bench_decide(c, "crash_backoff", crash_backoff());
}

fn decide_half_open_probe_fails(c: &mut Criterion) {
    bench_decide(c, "half_open_probe_fails", half_open_probe_fails());
}

fn decide_heartbeat_lost(c: &mut Criterion) {
    bench_decide(c, "heartbeat_lost", heartbeat_lost());
}

fn decide_shutdown_left_alone(c: &mut Criterion) {
    bench_decide(c, "shutdown_left_alone", shutdown_left_alone());
}

fn decide_first_start(c: &mut Criterion) {
    bench_decide(c, "first_start", first_start());
}

/// The floor under every decide case above: `decide` takes `&Input` and returns the new status
/// by value, so it copies the status it read (here the full 50-entry history) and the plan's
/// copy is dropped afterwards.
fn baseline_clone_status(c: &mut Criterion) {
    let input = steady_running();
    c.bench_function("baseline/clone_status", |b| {
        b.iter(|| black_box(black_box(&input.status).clone()))
    });
}

/// A pod whose agent asked, through its termination message, to be left alone.
fn classify_shutdown_message(c: &mut Criterion) {
    let message = r#"{"shutdown":"economic","reason":"budget exhausted","message":"spent 50.00 of 50.00 USD for 2025-06-01; stopping until the budget is raised"}"#;
    let pod = failed_pod(Termination {
        exit_code: 0,
        signal: None,
        reason: Some("Completed".to_string()),
        message: Some(message.to_string()),
        started_at: Some(ago(5400)),
        finished_at: Some(ago(2)),
    });
    let startup_timeout = StdDuration::from_secs(600);
    let liveness = Liveness {
        heartbeat: None,
        lease: None,
    };
    match classify::classify(&pod, startup_timeout, liveness, now()) {
        Verdict::Ended {
            ending,
            kill: false,
        } => {
            let request = ending.shutdown.expect("a shutdown request");
            assert_eq!(request.kind, ShutdownType::Economic);
        }
        other => panic!("expected an ended pod, got {other:?}"),
    }
    let now = now();
    c.bench_function("classify", |b| {
        b.iter(|| {
            black_box(classify::classify(
                black_box(&pod),
                startup_timeout,
                liveness,
                now,
            ))
        })
    });
}

/// The pod as the API server returns it: an agent and a sidecar, both running and ready.
fn api_pod() -> Pod {
    let name = pod_name(AGENT, ATTEMPT);
    let running = |name: &str, image: &str, id: &str| {
        json!({
            "name": name,
            "image": image,
            "imageID": format!("{image}@sha256:{id}"),
            "containerID": format!("containerd://{id}"),
            "ready": true,
            "started": true,
            "restartCount": 0,
            "lastState": {},
            "state": { "running": { "startedAt": "2025-06-01T10:30:04Z" } }
        })
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "agents",
            "uid": "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e",
            "resourceVersion": "918273",
            "creationTimestamp": "2025-06-01T10:30:00Z",
            "labels": {
                "app.kubernetes.io/name": AGENT,
                "supervisor.dev/agent": AGENT,
                "supervisor.dev/attempt": ATTEMPT.to_string()
            },
            "annotations": {
                "supervisor.dev/template-hash": TEMPLATE_HASH,
                "kubectl.kubernetes.io/default-container": "agent"
            },
            "ownerReferences": [{
                "apiVersion": "supervisor.dev/v1alpha1",
                "kind": "Agent",
                "name": AGENT,
                "uid": UID,
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "researcher",
            "nodeName": "worker-2",
            "containers": [
                {
                    "name": "agent",
                    "image": "ghcr.io/example/researcher:1.8.2",
                    "args": ["--model", "large", "--max-steps", "10000"],
                    "env": [
                        { "name": "AGENT_NAME", "value": AGENT },
                        { "name": "AGENT_NAMESPACE", "value": "agents" },
                        { "name": "AGENT_POD_NAME", "value": name },
                        { "name": "AGENT_RESTART_COUNT", "value": "50" },
                        { "name": "AGENT_LAST_FAILURE_REASON", "value": "OOMKilled" },
                        { "name": "AGENT_HEARTBEAT_LEASE", "value": AGENT }
                    ],
                    "resources": {
                        "requests": { "cpu": "500m", "memory": "1Gi" },
                        "limits": { "memory": "2Gi" }
                    },
                    "volumeMounts": [{ "name": "memory", "mountPath": "/var/lib/agent" }],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                },
                {
                    "name": "log-shipper",
                    "image": "fluent/fluent-bit:3.2",
                    "resources": { "requests": { "cpu": "50m", "memory": "64Mi" } }
                }
            ],
            "volumes": [{
                "name": "memory",
                "persistentVolumeClaim": { "claimName": "researcher-memory" }
            }]
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.12",
            "podIP": "10.244.2.17",
            "startTime": "2025-06-01T10:30:00Z",
            "qosClass": "Burstable",
            "conditions": [
                { "type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2025-06-01T10:30:02Z" },
                { "type": "Initialized", "status": "True", "lastTransitionTime": "2025-06-01T10:30:00Z" },
                { "type": "Ready", "status": "True", "lastTransitionTime": "2025-06-01T10:30:05Z" },
                { "type": "ContainersReady", "status": "True", "lastTransitionTime": "2025-06-01T10:30:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-06-01T10:30:00Z" }
            ],
            "containerStatuses": [
                running("agent", "ghcr.io/example/researcher:1.8.2", "4f1e9c0d2b7a"),
                running("log-shipper", "fluent/fluent-bit:3.2", "a0b1c2d3e4f5")
            ]
        }
    }))
    .expect("a valid pod")
}

fn from_pod(c: &mut Criterion) {
    let pod = api_pod();
    let facts = agent_supervisor::controller::facts::pod_facts(&pod, None);
    assert_eq!(facts.attempt, ATTEMPT);
    assert_eq!(facts.phase, PodPhase::Running);
    assert!(facts.ready);
    assert_eq!(facts.containers.len(), 2);
    c.bench_function("from_pod", |b| {
        b.iter(|| {
            black_box(agent_supervisor::controller::facts::pod_facts(
                black_box(&pod),
                None,
            ))
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(StdDuration::from_secs(1))
        .measurement_time(StdDuration::from_secs(3));
    targets =
        decide_steady_running,
        decide_crash_backoff,
        decide_half_open_probe_fails,
        decide_heartbeat_lost,
        decide_shutdown_left_alone,
        decide_first_start,
        baseline_clone_status,
        classify_shutdown_message,
        from_pod
}
criterion_main!(benches);
