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
//! `PROPTEST_CASES=2000 cargo test --test core_outage_properties` walks longer.

use std::collections::{BTreeMap, BTreeSet};

use agent_supervisor::api::{
    Agent, AgentStatus, Backoff, BackoffType, CircuitBreakerPolicy, Duration, Limits, Outage,
    OutagePolicy, OutageState, Phase, RestartPolicySpec, Trigger,
};
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::outage::{AgentOutageView, OutageInput, decide_outages};
use agent_supervisor::supervise::{AgentFacts, Input, PodFacts, PolicyResolution, decide};
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

    fn decide_agent(&mut self, i: usize) -> Result<(), TestCaseError> {
        let input = self.input(i);
        let plan = decide(input.clone());
        prop_assert_eq!(&decide(input.clone()), &plan, "repeatable");
        let before = &self.agents[i].status;
        let after = &plan.status;
        // A held restart counts toward nothing.
        let outage_records = |s: &AgentStatus| {
            s.restart_history
                .iter()
                .filter(|r| r.trigger == Trigger::Outage)
                .count()
        };
        let newly_held = after.phase == Some(Phase::CircuitOpen)
            && after
                .restart_history
                .first()
                .is_some_and(|r| r.trigger == Trigger::Outage && r.restarted_at.is_none())
            && outage_records(after) > outage_records(before);
        if newly_held {
            prop_assert!(
                after.consecutive_failures <= before.consecutive_failures,
                "holding counted a failure: {} → {}",
                before.consecutive_failures,
                after.consecutive_failures
            );
            let trips = |s: &AgentStatus| s.circuit_breaker.as_ref().map_or(0, |b| b.trips);
            prop_assert_eq!(trips(after), trips(before), "holding tripped the breaker");
        }
        let released = after.restart_count > before.restart_count
            && after
                .restart_history
                .iter()
                .find(|r| r.attempt == before.attempt)
                .is_some_and(|r| r.trigger == Trigger::Outage);
        if released {
            prop_assert!(
                after.recent_restarts.len() <= before.recent_restarts.len(),
                "a held restart counted toward the limit"
            );
            let held_for = before
                .restart_history
                .first()
                .and_then(|r| r.fingerprint.clone())
                .unwrap_or_default();
            if let Some(o) = self.outages.iter().find(|o| o.fingerprint == held_for) {
                // Let go while its outage is open: only as the probe the policy named.
                prop_assert_eq!(o.state, OutageState::Probing, "released while holding");
                prop_assert_eq!(o.probe_agent.as_deref(), Some(self.agents[i].name.as_str()));
                // A round: the outage, when it started, and whom it named.
                let round = o.probe_started_at.as_ref().map_or(0, |t| t.0.as_second());
                let key = (held_for, round, self.agents[i].name.clone());
                let releases = self.releases.entry(key).or_default();
                *releases += 1;
                prop_assert!(*releases <= 1, "the probe let go twice in one round");
            }
        }
        // Every failure the agent recorded (those injected, and startup timeouts), as it was
        // recorded: the policy's decision is checked against these.
        if after.last_failure != before.last_failure
            && let Some(f) = &after.last_failure
            && let Some(fingerprint) = &f.fingerprint
        {
            let at = f.time.0.as_second() - t(0).as_second();
            self.failures.push((i, fingerprint.clone(), at));
        }
        let m = &mut self.agents[i];
        m.status = plan.status.clone();
        if let Some(kill) = &plan.delete_pod
            && let Some(pod) = m.pods.iter_mut().find(|p| &p.name == kill)
        {
            pod.deleting = true;
        }
        if let Some(new) = &plan.create_pod {
            prop_assert!(
                m.pods.iter().all(|p| p.name != new.name),
                "pod {} created twice",
                new.name
            );
            m.pods.push(PodFacts {
                name: new.name.clone(),
                attempt: new.attempt,
                template_hash: Some("h".to_string()),
                created_at: t(self.now),
                deleting: false,
                phase: PodPhase::Pending,
                reason: None,
                message: None,
                disruption: None,
                unschedulable: None,
                ready: false,
                containers: vec![ContainerFacts {
                    name: "agent".to_string(),
                    state: ContainerPhase::Waiting {
                        reason: None,
                        message: None,
                    },
                }],
                agent_container: None,
                origin: new.origin.clone(),
            });
        }
        // Deleted pods go at once; finished ones stay for a while (kept to count live ones).
        m.pods.retain(|p| !p.deleting);
        Ok(())
    }

    fn decide_policy(&mut self) -> Result<(), TestCaseError> {
        let views = (0..self.params.agents)
            .map(|i| {
                let pod = self.agents[i]
                    .pods
                    .iter()
                    .max_by_key(|p| p.attempt)
                    .cloned();
                {
                    let agent = self.agent_object(i);
                    let traits = agent_supervisor::controller::facts::agent_traits(&agent);
                    let status = agent.status.clone().unwrap_or_default();
                    AgentOutageView::of(&traits, &status, pod.as_ref(), None)
                }
            })
            .collect();
        let input = OutageInput {
            now: t(self.now),
            config: self.policy.outage.clone(),
            reset_after: self.policy.reset_after.as_std(),
            max_hold: self.policy.circuit_breaker.max_open_duration.as_std(),
            outages: self.outages.clone(),
            agents: views,
        };
        let plan = decide_outages(&input);
        prop_assert_eq!(&decide_outages(&input), &plan, "repeatable");
        for o in &plan.outages {
            if self
                .outages
                .iter()
                .any(|old| old.fingerprint == o.fingerprint)
            {
                continue;
            }
            // Opened now: N distinct agents failed with it within the window.
            let from = self.now - self.params.window as i64;
            let agents: BTreeSet<usize> = self
                .failures
                .iter()
                .filter(|(_, f, at)| *f == o.fingerprint && *at >= from)
                .map(|(i, _, _)| *i)
                .collect();
            prop_assert!(
                agents.len() as u32 >= self.params.threshold,
                "outage {} opened with {} agents failing within the window",
                o.fingerprint,
                agents.len()
            );
        }
        self.outages = plan.outages;
        Ok(())
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
