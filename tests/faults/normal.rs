//! The normalized end state of a run: what must come out the same whether or not the operator
//! crashed on the way, for each of the scenario's Agents and groups. Times and durations
//! measured off the clock are left out; whatever a decision produced (counters, history,
//! breaker, shutdown, handled requests, a group's orders) is kept.

use agent_supervisor::api::{
    Agent, AgentGroup, AgentStatus, BreakerState, FailureClass, FailureReason, GroupMembership,
    Phase, ShutdownType, Trigger,
};
use serde::Serialize;
use serde_json::Value;

use crate::group_normal::GroupNormal;
use crate::monitor::Created;
use crate::support::TestNamespace;

/// The end state of a run: every Agent's and every group's, by name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct End {
    pub agents: Vec<(String, Normal)>,
    pub groups: Vec<(String, GroupNormal)>,
}

impl End {
    /// The `agents` and `groups` as they are now; each agent with the pods created for it.
    pub async fn read(
        ns: &TestNamespace,
        agents: &[&str],
        groups: &[&str],
        created: &[Created],
    ) -> End {
        let mut end = End {
            agents: Vec::new(),
            groups: Vec::new(),
        };
        for &agent in agents {
            let pods: Vec<String> = created
                .iter()
                .filter(|c| c.agent == agent)
                .map(|c| c.name.clone())
                .collect();
            let object = ns.api::<Agent>().get(agent).await.expect("read the agent");
            let status = object.status.unwrap_or_default();
            let normal = Normal::of(&status, object.metadata.generation, &pods);
            end.agents.push((agent.to_string(), normal));
        }
        for &group in groups {
            let object = ns
                .api::<AgentGroup>()
                .get(group)
                .await
                .expect("read the group");
            let status = object.status.unwrap_or_default();
            let normal = GroupNormal::of(&status, object.metadata.generation);
            end.groups.push((group.to_string(), normal));
        }
        end
    }

    /// Pods that should not exist: of none of the agents, or of an attempt after the one its
    /// agent ended at.
    pub fn unexpected_pods(&self, created: &[Created]) -> Vec<String> {
        created
            .iter()
            .filter_map(|c| {
                let Some((_, agent)) = self.agents.iter().find(|(name, _)| *name == c.agent) else {
                    return Some(format!(
                        "pod {} is of agent {:?}, not one of {:?}",
                        c.name,
                        c.agent,
                        names(&self.agents)
                    ));
                };
                c.attempt.filter(|&a| a > agent.attempt).map(|a| {
                    format!(
                        "pod {} is of attempt {a}, after agent {}'s last ({})",
                        c.name, c.agent, agent.attempt
                    )
                })
            })
            .collect()
    }

    pub fn agent(&self, name: &str) -> &Normal {
        find(&self.agents, name)
    }

    pub fn group(&self, name: &str) -> &GroupNormal {
        find(&self.groups, name)
    }

    /// The fields that differ, as `agent NAME: field: want … got …`.
    pub fn diff(&self, got: &End) -> Vec<String> {
        let mut out = Vec::new();
        for (kind, want, got) in [
            ("agent", names(&self.agents), names(&got.agents)),
            ("group", names(&self.groups), names(&got.groups)),
        ] {
            if want != got {
                out.push(format!("{kind}s: want {want:?}, got {got:?}"));
            }
        }
        for ((name, want), (_, got)) in self.agents.iter().zip(&got.agents) {
            out.extend(
                fields(want, got)
                    .into_iter()
                    .map(|d| format!("agent {name}: {d}")),
            );
        }
        for ((name, want), (_, got)) in self.groups.iter().zip(&got.groups) {
            out.extend(
                fields(want, got)
                    .into_iter()
                    .map(|d| format!("group {name}: {d}")),
            );
        }
        out
    }
}

fn find<'a, T>(list: &'a [(String, T)], name: &str) -> &'a T {
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("{name} is not one of the scenario's"))
}

fn names<T>(list: &[(String, T)]) -> Vec<&str> {
    list.iter().map(|(name, _)| name.as_str()).collect()
}

/// The top-level fields of `want` and `got` that differ, as `field: want … got …`.
fn fields(want: &impl Serialize, got: &impl Serialize) -> Vec<String> {
    let want = serde_json::to_value(want).expect("serializes");
    let got = serde_json::to_value(got).expect("serializes");
    let (Value::Object(want), Value::Object(got)) = (want, got) else {
        unreachable!("a struct serializes to an object")
    };
    want.iter()
        .filter(|(key, value)| got.get(*key) != Some(value))
        .map(|(key, value)| {
            let other = got.get(key).cloned().unwrap_or(Value::Null);
            format!("{key}: want {value}, got {other}")
        })
        .collect()
}

/// A reset key as a group writes it (`<group uid>/<value>/<second handled>`) without the uid
/// and the time, which differ from run to run.
pub(crate) fn reset_key(key: &str) -> String {
    let value = key.split_once('/').map_or(key, |(_, value)| value);
    value
        .rsplit_once('/')
        .map_or(value, |(value, _)| value)
        .to_string()
}

/// The group an Agent or group belongs to, and the last reset it ordered that was handled.
pub(crate) fn membership(group: &Option<GroupMembership>) -> Option<(String, Option<String>)> {
    group.as_ref().map(|g| {
        let handled = g.handled_reset.as_deref().map(reset_key);
        (g.name.clone(), handled)
    })
}

