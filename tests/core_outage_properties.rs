//! Property tests for the outage breaker: random streams of failures over a small fleet sharing
//! one RestartPolicy with outage detection — agents failing with the provider's error, with a
//! bug of their own, or not at all; pods starting; time passing; each agent and the policy
//! decided one at a time, from the same facts the IO shell gathers (an agent reads its policy's
//! `status.outages`, the policy reads its agents' statuses, pods and Leases).
//!
//! After every step: at most one live pod per agent; at most one outage per fingerprint; an
//! outage opens only when at least `agents` distinct agents failed with its fingerprint within
//! the window; at most one agent is let go as the probe of each probing round, and it is the
//! agent the policy named; a held restart never counts (no `consecutiveFailures`, no
//! `recentRestarts`, no breaker trip); every decision is repeatable. At the end, with no more
//! failures, every outage ends and every held agent runs again: nothing held is lost.
//!
//! The fleet and its steps are here; each decision and its checks in
//! `core_outage_properties/decide.rs`.
//!
//! `PROPTEST_CASES=2000 cargo test --test core_outage_properties` walks longer.

use std::collections::{BTreeMap, BTreeSet};

use agent_supervisor::api::{
    Agent, AgentStatus, Backoff, BackoffType, CircuitBreakerPolicy, Duration, Limits, Outage,
    OutagePolicy, Phase, RestartPolicySpec, Trigger,
};
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{AgentFacts, Input, PodFacts, PolicyResolution};
use proptest::prelude::*;

const CASES: u32 = 256;
const PROVIDER: &str = "provider returned 503 (request req_7f3a91c2d4e5)";

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(CASES);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[path = "common/clock.rs"]
mod clock;
#[path = "common/pods.rs"]
mod pods;
use clock::t;

/// One thing that happens in the fleet's world.
#[derive(Clone, Debug)]
enum Step {
    Wait(i64),
    /// An agent's running pod fails with the provider's error (a shared outside cause).
    FailAlike(usize),
    /// An agent's running pod fails with a bug of its own.
    FailOwn(usize),
    /// An agent's pending pod runs.
    Runs(usize),
    Decide(usize),
    DecidePolicy,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => prop_oneof![0i64..3, 0i64..30, 0i64..200].prop_map(Step::Wait),
        5 => (0usize..8).prop_map(Step::FailAlike),
        1 => (0usize..8).prop_map(Step::FailOwn),
        4 => (0usize..8).prop_map(Step::Runs),
        8 => (0usize..8).prop_map(Step::Decide),
        3 => Just(Step::DecidePolicy),
    ]
}

#[derive(Clone, Debug)]
struct Params {
    agents: usize,
    threshold: u32,
    window: u64,
    hold: u64,
    reset_after: u64,
    breaker: u32,
}

fn arb_params() -> impl Strategy<Value = Params> {
    (3usize..8, 2u32..4, 30u64..120, 5u64..90, 5u64..60, 0u32..4).prop_map(
        |(agents, threshold, window, hold, reset_after, breaker)| Params {
            agents,
            threshold,
            window,
            hold,
            reset_after,
            breaker,
        },
    )
}

struct Fleet {
    now: i64,
    params: Params,
    policy: RestartPolicySpec,
    outages: Vec<Outage>,
    agents: Vec<Member>,
    /// Every failure the agents recorded: (agent, fingerprint, when).
    failures: Vec<(usize, String, i64)>,
    /// Probe releases seen, per round: (fingerprint, round started at, probe agent) → count.
    releases: BTreeMap<(String, i64, String), u32>,
}

struct Member {
    name: String,
    status: AgentStatus,
    pods: Vec<PodFacts>,
}

impl Fleet {
    fn new(params: Params) -> Fleet {
        let policy = RestartPolicySpec {
            backoff: Backoff {
                kind: BackoffType::Exponential,
                initial_delay: Duration::from_secs(5),
                max_delay: Duration::from_secs(60),
                multiplier: 2.0,
                jitter: 0.0,
            },
            reset_after: Duration::from_secs(params.reset_after),
            limits: Limits {
                max_restarts: 50,
                window: Duration::from_secs(3600),
            },
            circuit_breaker: CircuitBreakerPolicy {
                failure_threshold: params.breaker,
                open_duration: Duration::from_secs(30),
                max_open_duration: Duration::from_secs(200),
                ..CircuitBreakerPolicy::default()
            },
            outage: Some(OutagePolicy {
                agents: params.threshold,
                window: Duration::from_secs(params.window),
                hold_for: Duration::from_secs(params.hold),
            }),
            ..RestartPolicySpec::default()
        };
        let agents = (0..params.agents)
            .map(|i| Member {
                name: format!("agent-{i}"),
                status: AgentStatus::default(),
                pods: Vec::new(),
            })
            .collect();
        Fleet {
            now: 0,
            params,
            policy,
            outages: Vec::new(),
            agents,
            failures: Vec::new(),
            releases: BTreeMap::new(),
        }
    }

