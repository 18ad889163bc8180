//! Spend and budgets over random streams of reports, crashes, evictions and budget changes:
//! the total is every attempt's last report counted once (a report read again, or one going
//! backwards, adds nothing), no pod is made while the budget is spent, a spent budget shuts the
//! agent down at once, and raising it above the total lifts that shutdown.

use agent_supervisor::api::{BackoffType, Budget, RestartPolicySpec};
use agent_supervisor::supervise::PolicyResolution;
use agent_supervisor::supervise::spend::Cost;
use proptest::prelude::*;
use std::collections::BTreeMap;

use crate::config;
use crate::sim::Sim;

#[derive(Clone, Debug)]
enum Step {
    /// The running attempt reports its spend so far on its Lease: up (or down) by this many
    /// cents from its last report, or garbage.
    Report { cents: i64, garbage: bool },
    /// It crashes, its last words saying it spent this many cents more than its last report
    /// (or saying nothing).
    Crash { more: Option<u64> },
    /// It is evicted: no last words.
    Evicted,
    /// The budget becomes this many cents.
    Budget { cents: u64 },
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (-5i64..40, proptest::bool::weighted(0.1))
            .prop_map(|(cents, garbage)| Step::Report { cents, garbage }),
        5 => proptest::option::of(0u64..30).prop_map(|more| Step::Crash { more }),
        1 => Just(Step::Evicted),
        1 => (50u64..400).prop_map(|cents| Step::Budget { cents }),
    ]
}

fn dollars(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// Immediate restarts, no breaker, no limit: only the budget stops it.
fn policy(max_cents: u64) -> PolicyResolution {
    let mut policy = RestartPolicySpec::default();
    policy.backoff.kind = BackoffType::Immediate;
    policy.circuit_breaker.failure_threshold = 0;
    policy.limits.max_restarts = 0;
    policy.budget = Some(Budget {
        max_cost: Some(dollars(max_cents)),
        max_tokens: None,
        window: None,
        warn_at: 0.8,
    });
    PolicyResolution::Named("p".into(), policy)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn spend_is_counted_once_and_no_pod_is_made_once_it_is_spent(
        first in 50u64..400,
        steps in proptest::collection::vec(arb_step(), 1..40),
    ) {
        let mut max = first;
        let mut sim = Sim::running(policy(max)).at_once();
        // The model: each attempt's last accepted report, in cents.
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        let mut now = 20i64;
        for step in steps {
            now += 2;
            let attempt = sim.status().attempt;
            let live = sim.input.pod.as_ref().is_some_and(|p| p.is_live());
            if live {
                sim.runs(now - 1);
            }
            match step {
                Step::Report { cents, garbage } if live => {
                    let before = last.get(&attempt).copied().unwrap_or(0);
                    let value = before as i64 + cents;
                    sim.reports(None, None);
                    let lease = sim.input.lease.as_mut().expect("a Lease");
                    lease.reported.spend = Some(if garbage || value < 0 {
                        r#"{"cost": "lots"}"#.to_string()
                    } else {
                        format!(r#"{{"cost": "{}"}}"#, dollars(value as u64))
                    });
                    if !garbage && value >= before as i64 {
                        last.insert(attempt, value as u64);
                    }
                }
                Step::Crash { more } if live => {
                    let before = last.get(&attempt).copied().unwrap_or(0);
                    let message = more.map(|m| {
                        last.insert(attempt, before + m);
                        format!(r#"{{"spend": {{"cost": "{}"}}}}"#, dollars(before + m))
                    });
                    sim.exits(1, message.as_deref(), now);
                }
                Step::Evicted if live => {
                    sim.evicted();
                }
                Step::Budget { cents } => {
                    max = cents;
                    sim.input.policy = policy(max);
                }
                _ => {}
            }
            let total: u64 = last.values().sum();
            let plan = sim.at(now).step();
            // A restart recorded and not yet made is made now, as the operator would.
            let plans = if plan.create_pod.is_none() && plan.status.next_restart_at.is_some() {
                vec![plan, sim.at(now).step()]
            } else {
                vec![plan]
            };
            for plan in &plans {
                let s = &plan.status;
                let cost = s.spend.as_ref().and_then(|s| s.cost.as_deref()).and_then(Cost::parse);
                let want = (total > 0 || cost.is_some()).then(|| Cost::parse(&dollars(total)).unwrap());
                prop_assert_eq!(cost, want, "each attempt's last report once: {:?}", last);
                if plan.create_pod.is_some() {
                    prop_assert!(total < max, "a pod at {} of {}", total, max);
                }
                let by_budget = s.shutdown.as_ref().is_some_and(|x| x.source.as_deref() == Some("Budget"));
                prop_assert_eq!(by_budget, total >= max, "shut down iff spent: {} of {}", total, max);
            }
        }
    }
}
