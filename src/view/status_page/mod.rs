//! The status page: `/status` (HTML) and `/status.json`, on `--status-addr`.
//!
//! Everything the page shows comes from the operator's own caches of Agents, AgentGroups and
//! RestartPolicies — nothing a person could not read with `kubectl get` on the same objects. The
//! page is read-only, needs no script and loads nothing from elsewhere, and every value from an
//! object is escaped. Its size and cost are bounded: at most `AGENTS_PER_NAMESPACE` agents are
//! listed per namespace (those needing attention first) and `NAMESPACES` namespaces, each cut
//! saying how many it left out.
//!
//! The controllers' `Watched` holds the caches and `Snapshot` is what they held at one instant;
//! here `page` turns a snapshot into the page's data (also the JSON), and `html` renders that.
//! Both are pure; the process serves them (`process::status_page`).

mod html;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use super::list::{self, Row};
use super::text::one_line;
use super::tree::{self, Node};
use crate::api::{Agent, AgentGroup, Outage, Time};
use crate::controller::watched::Snapshot;

pub use html::html;

/// Agents listed per namespace; the rest are counted.
pub const AGENTS_PER_NAMESPACE: usize = 200;
/// Namespaces whose agents are listed; the rest are counted.
pub const NAMESPACES: usize = 50;
/// Group trees drawn; the rest are counted.
pub const TREES: usize = 100;
/// Agents in "most restarts".
pub const TOP: usize = 10;
/// Characters of a failure message shown.
const MESSAGE_CHARS: usize = 200;

/// The page's data: what `/status.json` returns and `/status` renders.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusPage {
    pub generated_at: Time,
    pub watching: bool,
    pub agents: usize,
    /// Agents by phase (`Unknown`: not acted on yet).
    pub phases: BTreeMap<String, usize>,
    pub namespaces: Vec<NamespaceAgents>,
    /// Namespaces with agents that are not listed (over `NAMESPACES`).
    pub namespaces_not_shown: usize,
    pub outages: Vec<OpenOutage>,
    pub groups: Vec<GroupTree>,
    pub groups_not_shown: usize,
    /// The agents with the most restarts.
    pub most_restarts: Vec<Row>,
    pub limits: Limits,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceAgents {
    pub namespace: String,
    pub total: usize,
    pub phases: BTreeMap<String, usize>,
    /// The agents listed: those needing attention first, then by name.
    pub agents: Vec<Row>,
    pub not_shown: usize,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenOutage {
    pub namespace: String,
    pub policy: String,
    #[serde(flatten)]
    pub outage: Outage,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupTree {
    pub namespace: String,
    pub tree: Node,
}

/// The caps the page applies, so a reader knows a list may be cut.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    pub agents_per_namespace: usize,
    pub namespaces: usize,
    pub group_trees: usize,
    pub most_restarts: usize,
}

/// How urgently a phase needs a person: lower first.
fn attention(phase: &str) -> u8 {
    match phase {
        "Stopped" => 0,
        "CircuitOpen" => 1,
        "BackingOff" => 2,
        "Pending" | "Unknown" => 3,
        "Running" => 4,
        _ => 5,
    }
}

/// The page's data from a snapshot: sorting and cutting, O(n log n) in the number of objects.
pub fn page(snapshot: &Snapshot) -> StatusPage {
    let now = snapshot.now;
    let mut phases: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_namespace: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for agent in &snapshot.agents {
        let row = list::budgeted(agent, &snapshot.policies);
        *phases.entry(row.phase.clone()).or_default() += 1;
        by_namespace
            .entry(row.namespace.clone())
            .or_default()
            .push(cut(row));
    }
    let namespace_count = by_namespace.len();
    let namespaces: Vec<NamespaceAgents> = by_namespace
        .into_iter()
        .take(NAMESPACES)
        .map(|(namespace, mut rows)| {
            let total = rows.len();
            let mut phases: BTreeMap<String, usize> = BTreeMap::new();
            for r in &rows {
                *phases.entry(r.phase.clone()).or_default() += 1;
            }
            rows.sort_by(|a, b| {
                (attention(&a.phase), &a.name).cmp(&(attention(&b.phase), &b.name))
            });
            rows.truncate(AGENTS_PER_NAMESPACE);
            NamespaceAgents {
                namespace,
                total,
                phases,
                not_shown: total - rows.len(),
                agents: rows,
            }
        })
        .collect();

    let mut outages = Vec::new();
    for policy in &snapshot.policies {
        for outage in policy.status.iter().flat_map(|s| s.outages.iter()) {
            let mut outage = outage.clone();
            outage.message = outage.message.map(|m| one_line(&m, MESSAGE_CHARS));
            outages.push(OpenOutage {
                namespace: policy.metadata.namespace.clone().unwrap_or_default(),
                policy: policy.metadata.name.clone().unwrap_or_default(),
                outage,
            });
        }
    }
    outages.sort_by(|a, b| {
        (&a.namespace, &a.policy, &a.outage.since.0).cmp(&(
            &b.namespace,
            &b.policy,
            &b.outage.since.0,
        ))
    });

    let mut groups = Vec::new();
    let mut agents_by_ns: BTreeMap<String, Vec<Agent>> = BTreeMap::new();
    let mut groups_by_ns: BTreeMap<String, Vec<AgentGroup>> = BTreeMap::new();
    for g in &snapshot.groups {
        let ns = g.metadata.namespace.clone().unwrap_or_default();
        groups_by_ns.entry(ns).or_default().push(g.clone());
    }
    for a in &snapshot.agents {
        let ns = a.metadata.namespace.clone().unwrap_or_default();
        if groups_by_ns.contains_key(&ns) {
            agents_by_ns.entry(ns).or_default().push(a.clone());
        }
    }
    let mut trees = 0;
    for (ns, ns_groups) in &groups_by_ns {
        let agents = agents_by_ns.get(ns).map(Vec::as_slice).unwrap_or_default();
        let objects = tree::Objects::new(ns_groups, agents);
        for root in objects.roots() {
            trees += 1;
            if groups.len() < TREES {
                groups.push(GroupTree {
                    namespace: ns.clone(),
                    tree: objects.tree(&root, now),
                });
            }
        }
    }

    let most_restarts: Vec<Row> = list::top(&snapshot.agents, &snapshot.policies, 3600, TOP, now)
        .into_iter()
        .map(cut)
        .collect();

    StatusPage {
        generated_at: Time(now),
        watching: snapshot.watching,
        agents: snapshot.agents.len(),
        phases,
        namespaces_not_shown: namespace_count - namespaces.len(),
        namespaces,
        outages,
        groups_not_shown: trees - groups.len(),
        groups,
        most_restarts,
        limits: Limits {
            agents_per_namespace: AGENTS_PER_NAMESPACE,
            namespaces: NAMESPACES,
            group_trees: TREES,
            most_restarts: TOP,
        },
    }
}

/// A row with its message cut, so one agent cannot make the page large.
fn cut(mut row: Row) -> Row {
    row.last_failure_message = row
        .last_failure_message
        .map(|m| one_line(&m, MESSAGE_CHARS));
    row
}

/// Text made safe to put in HTML, as element content or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
