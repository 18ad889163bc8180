//! How long one supervision decision takes, on realistic inputs.
//!
//! `cargo bench --bench decide`. The target is a median of at most 1 µs per `decide` call.
//! Every input is built once, outside the timed loop, and checked to take the path its name
//! says before it is timed.

#[path = "decide/api_pod.rs"]
mod api_pod;
#[path = "decide/fixtures.rs"]
mod fixtures;
#[path = "decide/scenarios.rs"]
mod scenarios;

use std::hint::black_box;
use std::time::Duration as StdDuration;

use agent_supervisor::api::ShutdownType;
use agent_supervisor::supervise::classify::{self, Liveness, Verdict};
use agent_supervisor::supervise::input::{PodPhase, Termination};
use agent_supervisor::supervise::{Input, decide};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

use api_pod::api_pod;
use fixtures::{ATTEMPT, ago, failed_pod, now};
use scenarios::{
    check_paths, crash_backoff, first_start, half_open_probe_fails, heartbeat_lost,
    shutdown_left_alone, steady_running,
};

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
