//! How resuming from checkpoints composes with the rest: only an attempt's own counted failure
//! is a failed resume. A restart by the group, a restart held by an outage (also one held after
//! it was counted), a `retryAfter`, a suspension and a rollout hand the same checkpoint on and
//! leave its failures alone.

use agent_supervisor::api::{
    BackoffType, FailureReason, Outage, OutageState, Phase, RestartPolicySpec, Trigger,
};
use agent_supervisor::supervise::fingerprint::fingerprint;
use agent_supervisor::supervise::group::Directive;
use agent_supervisor::supervise::{Plan, PolicyResolution};

use crate::build::{fast, named, time};
use crate::clock::t;
use crate::sim::Sim;

const PROVIDER: &str = "provider returned 503";

/// Backoff of 10 s, a breaker only after 10 failures in a row.
fn policy() -> RestartPolicySpec {
    let mut policy = fast();
    policy.circuit_breaker.failure_threshold = 10;
    policy
}

/// Attempt 1 reported checkpoint step-1 and crashed; attempt 2, resumed from it, runs since
/// t(45).
fn resumed(sim: Sim) -> Sim {
    let mut sim = sim.started();
    sim.reports(Some("10"), Some("step-1")).at(20).step();
    sim.input.lease = None;
    sim.crash(5, 30);
    if sim.input.group.is_some() {
        // A member's restart is the group's to order.
        sim.group().restart = Some((1, t(40)));
    }
    let plan = sim.restart_when_due();
    assert_eq!(checkpoint_of(&plan).as_deref(), Some("step-1"));
    sim.runs(45).at(50).step();
    assert_eq!(failures(&sim), 0);
    sim
}

fn checkpoint_of(plan: &Plan) -> Option<String> {
    let pod = plan.create_pod.as_ref().expect("a pod is created");
    pod.origin.checkpoint.clone()
}

/// The failed resumes recorded against step-1.
fn failures(sim: &Sim) -> u32 {
    let c = &sim.status().checkpoints[0];
    assert_eq!(c.reference, "step-1");
    assert!(!c.poisoned);
    c.failures
}

#[test]
fn its_own_crash_is_a_failed_resume() {
    let mut sim = resumed(Sim::new(named(policy())));
    sim.crash(45, 60);
    assert_eq!(failures(&sim), 1, "the control: a crash counts");
}

#[test]
fn a_restart_by_its_group_is_no_failed_resume() {
    let team = Directive {
        group: "team".to_string(),
        listed: true,
        ..Directive::default()
    };
    let mut sim = resumed(Sim::new(named(policy())).in_group(team));
    // A sibling crashed: the group restarts attempt 2 at t(100).
    sim.group().restart = Some((2, t(100)));
    let stopped = sim.at(60).step();
    assert_eq!(stopped.delete_pod.as_deref(), Some("researcher-2"));
    assert_eq!(stopped.status.restart_history[0].trigger, Trigger::Group);
    let plan = sim.at(100).step();
    assert_eq!(checkpoint_of(&plan).as_deref(), Some("step-1"));
    assert_eq!(failures(&sim), 0);
}

fn provider_outage() -> Outage {
    Outage {
        fingerprint: fingerprint(FailureReason::Error, Some(1), Some(PROVIDER), &[]),
        reason: FailureReason::Error,
        message: Some(PROVIDER.to_string()),
        since: time(55),
        agents: 3,
        state: OutageState::Holding,
        probe_agent: None,
        probe_attempt: None,
        probe_started_at: None,
        next_probe_at: Some(time(400)),
        failed_probes: 0,
    }
}

#[test]
fn a_restart_held_by_an_outage_is_no_failed_resume() {
    let mut sim = resumed(Sim::new(named(policy())));
    sim.input.outages = vec![provider_outage()];
    sim.runs(45).exits(1, Some(PROVIDER), 60);
    let plan = sim.at(60).step();
    assert_eq!(plan.status.phase, Some(Phase::CircuitOpen), "held");
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::Outage);
    assert_eq!(failures(&sim), 0);
}

#[test]
fn a_failure_held_after_it_was_counted_is_no_failed_resume_either() {
    let mut sim = resumed(Sim::new(named(policy())));
    sim.runs(45).exits(1, Some(PROVIDER), 60);
    sim.at(60).step();
    assert_eq!(failures(&sim), 1, "counted, its restart pending");
    // The outage opens for it before the restart is made: the failure no longer counts.
    sim.input.outages = vec![provider_outage()];
    let plan = sim.at(65).step();
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::Outage);
    assert_eq!(plan.status.consecutive_failures, 1, "only attempt 1's");
    assert_eq!(failures(&sim), 0);
}

#[test]
fn a_poisoning_undone_by_an_outage_hands_the_checkpoint_out_again() {
    let mut policy = policy();
    policy.checkpoints.max_failures = 1;
    let mut sim = resumed(Sim::new(named(policy)));
    sim.runs(45).exits(1, Some(PROVIDER), 60);
    let plan = sim.at(60).step();
    assert!(
        plan.status.checkpoints[0].poisoned,
        "one failed resume poisons"
    );
    sim.input.outages = vec![provider_outage()];
    sim.at(65).step();
    assert_eq!(failures(&sim), 0, "and the outage takes it back");
    // The outage ends: the held restart resumes from step-1 again.
    sim.input.outages.clear();
    let plan = sim.at(70).step();
    assert_eq!(checkpoint_of(&plan).as_deref(), Some("step-1"));
}

#[test]
fn a_retry_after_is_no_failed_resume() {
    let mut sim = resumed(Sim::new(named(policy())));
    sim.runs(45).exits(
        1,
        Some(r#"{"retryAfter":"30s","reason":"rate limited"}"#),
        60,
    );
    let plan = sim.at(60).step();
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::RetryAfter);
    let plan = sim.restart_when_due();
    assert_eq!(checkpoint_of(&plan).as_deref(), Some("step-1"));
    assert_eq!(failures(&sim), 0);
}

#[test]
fn a_suspension_is_no_failed_resume() {
    let mut sim = resumed(Sim::new(named(policy())));
    sim.input.agent.suspend = true;
    let plan = sim.at(60).step();
    assert_eq!(plan.status.phase, Some(Phase::Suspended));
    sim.input.agent.suspend = false;
    let plan = sim.at(80).step();
    assert_eq!(checkpoint_of(&plan).as_deref(), Some("step-1"));
    assert_eq!(failures(&sim), 0);
}

#[test]
fn a_rollout_keeps_the_checkpoints() {
    let mut immediate = policy();
    immediate.backoff.kind = BackoffType::Immediate;
    let mut sim = resumed(Sim::new(PolicyResolution::Named("p".into(), immediate)));
    sim.input.agent.generation = 2;
    sim.input.agent.template_hash = "h2".to_string();
    let (_, plan) = sim.at(60).restart_at_once();
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::Rollout);
    assert_eq!(checkpoint_of(&plan).as_deref(), Some("step-1"));
    assert_eq!(plan.create_pod.as_ref().unwrap().progress, Some(10));
    assert_eq!(failures(&sim), 0);
}
