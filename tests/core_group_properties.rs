//! Property tests for supervision groups: random walks through a small supervision tree — a root
//! group of two or three Agents and a child group of two — where pods crash or are evicted, time
//! passes, the kubelet starts pods, and one object at a time is reconciled, each through the same
//! facts the IO shell gathers. After every step: at most one live pod per Agent; each crash
//! restarted at most once by its group; no group over its intensity unless it gave up; a child
//! group's give-up taken in by its parent alone; a sibling stopped by its group recorded with
//! trigger `Group` and counted toward none of its own limits; every decision repeatable. At the
//! end, with no more failures, the tree runs again or has given up and stopped everything.
//!
//! `PROPTEST_CASES=1000 cargo test --test core_group_properties` walks longer.

#[path = "common/clock.rs"]
mod clock;
#[path = "common/pods.rs"]
mod pods;
#[path = "core_group_properties/world.rs"]
mod world;

use agent_supervisor::api::{
    AgentGroupSpec, AutoShutdown, Backoff, BackoffType, CircuitBreakerPolicy, Duration, Limits,
    Member, RestartPolicySpec, StartOrder, Strategy as GroupStrategy,
};
use proptest::prelude::*;

use world::{KIDS, World};

const CASES: u32 = 256;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(CASES);
    ProptestConfig {
        cases,
        // Failures are reported with their minimal input; nothing is written next to the tests.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// One thing that happens in the tree's world.
#[derive(Clone, Debug)]
pub enum Step {
    /// Time passes, in seconds.
    Wait(i64),
    /// An Agent's newest live pod exits with code 1.
    Crash(usize),
    /// An Agent's newest live pod is evicted.
    Evict(usize),
    /// An Agent's newest pod, if pending, runs and is ready.
    Runs(usize),
    /// One object (a group, or an Agent) is reconciled.
    Reconcile(usize),
    /// Deleted and finished pods are garbage collected.
    Gc,
    /// Someone annotates the root group with a new `reset-requested-at` value.
    ResetRoot,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => prop_oneof![0i64..5, 0i64..60, 0i64..700].prop_map(Step::Wait),
        2 => (0usize..8).prop_map(Step::Crash),
        1 => (0usize..8).prop_map(Step::Evict),
        3 => (0usize..8).prop_map(Step::Runs),
        10 => (0usize..8).prop_map(Step::Reconcile),
        1 => Just(Step::Gc),
        1 => Just(Step::ResetRoot),
    ]
}

fn arb_group(agents: &'static [&'static str]) -> impl Strategy<Value = AgentGroupSpec> {
    (
        prop_oneof![
            Just(GroupStrategy::OneForOne),
            Just(GroupStrategy::OneForAll),
            Just(GroupStrategy::RestForOne),
        ],
        prop_oneof![Just(StartOrder::Parallel), Just(StartOrder::Sequential)],
        0u32..4,
        prop_oneof![Just(30u64), Just(120), Just(600)],
    )
        .prop_map(
            move |(strategy, start_order, max_restarts, window)| AgentGroupSpec {
                strategy,
                members: agents.iter().map(|a| Member::agent(a)).collect(),
                max_restarts,
                window: Duration::from_secs(window),
                start_order,
                auto_shutdown: AutoShutdown::Never,
                budget: None,
            },
        )
}

/// The root: two or three Agents and the child group, at any position.
fn arb_root() -> impl Strategy<Value = AgentGroupSpec> {
    (arb_group(&["a1", "a2", "a3"]), 2usize..=3, 0usize..=3).prop_map(|(mut spec, n, at)| {
        spec.members.truncate(n);
        spec.members.insert(at.min(n), Member::group(KIDS));
        spec
    })
}

/// The members' policy: any backoff that restarts, a breaker or none, no limit of its own.
fn arb_policy() -> impl Strategy<Value = RestartPolicySpec> {
    (
        prop_oneof![
            Just(BackoffType::Immediate),
            Just(BackoffType::Linear),
            Just(BackoffType::Exponential),
        ],
        0u64..20,
        0.0f64..0.5,
        0u32..4,
        10u64..120,
        30u64..600,
    )
        .prop_map(
            |(kind, initial, jitter, threshold, open, reset_after)| RestartPolicySpec {
                backoff: Backoff {
                    kind,
                    initial_delay: Duration::from_secs(initial),
                    max_delay: Duration::from_secs(120),
                    multiplier: 2.0,
                    jitter,
                },
                reset_after: Duration::from_secs(reset_after),
                limits: Limits {
                    max_restarts: 0,
                    window: Duration::from_secs(3600),
                },
                circuit_breaker: CircuitBreakerPolicy {
                    failure_threshold: threshold,
                    open_duration: Duration::from_secs(open),
                    open_duration_multiplier: 2.0,
                    max_open_duration: Duration::from_secs(600),
                },
                ..RestartPolicySpec::default()
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_supervision_tree_keeps_every_invariant(
        root in arb_root(),
        kids in arb_group(&["k1", "k2"]),
        policy in arb_policy(),
        steps in proptest::collection::vec(arb_step(), 1..150),
    ) {
        let mut world = World::new(root, kids, policy);
        for step in &steps {
            world.happen(step);
        }
        world.settle();
    }
}

impl World {
    /// The world in brief, for a failure's message.
    pub fn context(&self) -> String {
        let mut out = format!("at {}\n", self.now);
        for (name, g) in &self.groups {
            let s = g.status.clone().unwrap_or_default();
            out += &format!(
                "group {name}: {:?} incarnation {} gave_up {:?} restarts {} recent {:?}\n",
                s.phase,
                s.incarnation,
                s.gave_up.map(|g| g.incarnation),
                s.restart_count,
                s.recent_restarts.iter().map(|t| t.0).collect::<Vec<_>>(),
            );
            for m in &s.members {
                out += &format!(
                    "  {} {:?} restart {:?} waiting {:?} stop {:?} reset {:?}\n",
                    m.name,
                    m.phase,
                    m.restart.as_ref().map(|r| (r.attempt, r.due.0)),
                    m.waiting_for,
                    m.stop.as_ref().map(|s| s.reason),
                    m.reset,
                );
            }
            for r in &s.restart_history {
                out += &format!(
                    "  history {} {:?} {:?} {:?} {:?}\n",
                    r.at.0, r.member, r.reason, r.restarted, r.trigger
                );
            }
        }
        for (name, a) in &self.agents {
            let s = a.status.clone().unwrap_or_default();
            let ready = s.conditions.iter().find(|c| c.type_ == "Ready");
            out += &format!(
                "agent {name}: {:?} attempt {} next {:?} failures {} ready {:?} handled {:?}\n",
                s.phase,
                s.attempt,
                s.next_restart_at.map(|t| t.0),
                s.consecutive_failures,
                ready.map(|c| (&c.reason, &c.message)),
                s.group.and_then(|g| g.handled_reset),
            );
            for r in &s.restart_history {
                out += &format!(
                    "  history {} {:?} {:?} restarted {:?}\n",
                    r.attempt,
                    r.trigger,
                    r.reason,
                    r.restarted_at.as_ref().map(|t| t.0)
                );
            }
            for p in &self.pods[name] {
                out += &format!(
                    "  pod {} {:?} ready {} deleting {}\n",
                    p.name, p.phase, p.ready, p.deleting
                );
            }
        }
        out + &format!("trace: {:?}", self.trace)
    }
}