/// One restart history entry without its timestamps and run time. The chosen backoff stays:
/// the scenarios' policies have no jitter, so it is exact — except a group restart's, which is
/// the time left, when the member stopped, until the crashed member's restart is due, and a
/// restart held by an outage's, which is how long it was held: measured off the clock, and left
/// out. `restartedAt` is kept as a flag — whether the restart was
/// carried out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    pub attempt: u32,
    pub trigger: Trigger,
    pub reason: Option<FailureReason>,
    pub class: Option<FailureClass>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub backoff: Option<String>,
    pub restarted: bool,
    /// The checkpoint the attempt resumed from, and how far it got.
    pub checkpoint: Option<String>,
    pub progress: Option<u64>,
}

/// The last failure without its time and message (a HeartbeatLost message says how long the
/// Lease was silent).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LastFailure {
    pub reason: FailureReason,
    pub class: FailureClass,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub pod_name: Option<String>,
}

/// The deterministic part of an Agent's status, and of its pods.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Normal {
    pub phase: Option<Phase>,
    pub pod_name: Option<String>,
    pub attempt: u32,
    pub restart_count: u32,
    pub consecutive_failures: u32,
    /// Whether a restart is scheduled (the time itself depends on when the failure was seen).
    pub restart_scheduled: bool,
    pub last_failure: Option<LastFailure>,
    pub history: Vec<Record>,
    /// State, trips, and how long it stays open (`halfOpenAt − openedAt`, whole seconds): the
    /// open duration is decided once per trip, so a repeated decision must not stretch it.
    pub breaker: Option<(BreakerState, u32, Option<i64>)>,
    /// Type, reason and source: who decided and why.
    pub shutdown: Option<(ShutdownType, Option<String>, Option<String>)>,
    /// Conditions as (type, status, reason), sorted by type.
    pub conditions: Vec<(String, String, String)>,
    /// Whether the status is of the latest spec (the generations themselves differ by how
    /// often the proof that the operator settled changed the spec).
    pub observed_latest: bool,
    /// How many restarts count toward the restart limit (their times are clock-dependent).
    pub recent_restarts: usize,
    pub handled_restart_request: Option<String>,
    pub handled_reset_request: Option<String>,
    /// Its group, and the last reset its group ordered that it carried out.
    pub group: Option<(String, Option<String>)>,
    /// Every pod ever created for the Agent, sorted: an extra attempt is an action done twice.
    pub pods_created: Vec<String>,
    /// The progress recorded (its time left out).
    pub progress: Option<u64>,
    /// The checkpoints as (ref, attempt, progress, failures, poisoned), newest first.
    pub checkpoints: Vec<(String, u32, Option<u64>, u32, bool)>,
    pub resumed_from: Option<String>,
    /// The spend totals, as (cost, tokens) (its times left out).
    pub spend: Option<(Option<String>, Option<u64>)>,
}

impl Normal {
    /// `generation`: the Agent's, whose status it is.
    pub fn of(status: &AgentStatus, generation: Option<i64>, pods_created: &[String]) -> Normal {
        let mut pods_created = pods_created.to_vec();
        pods_created.sort();
        let mut conditions: Vec<_> = status
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect();
        conditions.sort();
        Normal {
            phase: status.phase,
            pod_name: status.pod_name.clone(),
            attempt: status.attempt,
            restart_count: status.restart_count,
            consecutive_failures: status.consecutive_failures,
            restart_scheduled: status.next_restart_at.is_some(),
            last_failure: status.last_failure.as_ref().map(|f| LastFailure {
                reason: f.reason,
                class: f.class,
                exit_code: f.exit_code,
                signal: f.signal,
                pod_name: f.pod_name.clone(),
            }),
            history: status
                .restart_history
                .iter()
                .map(|r| Record {
                    attempt: r.attempt,
                    trigger: r.trigger,
                    reason: r.reason,
                    class: r.class,
                    exit_code: r.exit_code,
                    signal: r.signal,
                    backoff: r
                        .backoff
                        .filter(|_| !matches!(r.trigger, Trigger::Group | Trigger::Outage))
                        .map(|b| b.to_string()),
                    restarted: r.restarted_at.is_some(),
                    checkpoint: r.checkpoint.clone(),
                    progress: r.progress,
                })
                .collect(),
            breaker: status.circuit_breaker.as_ref().map(|b| {
                let open_for = match (&b.opened_at, &b.half_open_at) {
                    (Some(opened), Some(half)) => Some((half.0 - opened.0).get_seconds()),
                    _ => None,
                };
                (b.state, b.trips, open_for)
            }),
            shutdown: status
                .shutdown
                .as_ref()
                .map(|s| (s.kind, s.reason.clone(), s.source.clone())),
            conditions,
            observed_latest: status.observed_generation == generation,
            recent_restarts: status.recent_restarts.len(),
            handled_restart_request: status.handled_restart_request.clone(),
            handled_reset_request: status.handled_reset_request.clone(),
            group: membership(&status.group),
            pods_created,
            progress: status.progress.as_ref().map(|p| p.value),
            checkpoints: status
                .checkpoints
                .iter()
                .map(|c| {
                    let mark = (c.failures, c.poisoned);
                    (c.reference.clone(), c.attempt, c.progress, mark.0, mark.1)
                })
                .collect(),
            resumed_from: status.resumed_from.clone(),
            spend: status.spend.as_ref().map(|s| (s.cost.clone(), s.tokens)),
        }
    }
}
