//! Progress as a judge over random streams of renewals and crashes: a run is stopped as
//! `NoProgress` only once its progress has stood still for `stallTimeout`, and with
//! `requiredForReset` no run resets the failure count unless its progress grew.

use agent_supervisor::api::{
    BackoffType, Duration, FailureReason, Heartbeat, ProgressPolicy, RestartPolicySpec,
};
use agent_supervisor::supervise::{Plan, PolicyResolution};
use proptest::prelude::*;

use crate::config;
use crate::sim::Sim;

/// The heartbeat's grace period: a run that never reports is judged from its end.
const GRACE: i64 = 60;

#[derive(Clone, Debug)]
enum Step {
    /// After `wait` seconds the running attempt renews its Lease, its progress one higher
    /// (`grow`) or the same (the agent's first report counts as growth, from nothing).
    Renew { wait: i64, grow: bool },
    /// After `wait` seconds it crashes.
    Crash { wait: i64 },
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0i64..150, any::<bool>()).prop_map(|(wait, grow)| Step::Renew { wait, grow }),
        1 => prop_oneof![0i64..20, 0i64..400].prop_map(|wait| Step::Crash { wait }),
    ]
}

/// Immediate restarts, no breaker and no limit; progress required for a reset.
fn policy(reset_after: u64, stall: Option<u64>) -> RestartPolicySpec {
    let mut policy = RestartPolicySpec::default();
    policy.backoff.kind = BackoffType::Immediate;
    policy.circuit_breaker.failure_threshold = 0;
    policy.reset_after = Duration::from_secs(reset_after);
    policy.progress = Some(ProgressPolicy {
        stall_timeout: stall.map(Duration::from_secs),
        required_for_reset: true,
        max_extension: None,
    });
    policy
}

/// What the test knows of the current attempt: when it started running, and when its
/// progress last grew.
struct Attempt {
    number: u32,
    since: i64,
    grew_at: Option<i64>,
}

fn check(
    plan: &Plan,
    before: &agent_supervisor::api::AgentStatus,
    attempt: &Attempt,
    now: i64,
    stall: Option<u64>,
) -> Result<(), TestCaseError> {
    let s = &plan.status;
    let new_failure = s.last_failure != before.last_failure;
    if new_failure && s.last_failure.as_ref().map(|f| f.reason) == Some(FailureReason::NoProgress) {
        let stall = stall.expect("no stall without a stallTimeout") as i64;
        let from = attempt.grew_at.unwrap_or(attempt.since + GRACE);
        prop_assert!(
            now - from >= stall,
            "stopped at {now}, {}s after its progress last moved (stallTimeout {stall}s)",
            now - from
        );
    }
    let reset = before.consecutive_failures > 0
        && (s.consecutive_failures == 0 || (new_failure && s.consecutive_failures == 1));
    if reset {
        prop_assert!(
            attempt.grew_at.is_some(),
            "attempt {} reset the count from {} without progress",
            attempt.number,
            before.consecutive_failures
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn runs_are_judged_by_their_progress(
        reset_after in prop_oneof![Just(30u64), Just(100)],
        stall in proptest::option::of(40u64..300),
        steps in proptest::collection::vec(arb_step(), 1..40),
    ) {
        let named = PolicyResolution::Named("p".into(), policy(reset_after, stall));
        let mut sim = Sim::new(named).at_once();
        sim.input.agent.heartbeat = Some(Heartbeat {
            timeout: Duration::from_secs(100_000),
            grace_period: Some(Duration::from_secs(GRACE as u64)),
        });
        sim.step();
        let (mut now, mut value, mut reported) = (0i64, 0u64, false);
        let mut attempt = Attempt { number: 0, since: 0, grew_at: None };
        for step in steps {
            now += 1;
            // The newest pod's attempt (a first pod's status may not be written yet).
            let newest = sim.input.pod.as_ref().map_or(0, |p| p.attempt);
            if newest != attempt.number {
                // A new attempt: it starts running now.
                sim.runs(now);
                attempt = Attempt { number: newest, since: now, grew_at: None };
            }
            let before = sim.status().clone();
            let plan = match step {
                Step::Renew { wait, grow } => {
                    now += wait;
                    if grow || !reported {
                        value += u64::from(grow);
                        attempt.grew_at = Some(now);
                        reported = true;
                    }
                    sim.reports(Some(&value.to_string()), None);
                    sim.at(now).step()
                }
                Step::Crash { wait } => {
                    now += wait;
                    sim.runs(attempt.since).exits(1, None, now);
                    sim.at(now).step()
                }
            };
            check(&plan, &before, &attempt, now, stall)?;
            // A restart recorded but not yet made is made now, as the operator would.
            if plan.create_pod.is_none() && sim.status().next_restart_at.is_some() {
                let before = sim.status().clone();
                let plan = sim.at(now).step();
                check(&plan, &before, &attempt, now, stall)?;
            }
        }
    }
}
