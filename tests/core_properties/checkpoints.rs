//! Checkpoints over random streams of reports and endings: the checkpoint handed to an attempt
//! is always the newest that is not poisoned, a poisoned one failed `maxFailures` resumes in a
//! row, the progress recorded never goes back, and nothing grows past its bound.

use agent_supervisor::api::{BackoffType, RestartPolicySpec};
use agent_supervisor::supervise::progress::resume_point;
use agent_supervisor::supervise::{Plan, PolicyResolution};
use proptest::prelude::*;

use crate::config;
use crate::sim::Sim;

#[derive(Clone, Debug)]
enum Step {
    /// The running attempt reports on the Lease it holds: a progress step (negative: it goes
    /// back), a checkpoint (one of a few names), or a value that is no number.
    Report {
        progress: Option<i64>,
        checkpoint: Option<u8>,
        garbage: bool,
    },
    /// It crashes after running `ran` seconds, perhaps naming a checkpoint in its last words.
    Crash { ran: u64, checkpoint: Option<u8> },
    /// It is evicted: a disruption, no failed resume.
    Evicted,
    /// A person resets it.
    Reset,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (
            proptest::option::of(-3i64..20),
            proptest::option::of(0u8..6),
            proptest::bool::weighted(0.1)
        )
            .prop_map(|(progress, checkpoint, garbage)| Step::Report {
                progress,
                checkpoint,
                garbage
            }),
        5 => (
            prop_oneof![Just(1u64), Just(30), Just(700)],
            proptest::option::of(0u8..6)
        )
            .prop_map(|(ran, checkpoint)| Step::Crash { ran, checkpoint }),
        1 => Just(Step::Evicted),
        1 => Just(Step::Reset),
    ]
}

/// Immediate restarts, no breaker and no limit (so every crash is followed by an attempt);
/// `keep` checkpoints kept, `max_failures` failed resumes poison.
fn policy(keep: u32, max_failures: u32) -> RestartPolicySpec {
    let mut policy = RestartPolicySpec::default();
    policy.backoff.kind = BackoffType::Immediate;
    policy.circuit_breaker.failure_threshold = 0;
    policy.checkpoints.keep = keep;
    policy.checkpoints.max_failures = max_failures;
    policy
}

/// What must hold of every plan.
fn check(
    plan: &Plan,
    keep: u32,
    max_failures: u32,
    progress: &mut u64,
) -> Result<(), TestCaseError> {
    let s = &plan.status;
    prop_assert!(s.checkpoints.len() <= keep as usize, "{:?}", s.checkpoints);
    let mut refs: Vec<_> = s.checkpoints.iter().map(|c| &c.reference).collect();
    refs.sort();
    refs.dedup();
    prop_assert_eq!(refs.len(), s.checkpoints.len(), "each checkpoint once");
    for c in &s.checkpoints {
        prop_assert!(!c.poisoned || c.failures >= max_failures, "{c:?}");
        prop_assert!(c.failures <= max_failures, "{c:?}");
    }
    if let Some(new) = &plan.create_pod {
        prop_assert_eq!(
            new.origin.checkpoint.as_ref(),
            resume_point(&s.checkpoints).map(|c| &c.reference),
            "an attempt resumes from the newest good checkpoint"
        );
        prop_assert_eq!(new.progress, s.progress.as_ref().map(|p| p.value));
    }
    let now = s.progress.as_ref().map_or(0, |p| p.value);
    prop_assert!(
        now >= *progress,
        "progress went back from {} to {now}",
        *progress
    );
    *progress = now;
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn checkpoints_follow_the_reports_and_the_failed_resumes(
        keep in 1u32..5,
        max_failures in 1u32..4,
        steps in proptest::collection::vec(arb_step(), 1..40),
    ) {
        let named = PolicyResolution::Named("p".into(), policy(keep, max_failures));
        let mut sim = Sim::running(named).at_once();
        let (mut now, mut reported, mut progress, mut resets) = (20i64, 0i64, 0u64, 0);
        for step in steps {
            now += 1;
            // The current attempt runs (a pod just created starts now).
            let started = now;
            sim.runs(started);
            now += 1;
            let plan = match step {
                Step::Report { progress: delta, checkpoint, garbage } => {
                    if let Some(delta) = delta {
                        reported += delta;
                    }
                    let value = if garbage { "lots".to_string() } else { reported.to_string() };
                    let checkpoint = checkpoint.map(|c| format!("step-{c}"));
                    sim.reports(delta.map(|_| value.as_str()), checkpoint.as_deref());
                    sim.at(now).step()
                }
                Step::Crash { ran, checkpoint } => {
                    now += ran as i64;
                    let message = checkpoint
                        .map(|c| format!(r#"{{"checkpoint": "step-{c}"}}"#));
                    sim.runs(now - ran as i64).exits(1, message.as_deref(), now);
                    sim.at(now).step()
                }
                Step::Evicted => {
                    sim.evicted();
                    sim.at(now).step()
                }
                Step::Reset => {
                    resets += 1;
                    sim.input.agent.reset_requested = Some(resets.to_string());
                    sim.at(now).step()
                }
            };
            check(&plan, keep, max_failures, &mut progress)?;
            // A restart recorded but not yet made is made now, as the operator would.
            if plan.create_pod.is_none() && sim.status().next_restart_at.is_some() {
                let plan = sim.at(now).step();
                check(&plan, keep, max_failures, &mut progress)?;
            }
        }
    }
}
