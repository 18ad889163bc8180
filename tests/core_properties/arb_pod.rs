//! Strategies for a pod: its containers' states, its shape relative to the status's attempt,
//! and what it was created for.

use agent_supervisor::api::Trigger;
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{PodFacts, PodOrigin};
use proptest::prelude::*;

use crate::arb::arb_time;
use crate::arb_status::arb_text;

fn arb_container_phase() -> BoxedStrategy<ContainerPhase> {
    prop_oneof![
        (arb_text(), arb_text())
            .prop_map(|(reason, message)| ContainerPhase::Waiting { reason, message }),
        proptest::option::of(arb_time())
            .prop_map(|started_at| ContainerPhase::Running { started_at }),
        (
            prop_oneof![0i32..256, any::<i32>()],
            proptest::option::of(prop_oneof![0i32..64, any::<i32>()]),
            proptest::option::of(prop_oneof![
                Just("OOMKilled".to_string()),
                Just("Error".to_string()),
                Just("Completed".to_string()),
            ]),
            arb_text(),
            proptest::option::of(arb_time()),
            proptest::option::of(arb_time()),
        )
            .prop_map(
                |(exit_code, signal, reason, message, started_at, finished_at)| {
                    ContainerPhase::Terminated(Termination {
                        exit_code,
                        signal,
                        reason,
                        message,
                        started_at,
                        finished_at,
                    })
                }
            ),
    ]
    .boxed()
}

/// A pod, and which attempt it is relative to the status's: the one before, the same, the
/// next one, or any.
/// A pod as `arb_pod_shape` makes it, naming (or not) its agent container, and carrying what it
/// was created for.
pub(crate) fn arb_pod() -> BoxedStrategy<(i64, PodFacts)> {
    (
        arb_pod_shape(),
        proptest::option::of(prop_oneof![Just("c0"), Just("c1"), Just("missing")]),
        proptest::option::of(proptest::sample::select(Trigger::ALL.to_vec())),
        proptest::option::of("r[0-2]"),
        proptest::option::of("r[0-2]"),
    )
        .prop_map(|((relative, mut pod), agent, trigger, restart, reset)| {
            pod.agent_container = agent.map(str::to_string);
            pod.origin = PodOrigin {
                trigger,
                handled_restart: restart,
                handled_reset: reset,
                handled_group_reset: None,
                checkpoint: None,
            };
            (relative, pod)
        })
        .boxed()
}

fn arb_pod_shape() -> BoxedStrategy<(i64, PodFacts)> {
    (
        prop_oneof![Just(-1i64), Just(0), Just(0), Just(1), Just(i64::MIN)],
        any::<u32>(),
        arb_time(),
        any::<bool>(),
        prop_oneof![
            Just(PodPhase::Pending),
            Just(PodPhase::Running),
            Just(PodPhase::Succeeded),
            Just(PodPhase::Failed),
            Just(PodPhase::Unknown),
        ],
        proptest::option::of(prop_oneof![
            Just("Evicted".to_string()),
            Just("NodeLost".to_string()),
            Just("Preempting".to_string()),
            ".{0,10}",
        ]),
        arb_text(),
        proptest::option::of(prop_oneof![
            Just("EvictionByEvictionAPI".to_string()),
            Just("PreemptionByScheduler".to_string()),
            Just("DeletionByTaintManager".to_string()),
            ".{0,10}",
        ]),
        (
            proptest::option::of(Just("Unschedulable".to_string())),
            proptest::option::of(arb_time()),
            any::<bool>(),
            proptest::collection::vec(arb_container_phase(), 0..3),
            proptest::option::of(prop_oneof![Just("h1".to_string()), Just("h2".to_string())]),
        ),
    )
        .prop_map(
            |(
                relative,
                any_attempt,
                created_at,
                deleting,
                phase,
                reason,
                message,
                disruption,
                (unschedulable, scheduled_at, ready, states, template_hash),
            )| {
                let pod = PodFacts {
                    name: String::new(),
                    attempt: any_attempt,
                    template_hash,
                    created_at,
                    adopted_at: None,
                    deleting,
                    phase,
                    reason,
                    message,
                    disruption,
                    unschedulable,
                    scheduled_at,
                    ready,
                    containers: states
                        .into_iter()
                        .enumerate()
                        .map(|(i, state)| ContainerFacts {
                            name: format!("c{i}"),
                            state,
                        })
                        .collect(),
                    agent_container: None,
                    origin: Default::default(),
                };
                (relative, pod)
            },
        )
        .boxed()
}