    fn input(&self, i: usize) -> Input {
        let m = &self.agents[i];
        Input {
            now: t(self.now),
            agent: AgentFacts {
                name: m.name.clone(),
                uid: format!("uid-{i}"),
                generation: 1,
                template_hash: "h".to_string(),
                ..AgentFacts::default()
            },
            status: m.status.clone(),
            policy: PolicyResolution::Named("p".to_string(), self.policy.clone()),
            pod: m.pods.iter().max_by_key(|p| p.attempt).cloned(),
            previous: None,
            lease: None,
            group: None,
            outages: self.outages.clone(),
        }
    }

    fn agent_object(&self, i: usize) -> Agent {
        let m = &self.agents[i];
        let mut agent: Agent = serde_json::from_value(serde_json::json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
            "metadata": { "name": m.name },
            "spec": { "template": { "spec": { "containers": [{ "name": "agent", "image": "x" }] } } },
        }))
        .expect("an Agent");
        agent.status = Some(m.status.clone());
        agent
    }

    fn live(&self, i: usize) -> impl Iterator<Item = &PodFacts> {
        self.agents[i].pods.iter().filter(|p| p.is_live())
    }

    fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match *step {
            Step::Wait(s) => self.now += s,
            Step::FailAlike(i) => self.fail(i % self.params.agents, PROVIDER.to_string()),
            Step::FailOwn(i) => {
                let i = i % self.params.agents;
                self.fail(i, format!("agent {i}: assertion failed in planner step"));
            }
            Step::Runs(i) => {
                let now = self.now;
                if let Some(pod) = self.agents[i % self.params.agents]
                    .pods
                    .iter_mut()
                    .find(|p| p.is_live() && p.phase == PodPhase::Pending)
                {
                    pod.phase = PodPhase::Running;
                    pod.ready = true;
                    pod.containers[0].state = ContainerPhase::Running {
                        started_at: Some(t(now)),
                    };
                }
            }
            Step::Decide(i) => self.decide_agent(i % self.params.agents)?,
            Step::DecidePolicy => self.decide_policy()?,
        }
        self.check()
    }

    /// The agent's running pod exits 1 with `message`.
    fn fail(&mut self, i: usize, message: String) {
        let now = self.now;
        let Some(pod) = self.agents[i]
            .pods
            .iter_mut()
            .find(|p| p.is_live() && p.phase == PodPhase::Running)
        else {
            return;
        };
        let started = pod.started_at();
        pod.phase = PodPhase::Failed;
        pod.ready = false;
        pod.containers[0].state = ContainerPhase::Terminated(Termination {
            exit_code: 1,
            signal: None,
            reason: Some("Error".to_string()),
            message: Some(message.clone()),
            started_at: started,
            finished_at: Some(t(now)),
        });
    }

    fn check(&self) -> Result<(), TestCaseError> {
        for i in 0..self.params.agents {
            prop_assert!(self.live(i).count() <= 1, "agent {} has two live pods", i);
            let s = &self.agents[i].status;
            let held = s.phase == Some(Phase::CircuitOpen)
                && s.restart_history
                    .first()
                    .is_some_and(|r| r.trigger == Trigger::Outage && r.restarted_at.is_none());
            if held {
                prop_assert_eq!(self.live(i).count(), 0, "a held agent has a live pod");
            }
        }
        let fingerprints: BTreeSet<&str> = self
            .outages
            .iter()
            .map(|o| o.fingerprint.as_str())
            .collect();
        prop_assert_eq!(
            fingerprints.len(),
            self.outages.len(),
            "one outage per fingerprint"
        );
        Ok(())
    }

    /// No more failures: pods start, time passes, everyone is decided, until nothing changes.
    fn settle(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..400 {
            self.now += 5;
            for i in 0..self.params.agents {
                self.step(&Step::Runs(i))?;
            }
            self.step(&Step::DecidePolicy)?;
            for i in 0..self.params.agents {
                self.step(&Step::Decide(i))?;
            }
            let calm = self.outages.is_empty()
                && (0..self.params.agents).all(|i| {
                    self.agents[i].status.phase == Some(Phase::Running) && self.live(i).count() == 1
                });
            if calm {
                return Ok(());
            }
        }
        let phases: Vec<_> = self.agents.iter().map(|m| m.status.phase).collect();
        prop_assert!(
            false,
            "not settled: outages {:?}, phases {:?}",
            self.outages,
            phases
        );
        Ok(())
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn outages_hold_probe_once_and_lose_nothing(
        params in arb_params(),
        steps in proptest::collection::vec(arb_step(), 1..250),
    ) {
        let mut fleet = Fleet::new(params);
        // Everyone starts and runs.
        for i in 0..fleet.params.agents {
            fleet.step(&Step::Decide(i))?;
            fleet.step(&Step::Runs(i))?;
            fleet.step(&Step::Decide(i))?;
        }
        for step in &steps {
            fleet.step(step)?;
        }
        fleet.settle()?;
    }
}

#[path = "core_outage_properties/decide.rs"]
mod decide;
