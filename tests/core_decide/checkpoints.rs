//! Progress and checkpoints: what the agent reports on its Lease or in its termination message
//! is recorded, each new attempt resumes from the newest good checkpoint, one that keeps failing
//! is poisoned, and hostile reports are set aside and said once.

use agent_supervisor::api::{BackoffType, Checkpoint, Progress, RestartPolicySpec, Trigger};
use agent_supervisor::supervise::{EventReason, Plan};

use crate::build::{fast, named, reasons, time};
use crate::sim::Sim;

/// Restarts at once, a breaker only after 10 failures in a row, 3 failed resumes poison.
fn immediate() -> RestartPolicySpec {
    let mut policy = fast();
    policy.backoff.kind = BackoffType::Immediate;
    policy.circuit_breaker.failure_threshold = 10;
    policy
}

/// The checkpoint the pod just created resumes from.
fn resumes_from(plan: &Plan) -> Option<String> {
    plan.create_pod
        .as_ref()
        .expect("a pod is created")
        .origin
        .checkpoint
        .clone()
}

fn refs(sim: &Sim) -> Vec<(String, u32, bool)> {
    let s = sim.status();
    s.checkpoints
        .iter()
        .map(|c| (c.reference.clone(), c.failures, c.poisoned))
        .collect()
}

/// An agent running attempt 1, which reported step-1 at t(20) and step-2 at t(30).
fn two_checkpoints() -> Sim {
    let mut sim = Sim::running(named(immediate())).at_once();
    sim.reports(Some("10"), Some("step-1"));
    sim.at(20).step();
    sim.reports(Some("25"), Some("step-2"));
    sim.at(30).step();
    sim
}

/// The current attempt runs from `at` and crashes at `at + 1` without reporting anything new;
/// the operator restarts it at once. Returns the plan that created the next pod.
fn crash_quietly(sim: &mut Sim, at: i64) -> Plan {
    sim.input.lease = None;
    sim.crash(at, at + 1)
}

#[test]
fn reports_on_the_lease_are_recorded_and_the_next_attempt_resumes_from_the_newest() {
    let mut sim = two_checkpoints();
    assert_eq!(
        sim.status().progress,
        Some(Progress {
            value: 25,
            at: time(30)
        })
    );
    assert_eq!(
        sim.status().checkpoints[0],
        Checkpoint {
            reference: "step-2".into(),
            at: time(30),
            attempt: 1,
            progress: Some(25),
            failures: 0,
            poisoned: false,
        }
    );
    assert_eq!(sim.status().checkpoints[1].reference, "step-1");
    // The same report again changes nothing: nothing to write.
    let again = sim.at(40).decide();
    assert_eq!(&again.status, sim.status());

    assert_eq!(
        sim.status().resumed_from,
        None,
        "attempt 1 started from scratch"
    );
    let plan = crash_quietly(&mut sim, 40);
    assert_eq!(resumes_from(&plan).as_deref(), Some("step-2"));
    assert_eq!(plan.status.resumed_from.as_deref(), Some("step-2"));
    assert_eq!(plan.create_pod.as_ref().unwrap().progress, Some(25));
    let record = &plan.status.restart_history[0];
    assert_eq!(record.checkpoint, None, "attempt 1 started from scratch");
    assert_eq!(record.progress, Some(25), "how far attempt 1 got");
}

#[test]
fn a_checkpoint_that_fails_its_resumes_is_poisoned_and_the_one_before_is_handed_out() {
    let mut sim = two_checkpoints();
    crash_quietly(&mut sim, 40); // attempt 1 ends: it resumed from nothing
    for (n, at) in [(1, 50), (2, 60)] {
        let plan = crash_quietly(&mut sim, at);
        assert_eq!(
            resumes_from(&plan).as_deref(),
            Some("step-2"),
            "failure {n}"
        );
        assert_eq!(sim.status().checkpoints[0].failures, n);
        assert_eq!(
            plan.status.restart_history[0].checkpoint.as_deref(),
            Some("step-2")
        );
    }
    let plan = crash_quietly(&mut sim, 70);
    assert!(
        reasons(&plan).contains(&EventReason::CheckpointPoisoned),
        "{plan:?}"
    );
    let note = &plan
        .events
        .iter()
        .find(|e| e.reason == EventReason::CheckpointPoisoned);
    assert!(
        note.unwrap().note.contains("resumes from step-1"),
        "{note:?}"
    );
    assert_eq!(
        refs(&sim),
        vec![("step-2".into(), 3, true), ("step-1".into(), 0, false)]
    );
    assert_eq!(resumes_from(&plan).as_deref(), Some("step-1"));

    // step-1 fails three times too: from scratch.
    for at in [80, 90] {
        crash_quietly(&mut sim, at);
    }
    let plan = crash_quietly(&mut sim, 100);
    assert_eq!(resumes_from(&plan), None, "every checkpoint is poisoned");
    assert_eq!(plan.create_pod.as_ref().unwrap().progress, Some(25));
}

