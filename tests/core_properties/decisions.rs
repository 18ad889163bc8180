//! Decisions on arbitrary inputs: determinism, shutdowns, the one-live-pod rule, restarts made
//! at once, lost writes, bounded history and counters, and no panics.

use agent_supervisor::api::{Duration, Phase, Time, Trigger};
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase};
use agent_supervisor::supervise::{
    EventReason, Options, PolicyResolution, decide, decide_with, pod_name,
};
use proptest::prelude::*;

use crate::arb::{arb_duration, t_whole};
use crate::arb_input::{arb_failed_alone, arb_input};
use crate::arb_pod::arb_pod;
use crate::arb_status::arb_shutdown;
use crate::{config, history_limit};

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_same_input_gives_the_same_plan(input in arb_input()) {
        let first = decide(input.clone());
        let second = decide(input.clone());
        prop_assert_eq!(&first, &second);
        prop_assert_eq!(first, decide(input.clone()));
    }

    #[test]
    fn nothing_is_created_deleted_or_rewritten_while_a_shutdown_is_set(
        mut input in arb_input(),
        shutdown in arb_shutdown(),
    ) {
        input.status.shutdown = Some(shutdown.clone());
        let plan = decide(input.clone());
        prop_assert_eq!(plan.create_pod, None);
        prop_assert_eq!(plan.delete_pod, None);
        prop_assert_eq!(plan.record_shutdown, None);
        prop_assert_eq!(plan.status.shutdown, Some(shutdown.clone()));
        prop_assert_eq!(plan.status.phase, Some(Phase::Shutdown));
        prop_assert_eq!(plan.status.next_restart_at, None);
        // Nothing is counted either.
        prop_assert_eq!(plan.status.consecutive_failures, input.status.consecutive_failures);
        prop_assert_eq!(plan.status.restart_count, input.status.restart_count);
        // (But for the operator's own shutdown whose second write was lost: its ending is
        // recorded then, as the decision that found it did.)
        let own = matches!(shutdown.source.as_deref(), Some("TerminationMessage" | "Rule"));
        if !own || input.status.phase == Some(Phase::Shutdown) {
            prop_assert_eq!(&plan.status.last_failure, &input.status.last_failure);
        }
        prop_assert_eq!(&plan.status.restart_history, &input.status.restart_history);
        let respected = plan
            .events
            .iter()
            .filter(|e| e.reason == EventReason::ShutdownRespected)
            .count();
        let already = input.status.phase == Some(Phase::Shutdown);
        prop_assert_eq!(plan.events.len(), respected);
        prop_assert_eq!(respected, usize::from(!already));
    }

    #[test]
    fn a_live_pod_of_the_current_attempt_is_never_joined_by_another(input in arb_input()) {
        let plan = decide(input.clone());
        if let Some(create) = &plan.create_pod {
            prop_assert_eq!(&create.name, &pod_name(&input.agent.name, create.attempt));
            prop_assert_eq!(plan.status.attempt, create.attempt);
            prop_assert_eq!(plan.status.pod_name.as_ref(), Some(&create.name));
            prop_assert_eq!(create.restart_count, plan.status.restart_count);
            if let Some(pod) = &input.pod {
                // (Past attempt u32::MAX there is no new name to give; 4 billion restarts away.)
                if pod.attempt < u32::MAX {
                    prop_assert!(create.attempt > pod.attempt, "a new attempt, never a pod's name reused");
                }
                let current = pod.attempt > 0 && pod.attempt >= input.status.attempt;
                // (A create of the very same name, past attempt u32::MAX, makes no second pod.)
                if current && pod.is_live() && create.name != pod.name {
                    prop_assert_eq!(plan.delete_pod.as_ref(), Some(&pod.name));
                }
            }
            prop_assert!(input.status.shutdown.is_none());
            prop_assert!(!input.agent.suspend);
            prop_assert!(!matches!(input.policy, PolicyResolution::Missing(_)));
        }
    }

    #[test]
    fn a_failure_is_recorded_with_its_pod_only_for_a_restart_due_at_once(
        input in prop_oneof![arb_input(), arb_failed_alone()]
    ) {
        let plan = decide(input.clone());
        if let Some(create) = &plan.create_pod
            && plan.status.last_failure != input.status.last_failure
        {
            // The restart made at once after a failure, by an agent alone, whose pod ended.
            prop_assert!(input.group.is_none());
            prop_assert_eq!(&plan.delete_pod, &None);
            prop_assert!(plan.record_shutdown.is_none());
            prop_assert!(matches!(create.origin.trigger, Some(Trigger::Failure | Trigger::HeartbeatLost)));
            let ended = input.pod.as_ref().expect("a pod ended");
            prop_assert!(!ended.is_live());
            // The record is the ended pod's attempt: the status's own, or a later one adopted
            // from the pod when the write that recorded its creation was lost.
            let record = &plan.status.restart_history[0];
            prop_assert_eq!(record.attempt, ended.attempt);
            prop_assert!(record.attempt >= input.status.attempt);
            prop_assert_eq!(record.backoff, Some(Duration::ZERO));
            prop_assert_eq!(&record.restarted_at, &Some(Time(t_whole(input.now))));
        }
        // Otherwise a failure is written before any pod replaces it.
        let options = Options { restart_at_once: false };
        let plan = decide_with(input.clone(), options);
        if plan.create_pod.is_some() {
            prop_assert_eq!(&plan.status.last_failure, &input.status.last_failure);
            prop_assert!(plan.record_shutdown.is_none());
        }
    }

    #[test]
    fn a_status_write_lost_after_a_restart_made_at_once_is_recovered(input in arb_failed_alone()) {
        let plan = decide(input.clone());
        let Some(create) = &plan.create_pod else { return Ok(()) };
        if plan.status.last_failure == input.status.last_failure {
            return Ok(());
        }
        // The pod was created; the status write that recorded the failure and the restart was
        // lost. The pod that ended is still there.
        let mut lost = input.clone();
        lost.previous = input.pod.clone();
        let mut pod = lost.previous.clone().expect("a pod ended");
        pod.name = create.name.clone();
        pod.attempt = create.attempt;
        pod.origin = create.origin.clone();
        pod.created_at = input.now;
        pod.phase = PodPhase::Pending;
        pod.deleting = false;
        pod.ready = false;
        pod.reason = None;
        pod.message = None;
        pod.disruption = None;
        pod.containers = vec![ContainerFacts {
            name: "agent".to_string(),
            state: ContainerPhase::Waiting { reason: None, message: None },
        }];
        pod.agent_container = None;
        pod.template_hash = Some(input.agent.template_hash.clone());
        lost.pod = Some(pod);
        let again = decide(lost);
        prop_assert_eq!(&again.create_pod, &None);
        prop_assert_eq!(&again.delete_pod, &None);
        prop_assert_eq!(&again.status, &plan.status, "recorded as the lost write had it");
        let reasons: Vec<_> = again.events.iter().map(|e| e.reason).collect();
        let before: Vec<_> = plan.events.iter().map(|e| e.reason).collect();
        prop_assert_eq!(reasons, before, "its Events, lost with it, go out");
    }

    #[test]
    fn an_adopted_pod_is_never_restarted_for_a_request_it_already_served(input in arb_input()) {
        let plan = decide(input.clone());
        let Some(pod) = &input.pod else { return Ok(()) };
        let adopted = pod.attempt > input.status.attempt
            && input.status.shutdown.is_none()
            && pod.origin.handled_restart.is_some()
            && pod.origin.handled_restart == input.agent.restart_requested;
        if adopted {
            prop_assert_eq!(&plan.status.handled_restart_request, &pod.origin.handled_restart);
            prop_assert!(
                !plan.events.iter().any(|e| e.reason == EventReason::ManualRestart),
                "the request the pod was created for is not acted on again"
            );
        }
    }

    #[test]
    fn a_recorded_kill_is_carried_out_while_the_pod_lives(input in arb_input()) {
        let plan = decide(input.clone());
        let stopped = matches!(
            input.status.phase,
            Some(Phase::BackingOff | Phase::CircuitOpen | Phase::Stopped)
        );
        if let Some(pod) = &input.pod
            && stopped
            && input.status.shutdown.is_none()
            && input.status.attempt > 0
            && pod.attempt == input.status.attempt
            // Something in it still runs: a pod whose containers all ended is kept for its
            // log, whatever phase it still shows (a real kubelet sets the phase a moment later).
            && pod.needs_kill()
        {
            prop_assert_eq!(plan.delete_pod.as_ref(), Some(&pod.name));
        }
    }

    #[test]
    fn history_never_exceeds_the_history_limit(input in arb_input()) {
        let plan = decide(input.clone());
        // A missing policy holds creates only: the history is kept under the built-in limit.
        let decided = input.status.shutdown.is_none();
        if decided {
            // Even when the limit was lowered since the history was written.
            let limit = history_limit(&input);
            prop_assert!(
                plan.status.restart_history.len() <= limit,
                "{} entries, limit {limit}",
                plan.status.restart_history.len()
            );
        } else {
            // While shut down, the history is left as it is.
            prop_assert_eq!(&plan.status.restart_history, &input.status.restart_history);
        }
    }

    #[test]
    fn counters_never_go_backwards_and_messages_stay_bounded(input in arb_input()) {
        let plan = decide(input.clone());
        let s = &plan.status;
        prop_assert!(s.restart_count >= input.status.restart_count);
        prop_assert!(s.attempt >= input.status.attempt);
        prop_assert_eq!(s.observed_generation, Some(input.agent.generation));
        if s.last_failure != input.status.last_failure
            && let Some(message) = s.last_failure.as_ref().and_then(|f| f.message.as_ref())
        {
            prop_assert!(message.len() <= 1024);
        }
        // One condition per type; those evaluated now are observed at this generation.
        // (While shut down the policy is not looked at, so PolicyResolved keeps its own.)
        let types: std::collections::BTreeSet<_> =
            s.conditions.iter().map(|c| c.type_.as_str()).collect();
        prop_assert_eq!(types.len(), s.conditions.len());
        let mut evaluated = vec!["Ready", "CircuitBreakerOpen"];
        if input.status.shutdown.is_none() {
            evaluated.push("PolicyResolved");
        }
        for type_ in evaluated {
            let c = s.conditions.iter().find(|c| c.type_ == type_);
            prop_assert_eq!(
                c.and_then(|c| c.observed_generation),
                Some(input.agent.generation),
                "{}",
                type_
            );
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn nothing_panics_on_arbitrary_input(
        input in arb_input(),
        (_, pod) in arb_pod(),
        startup in arb_duration(),
        text in prop_oneof![".{0,200}", "\\PC{1000,1100}"],
    ) {
        use agent_supervisor::supervise::classify::{self, Liveness, Verdict};
        let _ = decide(input.clone());
        let verdict = classify::classify(
            &pod,
            startup.as_std(),
            Liveness {
                heartbeat: input.agent.heartbeat.as_ref(),
                lease: input.lease.as_ref(),
            },
            input.now,
        );
        if let Verdict::Ended { ending, .. } = verdict
            && let Some(message) = ending.message
        {
            prop_assert!(message.len() <= classify::MESSAGE_LIMIT);
        }
        let _ = agent_supervisor::supervise::last_words::shutdown_request(&text);
        let cut = classify::truncate(text.clone());
        prop_assert!(cut.len() <= classify::MESSAGE_LIMIT);
        prop_assert!(text.starts_with(&cut));
    }
}
