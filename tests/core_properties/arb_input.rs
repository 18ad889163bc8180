//! Strategies for a whole decision input: heartbeat, lease, names, any `Input`, and an agent
//! alone whose running pod has just failed.

use agent_supervisor::api::{BackoffType, BreakerState, Duration, Heartbeat, Phase};
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{AgentFacts, Input, LeaseFacts, PolicyResolution, pod_name};
use jiff::SignedDuration;
use proptest::prelude::*;

use crate::arb::{arb_duration, arb_policy, arb_resolution, arb_time};
use crate::arb_pod::arb_pod;
use crate::arb_status::{arb_status, arb_text};
use crate::pods::pod;

fn arb_heartbeat() -> impl Strategy<Value = Option<Heartbeat>> {
    proptest::option::of(
        (arb_duration(), proptest::option::of(arb_duration())).prop_map(
            |(timeout, grace_period)| Heartbeat {
                timeout,
                grace_period,
            },
        ),
    )
}

fn arb_lease() -> impl Strategy<Value = Option<LeaseFacts>> {
    proptest::option::of(
        (
            proptest::option::of(prop_oneof![
                Just("current".to_string()),
                Just("agent-0".to_string()),
                ".{0,12}",
            ]),
            proptest::option::of(arb_time()),
        )
            .prop_map(|(holder, renew_time)| LeaseFacts {
                expect_slow_until: None,
                holder,
                renew_time,
                reported: Default::default(),
            }),
    )
}

/// Kubernetes object names: the API server admits nothing else.
fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?",
        1 => "[a-z0-9][a-z0-9.-]{240,251}[a-z0-9]",
    ]
}

pub(crate) fn arb_input() -> BoxedStrategy<Input> {
    (
        arb_time(),
        (
            arb_name(),
            ".{0,40}",
            any::<i64>(),
            any::<bool>(),
            arb_heartbeat(),
            prop_oneof![Just("h1".to_string()), Just("h2".to_string())],
            proptest::option::of("r[0-2]"),
            proptest::option::of("r[0-2]"),
        ),
        arb_status(),
        arb_resolution(),
        proptest::option::of(arb_pod()),
        arb_lease(),
    )
        .prop_map(
            |(
                now,
                (
                    name,
                    uid,
                    generation,
                    suspend,
                    heartbeat,
                    template_hash,
                    restart_requested,
                    reset_requested,
                ),
                mut status,
                policy,
                pod,
                mut lease,
            )| {
                status.pod_name = Some(pod_name(&name, status.attempt));
                let pod = pod.map(|(relative, mut pod)| {
                    if relative != i64::MIN {
                        pod.attempt =
                            (i64::from(status.attempt) + relative).clamp(0, u32::MAX.into()) as u32;
                    }
                    pod.name = pod_name(&name, pod.attempt);
                    pod
                });
                if let (Some(lease), Some(pod)) = (lease.as_mut(), pod.as_ref())
                    && lease.holder.as_deref() == Some("current")
                {
                    lease.holder = Some(pod.name.clone());
                }
                Input {
                    now,
                    agent: AgentFacts {
                        name,
                        uid,
                        generation,
                        suspend,
                        heartbeat,
                        template_hash,
                        restart_requested,
                        reset_requested,
                        blocked: None,
                        sandbox: None,
                    },
                    status,
                    policy,
                    pod,
                    previous: None,
                    lease,
                    group: None,
                    outages: Vec::new(),
                }
            },
        )
        .boxed()
}

/// An agent alone whose running pod has just failed, under an `Immediate` policy (its rules,
/// limits, breaker and history arbitrary): the shape in which a restart is made at once.
pub(crate) fn arb_failed_alone() -> BoxedStrategy<Input> {
    (
        arb_input(),
        arb_policy(),
        1..=255i32,
        arb_text(),
        0..7200i64,
    )
        .prop_map(|(mut input, mut policy, code, message, ran)| {
            policy.backoff.kind = BackoffType::Immediate;
            // (A new pod given no time at all to start would be taken as hung at once.)
            policy.startup_timeout = policy.startup_timeout.max(Duration::from_secs(1));
            input.policy = PolicyResolution::Named("p".to_string(), policy);
            input.group = None;
            input.agent.suspend = false;
            input.status.shutdown = None;
            input.agent.restart_requested = input.status.handled_restart_request.clone();
            input.agent.reset_requested = input.status.handled_reset_request.clone();
            let attempt = input.status.attempt.clamp(1, u32::MAX - 1);
            input.status.attempt = attempt;
            input.status.phase = Some(Phase::Running);
            // A pod runs with the breaker closed, or as its half-open probe.
            if let Some(breaker) = input.status.circuit_breaker.as_mut()
                && breaker.state == BreakerState::Open
            {
                breaker.state = BreakerState::HalfOpen;
            }
            let name = pod_name(&input.agent.name, attempt);
            input.status.pod_name = Some(name.clone());
            let started = input
                .now
                .checked_sub(SignedDuration::from_secs(ran))
                .unwrap_or(input.now);
            input.pod = Some(pod(
                name,
                attempt,
                &input.agent.template_hash,
                started,
                PodPhase::Failed,
                ContainerPhase::Terminated(Termination {
                    exit_code: code,
                    signal: None,
                    reason: Some("Error".to_string()),
                    message,
                    started_at: Some(started),
                    finished_at: Some(input.now),
                }),
            ));
            input.previous = None;
            input
        })
        .boxed()
}