#[test]
fn an_attempt_that_reports_a_newer_checkpoint_got_past_the_one_it_resumed_from() {
    let mut sim = two_checkpoints();
    crash_quietly(&mut sim, 40);
    crash_quietly(&mut sim, 50); // step-2 failed once
    assert_eq!(sim.status().checkpoints[0].failures, 1);
    sim.runs(60);
    sim.reports(Some("30"), Some("step-3"));
    sim.at(65).step();
    let plan = sim.crash(60, 70);
    assert_eq!(resumes_from(&plan).as_deref(), Some("step-3"));
    assert_eq!(
        refs(&sim),
        vec![
            ("step-3".into(), 0, false),
            ("step-2".into(), 0, false),
            ("step-1".into(), 0, false)
        ],
        "the run got past step-2: its count starts again"
    );
}

#[test]
fn the_termination_message_reports_before_the_crash_is_judged() {
    let mut sim = two_checkpoints();
    sim.input.lease = None;
    sim.runs(5)
        .exits(1, Some(r#"{"progress": 40, "checkpoint": "step-4"}"#), 45);
    let plan = sim.at(45).step();
    assert_eq!(resumes_from(&plan).as_deref(), Some("step-4"));
    assert_eq!(plan.status.restart_history[0].progress, Some(40));
    assert_eq!(
        plan.status.checkpoints[0].attempt, 1,
        "reported by attempt 1"
    );
}

#[test]
fn disruptions_are_no_failed_resumes() {
    let mut sim = two_checkpoints();
    crash_quietly(&mut sim, 40);
    sim.runs(50).evicted();
    let plan = sim.at(55).step();
    assert_eq!(
        plan.status.restart_history[0].trigger,
        Trigger::Disruption,
        "{plan:?}"
    );
    assert_eq!(sim.status().checkpoints[0].failures, 0);
}

#[test]
fn a_reset_gives_poisoned_checkpoints_another_chance() {
    let mut sim = two_checkpoints();
    for at in [40, 50, 60, 70] {
        crash_quietly(&mut sim, at);
    }
    assert!(sim.status().checkpoints[0].poisoned);
    sim.input.agent.reset_requested = Some("1".into());
    let plan = sim.at(75).step();
    assert!(reasons(&plan).contains(&EventReason::Reset));
    assert_eq!(
        refs(&sim),
        vec![("step-2".into(), 0, false), ("step-1".into(), 0, false)]
    );
    let plan = crash_quietly(&mut sim, 80);
    assert_eq!(resumes_from(&plan).as_deref(), Some("step-2"));
}

#[test]
fn a_report_left_on_the_lease_by_an_earlier_pod_is_not_this_attempts() {
    let mut sim = two_checkpoints();
    crash_quietly(&mut sim, 40);
    sim.runs(50);
    sim.reports(Some("99"), Some("step-9"));
    sim.input.lease.as_mut().unwrap().holder = Some("researcher-1".into());
    sim.at(55).step();
    assert_eq!(sim.status().progress.as_ref().map(|p| p.value), Some(25));
    assert_eq!(sim.status().checkpoints.len(), 2);
}

#[test]
fn hostile_reports_are_set_aside_and_said_once() {
    let mut sim = Sim::running(named(immediate())).at_once();
    sim.reports(Some("lots"), None);
    let plan = sim.at(20).step();
    assert_eq!(reasons(&plan), vec![EventReason::ReportIgnored]);
    assert!(plan.events[0].warning());
    assert_eq!(sim.status().progress, None);
    let plan = sim.at(30).step();
    assert!(plan.events.is_empty(), "said once: {plan:?}");

    sim.reports(Some("10"), Some(&"x".repeat(1 << 20)));
    let plan = sim.at(40).step();
    assert_eq!(reasons(&plan), vec![EventReason::ReportIgnored]);
    assert!(plan.events[0].note.contains("longer than 1024"), "{plan:?}");
    assert_eq!(sim.status().progress.as_ref().map(|p| p.value), Some(10));
    assert!(sim.status().checkpoints.is_empty());

    sim.reports(Some("3"), None);
    let plan = sim.at(50).step();
    assert!(
        plan.events[0].note.contains("lower than the 10"),
        "{plan:?}"
    );
    assert_eq!(sim.status().progress.as_ref().unwrap().at, time(40));
    assert!(sim.status().ignored_report.is_some());
}

#[test]
fn the_status_keeps_at_most_the_policys_number_of_checkpoints() {
    let mut policy = immediate();
    policy.checkpoints.keep = 2;
    let mut sim = Sim::running(named(policy)).at_once();
    for (i, at) in [(1, 20), (2, 30), (3, 40)] {
        sim.reports(None, Some(&format!("step-{i}")));
        sim.at(at).step();
    }
    let kept: Vec<_> = refs(&sim).into_iter().map(|(r, _, _)| r).collect();
    assert_eq!(kept, vec!["step-3".to_string(), "step-2".to_string()]);
}
