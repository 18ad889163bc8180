//! What the Agent asks for: a template change rolls the pod out, and the policy it names is
//! missing, found, or the namespace default.

use agent_supervisor::api::{Backoff, BackoffType, RestartPolicySpec, Trigger};
use agent_supervisor::supervise::conditions::{POLICY_RESOLVED, READY};
use agent_supervisor::supervise::{EventReason, NewPod, PodOrigin, PolicyResolution};

use crate::build::{condition, fast, limited, reasons, secs, time};
use crate::sim::Sim;

// --- Rollout ---------------------------------------------------------------------------------

#[test]
fn a_template_change_rolls_the_pod_out_without_counting() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    sim.restart_when_due();
    sim.runs(60);
    sim.at(70).step();
    let before = sim.status().clone();

    sim.input.agent.generation = 2;
    sim.input.agent.template_hash = "h2".to_string();
    let (killed, plan) = sim.at(100).restart_at_once();
    assert_eq!(killed.delete_pod.as_deref(), Some("researcher-2"));
    assert_eq!(
        killed.validate_pod.as_ref().map(|p| p.attempt),
        Some(3),
        "the new template is validated before the old pod goes"
    );
    assert_eq!(reasons(&killed), [EventReason::RolledOut]);
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(3));
    let s = &plan.status;
    assert_eq!(s.restart_history[0].trigger, Trigger::Rollout);
    assert_eq!(s.consecutive_failures, before.consecutive_failures);
    assert_eq!(s.recent_restarts, before.recent_restarts);
    assert_eq!(s.last_failure, before.last_failure);
    assert_eq!(s.observed_generation, Some(2));
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(2))
    );

    // The new pod has the new template: no second rollout.
    sim.runs(105);
    let again = sim.at(110).step();
    assert_eq!(again.create_pod, None);
    assert_eq!(again.delete_pod, None);
    assert!(again.events.is_empty());
}

// --- Policy resolution -----------------------------------------------------------------------

#[test]
fn a_missing_policy_starts_nothing_and_says_so_once() {
    let mut sim = Sim::new(PolicyResolution::Missing("strict".to_string()));
    let plan = sim.step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(reasons(&plan), [EventReason::PolicyNotFound]);
    assert!(plan.events[0].warning());
    let resolved = condition(&plan.status, POLICY_RESOLVED);
    assert_eq!(
        (resolved.status.as_str(), resolved.reason.as_str()),
        ("False", "PolicyNotFound")
    );
    assert!(resolved.message.contains("strict"), "{resolved:?}");
    assert_eq!(condition(&plan.status, READY).status, "False");

    let again = sim.at(100).step();
    assert_eq!(again.create_pod, None);
    assert!(again.events.is_empty());
    assert_eq!(
        condition(&again.status, POLICY_RESOLVED).last_transition_time,
        time(0)
    );

    // The policy appears: the first start is a first start, not a restart after a failure.
    sim.input.policy = PolicyResolution::Named("strict".to_string(), fast());
    let plan = sim.at(200).step();
    assert_eq!(
        plan.create_pod,
        Some(NewPod {
            name: "researcher-1".to_string(),
            attempt: 1,
            restart_count: 0,
            last_failure_reason: None,
            last_failure: None,
            progress: None,
            origin: PodOrigin::default(),
        })
    );
    assert_eq!(plan.status.last_failure, None);
    assert!(plan.status.restart_history.is_empty());
    assert_eq!(reasons(&plan), [EventReason::PodCreated]);
    let resolved = condition(&plan.status, POLICY_RESOLVED);
    assert_eq!(
        (
            resolved.status.as_str(),
            resolved.last_transition_time.clone()
        ),
        ("True", time(200))
    );

    // Deleted again: said again, once.
    sim.input.policy = PolicyResolution::Missing("strict".to_string());
    assert_eq!(reasons(&sim.at(300).step()), [EventReason::PolicyNotFound]);
    assert!(sim.at(400).step().events.is_empty());
}

#[test]
fn the_namespace_default_policy_governs_when_none_is_named() {
    let policy = RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Linear,
            initial_delay: secs(7),
            jitter: 0.0,
            ..Backoff::default()
        },
        ..RestartPolicySpec::default()
    };
    let mut sim = Sim::running(PolicyResolution::NamespaceDefault(policy));
    let plan = sim.crash(5, 100);
    assert_eq!(plan.status.next_restart_at, Some(time(107)));
    assert_eq!(
        condition(&plan.status, POLICY_RESOLVED).reason,
        "NamespaceDefault"
    );
}
