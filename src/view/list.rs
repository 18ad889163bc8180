//! `kubectl agent list` and `kubectl agent top`: one row per Agent.
//!
//! Pure: rows are built from Agents already fetched.

use jiff::Timestamp;
use serde::Serialize;

use super::spend::{self, Limit};
use super::text::{Paint, one_line, relative, seconds, span, table};
use crate::api::{Agent, BreakerState, Phase, RestartPolicy, Spend, Time};

/// An Agent as `list` shows it and `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    pub restarts: u32,
    pub consecutive_failures: u32,
    pub breaker: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure_message: Option<String>,
    /// When the next restart is due: a scheduled restart, or the breaker's probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_restart_at: Option<Time>,
    /// An outage holds the restart: it happens when the outage ends or picks this agent as
    /// its probe (see the RestartPolicy's status).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held_by_outage: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The agent-sandbox Sandbox it supervises (`spec.sandboxRef`), whose pods are its attempts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// How far the agent has got, if it reports progress (`status.progress.value`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<u64>,
    /// What it reported spending in all (within its budget's window: `status.spend`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<Spend>,
    /// Its policy's budget, when it has one (see `with_budgets`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Limit>,
    /// Restarts within `top`'s window (0 in `list`).
    #[serde(skip_serializing_if = "is_zero")]
    pub recent_restarts: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub fn row(agent: &Agent) -> Row {
    let status = agent.status.clone().unwrap_or_default();
    let breaker = status
        .circuit_breaker
        .as_ref()
        .map(|b| b.state)
        .unwrap_or(BreakerState::Closed);
    let probe = status
        .circuit_breaker
        .as_ref()
        .filter(|b| b.state == BreakerState::Open)
        .and_then(|b| b.half_open_at.clone());
    let next_restart_at = match status.phase {
        Some(Phase::BackingOff) => status.next_restart_at.clone(),
        Some(Phase::CircuitOpen) => probe,
        _ => None,
    };
    Row {
        namespace: agent.metadata.namespace.clone().unwrap_or_default(),
        name: agent.metadata.name.clone().unwrap_or_default(),
        phase: status
            .phase
            .map(Phase::as_str)
            .unwrap_or("Unknown")
            .to_string(),
        restarts: status.restart_count,
        consecutive_failures: status.consecutive_failures,
        breaker: breaker.as_str().to_string(),
        last_failure: status
            .last_failure
            .as_ref()
            .map(|f| f.reason.as_str().to_string()),
        last_failure_at: status.last_failure.as_ref().map(|f| f.time.clone()),
        last_failure_message: status
            .last_failure
            .as_ref()
            .and_then(|f| f.message.as_deref().map(str::to_string)),
        next_restart_at,
        held_by_outage: status.phase == Some(Phase::CircuitOpen)
            && status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "Outage"),
        pod: status.pod_name.clone(),
        group: status.group.as_ref().map(|g| g.name.clone()),
        sandbox: agent.spec.sandbox_ref.as_ref().map(|r| r.name.clone()),
        created_at: agent.metadata.creation_timestamp.clone(),
        progress: status.progress.as_ref().map(|p| p.value),
        spend: spend::total(agent),
        budget: None,
        recent_restarts: 0,
    }
}

/// `row`, with the budget of the agent's policy among `policies` (those fetched with it).
pub fn budgeted(agent: &Agent, policies: &[RestartPolicy]) -> Row {
    Row {
        budget: spend::budget_of(agent, policies),
        ..row(agent)
    }
}

/// How a table is laid out.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout {
    /// A NAMESPACE column first (`-A`).
    pub namespaces: bool,
    /// POD, GROUP and MESSAGE columns (`-o wide`).
    pub wide: bool,
    /// A RECENT column (`top`).
    pub recent: Option<&'static str>,
}

pub fn render(rows: &[Row], layout: Layout, now: Timestamp, paint: Paint) -> String {
    let mut headers = Vec::new();
    if layout.namespaces {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "PHASE"]);
    if let Some(recent) = layout.recent {
        headers.push(recent);
    }
    headers.extend(["RESTARTS", "BREAKER", "LAST FAILURE", "NEXT RESTART"]);
    // Agents that report spend or have a budget: what they spent, against the budget.
    let spend = rows.iter().any(|r| r.spend.is_some() || r.budget.is_some());
    if spend {
        headers.push("SPEND");
    }
    headers.push("AGE");
    if layout.wide {
        headers.extend(["POD", "GROUP", "MESSAGE"]);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = Vec::new();
            if layout.namespaces {
                cells.push(r.namespace.clone());
            }
            cells.push(r.name.clone());
            cells.push(paint.phase(&r.phase));
            if layout.recent.is_some() {
                cells.push(r.recent_restarts.to_string());
            }
            cells.push(r.restarts.to_string());
            cells.push(match r.breaker.as_str() {
                "Open" => paint.red("Open"),
                "HalfOpen" => paint.yellow("HalfOpen"),
                other => other.to_string(),
            });
            cells.push(match (&r.last_failure, &r.last_failure_at) {
                (Some(reason), Some(at)) => format!("{reason} {}", relative(now, at.0)),
                (Some(reason), None) => reason.clone(),
                _ => "-".into(),
            });
            cells.push(match (&r.next_restart_at, r.held_by_outage) {
                (_, true) => paint.yellow("held by outage"),
                (Some(t), _) if seconds(now, t.0) < 0 => "due".to_string(),
                (Some(t), _) => relative(now, t.0),
                (None, _) => "-".into(),
            });
            if spend {
                cells.push(spend::painted(r.spend.as_ref(), r.budget.as_ref(), paint));
            }
            cells.push(
                r.created_at
                    .as_ref()
                    .map(|t| span(seconds(t.0, now)))
                    .unwrap_or_else(|| "-".into()),
            );
            if layout.wide {
                cells.push(match (&r.sandbox, &r.pod) {
                    (Some(sandbox), _) => format!("sandbox/{sandbox}"),
                    (None, pod) => pod.clone().unwrap_or_else(|| "-".into()),
                });
                cells.push(r.group.clone().unwrap_or_else(|| "-".into()));
                cells.push(
                    r.last_failure_message
                        .as_deref()
                        .map(|m| one_line(m, 80))
                        .unwrap_or_default(),
                );
            }
            cells
        })
        .collect();
    table(&headers, &cells)
}

/// `top`: the agents with the most restarts within `window_secs` of now (then the most restarts
/// ever), at most `limit`, those that never restarted left out.
pub fn top(
    agents: &[Agent],
    policies: &[RestartPolicy],
    window_secs: i64,
    limit: usize,
    now: Timestamp,
) -> Vec<Row> {
    let mut rows: Vec<Row> = agents
        .iter()
        .map(|agent| {
            let mut row = budgeted(agent, policies);
            let status = agent.status.clone().unwrap_or_default();
            let within = |t: &&Time| seconds(t.0, now) <= window_secs;
            // The history keeps the last `historyLimit` restarts; the restart limit's own record
            // (kept when the policy has a limit) may hold more.
            let recent = status
                .restart_history
                .iter()
                .filter_map(|r| r.restarted_at.as_ref())
                .filter(within)
                .count()
                .max(status.recent_restarts.iter().filter(within).count());
            row.recent_restarts = u32::try_from(recent).unwrap_or(u32::MAX);
            row
        })
        .filter(|r| r.restarts > 0)
        .collect();
    rows.sort_by(|a, b| {
        (b.recent_restarts, b.restarts)
            .cmp(&(a.recent_restarts, a.restarts))
            .then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
    });
    rows.truncate(limit);
    rows
}
