//! Random walks through an agent's life, and the invariants every plan along them keeps.

use agent_supervisor::api::{AgentStatus, BreakerState, Phase};
use agent_supervisor::supervise::{
    EventReason, Input, Plan, PodFacts, PolicyResolution, decide, pod_name,
};
use proptest::prelude::*;

use crate::steps::{Step, arb_step, arb_walk_policy};
use crate::world::World;
use crate::{config, history_limit};

fn state(status: &AgentStatus) -> BreakerState {
    status
        .circuit_breaker
        .as_ref()
        .map_or(BreakerState::Closed, |b| b.state)
}

/// What every plan along a walk must satisfy.
pub(crate) fn check(input: &Input, plan: &Plan, pods: &[PodFacts], trace: &[Step]) {
    let s = &plan.status;
    let has = |reason: EventReason| plan.events.iter().any(|e| e.reason == reason);
    let context = || format!("{input:#?}\n{plan:#?}\n{trace:#?}");

    // The breaker moves only along its edges.
    let (from, to) = (state(&input.status), state(s));
    use BreakerState::*;
    let legal = match (from, to) {
        _ if from == to => true,
        (Closed, Open) | (HalfOpen, Open) => has(EventReason::CircuitOpened),
        (Open, HalfOpen) => true,
        (HalfOpen, Closed) => has(EventReason::CircuitClosed) || has(EventReason::Reset),
        (Open, Closed) => has(EventReason::Reset),
        (Closed, HalfOpen) => false,
        _ => unreachable!(),
    };
    assert!(legal, "breaker {from:?} → {to:?}\n{}", context());
    let trips = |st: &AgentStatus| st.circuit_breaker.as_ref().map_or(0, |b| b.trips);
    if to == Open && from != Open {
        // Closed in this same decision (a reset, or a probe that had run for resetAfter), the
        // count starts again.
        let closed = has(EventReason::Reset) || has(EventReason::CircuitClosed);
        let before = if closed { 0 } else { trips(&input.status) };
        assert_eq!(trips(s), before + 1, "{}", context());
    }

    // The breaker is open exactly while the agent waits for its probe (or is left alone).
    if to == Open {
        assert!(
            matches!(
                s.phase,
                Some(Phase::CircuitOpen | Phase::Suspended | Phase::Shutdown)
            ),
            "breaker open in phase {:?}\n{}",
            s.phase,
            context()
        );
    }
    if s.phase == Some(Phase::CircuitOpen) {
        assert_eq!(to, Open, "{}", context());
    }
    assert_eq!(
        s.next_restart_at.is_some(),
        s.phase == Some(Phase::BackingOff),
        "nextRestartAt only while backing off\n{}",
        context()
    );

    // Shutdowns.
    if let Some(shutdown) = &input.status.shutdown {
        assert_eq!(plan.create_pod, None, "{}", context());
        assert_eq!(plan.delete_pod, None, "{}", context());
        assert_eq!(s.shutdown.as_ref(), Some(shutdown), "{}", context());
    }
    if let Some(recorded) = &plan.record_shutdown {
        assert_eq!(s.shutdown.as_ref(), Some(recorded), "{}", context());
        assert_eq!(s.phase, Some(Phase::Shutdown));
    }

    // Pods: created with a fresh, derived name; never while suspended or without a policy.
    if let Some(create) = &plan.create_pod {
        assert_eq!(create.name, pod_name(&input.agent.name, create.attempt));
        assert!(
            pods.iter().all(|p| p.attempt < create.attempt),
            "attempt {} reused\n{}",
            create.attempt,
            context()
        );
        assert!(!input.agent.suspend, "{}", context());
        assert!(
            !matches!(input.policy, PolicyResolution::Missing(_)),
            "{}",
            context()
        );
    }
    if let Some(name) = &plan.delete_pod {
        assert!(
            pods.iter().any(|p| &p.name == name),
            "deletes only its own pods\n{}",
            context()
        );
    }

    // Bounded and monotonic. (While shut down, the history is left as it is, even if the
    // limit was lowered since.)
    assert!(
        input.status.shutdown.is_some() || s.restart_history.len() <= history_limit(input),
        "{}",
        context()
    );
    assert!(
        s.restart_count >= input.status.restart_count,
        "{}",
        context()
    );
    assert!(
        s.restart_history
            .iter()
            .skip(1)
            .all(|r| r.restarted_at.is_some()),
        "only the newest restart can be pending\n{}",
        context()
    );

    // Conditions keep their transition time unless their status flips.
    for before in &input.status.conditions {
        if let Some(after) = s.conditions.iter().find(|c| c.type_ == before.type_)
            && after.status == before.status
        {
            assert_eq!(
                after.last_transition_time,
                before.last_transition_time,
                "{}",
                context()
            );
        }
    }

    // The same input gives the same plan.
    assert_eq!(&decide(input.clone()), plan);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn walks_keep_every_invariant(
        policy in arb_walk_policy(),
        heartbeat in proptest::option::of(5u64..300),
        steps in proptest::collection::vec(arb_step(), 1..40),
    ) {
        let mut world = World::new(policy, heartbeat);
        let mut trace = Vec::new();
        world.settle(&trace);
        for step in steps {
            trace.push(step.clone());
            world.happen(&step);
            world.decide(&trace);
            world.settle(&trace);
        }
    }
}
