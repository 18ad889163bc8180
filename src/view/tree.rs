//! `kubectl agent tree [GROUP]`: the supervision tree, each member with its phase.
//!
//! Pure: built from the namespace's AgentGroups and Agents, already fetched.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde::Serialize;

use super::text::{Paint, relative};
use crate::api::{Agent, AgentGroup, MemberKind, Phase, Strategy};

/// A node of the tree, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    pub kind: String,
    pub name: String,
    pub phase: String,
    pub restarts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub significant: bool,
    /// A group's spend (`status.spend`), and its budget: shown when either is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spend: Option<crate::api::Spend>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::spend::Limit>,
    /// Why the node is not running, or when it restarts, in a few words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<Node>,
}

/// The namespace's objects, by name.
pub struct Objects<'a> {
    pub groups: BTreeMap<String, &'a AgentGroup>,
    pub agents: BTreeMap<String, &'a Agent>,
}

impl<'a> Objects<'a> {
    pub fn new(groups: &'a [AgentGroup], agents: &'a [Agent]) -> Self {
        let name = |m: &kube::api::ObjectMeta| m.name.clone().unwrap_or_default();
        Objects {
            groups: groups.iter().map(|g| (name(&g.metadata), g)).collect(),
            agents: agents.iter().map(|a| (name(&a.metadata), a)).collect(),
        }
    }

    /// The groups no other group lists as a member: the roots of the trees.
    pub fn roots(&self) -> Vec<String> {
        let nested: BTreeSet<&str> = self
            .groups
            .values()
            .flat_map(|g| g.spec.members.iter())
            .filter_map(|m| m.group.as_deref())
            .collect();
        self.groups
            .keys()
            .filter(|g| !nested.contains(g.as_str()))
            .cloned()
            .collect()
    }

    /// Agents no group lists.
    pub fn loose_agents(&self) -> Vec<String> {
        let listed: BTreeSet<&str> = self
            .groups
            .values()
            .flat_map(|g| g.spec.members.iter())
            .filter_map(|m| m.agent.as_deref())
            .collect();
        self.agents
            .keys()
            .filter(|a| !listed.contains(a.as_str()))
            .cloned()
            .collect()
    }

    /// The tree under group `name`. A group met again below itself (admission refuses cycles,
    /// but objects can change under us) is shown once and not descended into.
    pub fn tree(&self, name: &str, now: Timestamp) -> Node {
        self.group_node(name, false, now, &mut Vec::new())
    }

    fn group_node(
        &self,
        name: &str,
        significant: bool,
        now: Timestamp,
        path: &mut Vec<String>,
    ) -> Node {
        let Some(group) = self.groups.get(name) else {
            return missing("AgentGroup", name, significant);
        };
        let status = group.status.clone().unwrap_or_default();
        let mut node = Node {
            kind: "AgentGroup".into(),
            name: name.to_string(),
            phase: status
                .phase
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "Unknown".into()),
            restarts: status.restart_count,
            strategy: Some(strategy(group.spec.strategy).to_string()),
            ready: status.ready.clone(),
            significant,
            spend: status.spend.as_ref().map(|s| crate::api::Spend {
                cost: s.cost.clone(),
                tokens: s.tokens,
            }),
            budget: group.spec.budget.as_ref().map(super::spend::Limit::from),
            note: None,
            members: Vec::new(),
        };
        if path.iter().any(|p| p == name) {
            node.note = Some("cycle: already shown above".into());
            return node;
        }
        path.push(name.to_string());
        for member in &group.spec.members {
            let key = member.key();
            let child = match key.kind {
                MemberKind::AgentGroup => self.group_node(&key.name, member.significant, now, path),
                MemberKind::Agent => self.agent_node(&key.name, member.significant, now),
            };
            node.members.push(child);
        }
        // What the group says about each member it waits on or restarts.
        for child in &mut node.members {
            let said = status
                .members
                .iter()
                .find(|m| m.name == child.name && m.kind.as_str() == child.kind);
            if let Some(waiting) = said.and_then(|m| m.waiting_for.as_ref()) {
                child.note = Some(format!("waiting for {waiting}"));
            }
        }
        path.pop();
        node
    }

    fn agent_node(&self, name: &str, significant: bool, now: Timestamp) -> Node {
        let Some(agent) = self.agents.get(name) else {
            return missing("Agent", name, significant);
        };
        let status = agent.status.clone().unwrap_or_default();
        let note = match status.phase {
            Some(Phase::BackingOff) => status.next_restart_at.as_ref().map(|t| {
                if t.0 > now {
                    format!("restarts {}", relative(now, t.0))
                } else {
                    "restart due".to_string()
                }
            }),
            Some(Phase::CircuitOpen) => status
                .circuit_breaker
                .as_ref()
                .and_then(|b| b.half_open_at.as_ref())
                .map(|t| format!("breaker open, probe {}", relative(now, t.0))),
            _ => None,
        }
        .or_else(|| {
            status
                .last_failure
                .as_ref()
                .filter(|_| status.phase != Some(Phase::Running))
                .map(|f| format!("last failure {}", f.reason.as_str()))
        });
        Node {
            kind: "Agent".into(),
            name: name.to_string(),
            phase: status
                .phase
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "Unknown".into()),
            restarts: status.restart_count,
            strategy: None,
            ready: None,
            significant,
            spend: None,
            budget: None,
            note,
            members: Vec::new(),
        }
    }
}

fn missing(kind: &str, name: &str, significant: bool) -> Node {
    Node {
        kind: kind.into(),
        name: name.to_string(),
        phase: "Missing".into(),
        restarts: 0,
        strategy: None,
        ready: None,
        significant,
        spend: None,
        budget: None,
        note: Some(format!("no {kind} of that name in this namespace")),
        members: Vec::new(),
    }
}

fn strategy(s: Strategy) -> &'static str {
    match s {
        Strategy::OneForOne => "OneForOne",
        Strategy::OneForAll => "OneForAll",
        Strategy::RestForOne => "RestForOne",
    }
}

/// The tree drawn with box characters, one node per line.
pub fn render(node: &Node, paint: Paint) -> String {
    let mut out = String::new();
    line(&mut out, node, "", "", paint);
    out
}

fn line(out: &mut String, node: &Node, lead: &str, child_lead: &str, paint: Paint) {
    let mut text = format!("{lead}{}", label(node, paint));
    text.push('\n');
    out.push_str(&text);
    for (i, member) in node.members.iter().enumerate() {
        let last = i + 1 == node.members.len();
        let (branch, next) = if last {
            ("└── ", "    ")
        } else {
            ("├── ", "│   ")
        };
        line(
            out,
            member,
            &format!("{child_lead}{branch}"),
            &format!("{child_lead}{next}"),
            paint,
        );
    }
}

fn label(node: &Node, paint: Paint) -> String {
    let mut parts = Vec::new();
    if node.kind == "AgentGroup" {
        parts.push(paint.bold(&format!("{}/{}", "group", node.name)));
        if let Some(strategy) = &node.strategy {
            parts.push(strategy.clone());
        }
    } else {
        parts.push(node.name.clone());
    }
    parts.push(paint.phase(&node.phase));
    if let Some(ready) = &node.ready {
        parts.push(format!("ready {ready}"));
    }
    parts.push(match node.restarts {
        1 => "1 restart".to_string(),
        n => format!("{n} restarts"),
    });
    if node.significant {
        parts.push("significant".into());
    }
    if node.spend.is_some() || node.budget.is_some() {
        let (spent, budget) = (node.spend.as_ref(), node.budget.as_ref());
        parts.push(format!(
            "spent {}",
            super::spend::painted(spent, budget, paint)
        ));
    }
    let mut text = parts.join("  ");
    if let Some(note) = &node.note {
        text.push_str(&paint.dim(&format!("  ({note})")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_shows_its_spend_against_its_budget() {
        let group: AgentGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "supervisor.dev/v1alpha1",
            "kind": "AgentGroup",
            "metadata": { "name": "crew", "namespace": "ns" },
            "spec": { "members": [{ "agent": "scout" }], "budget": { "maxCost": "1.00" } },
            "status": { "phase": "Running", "spend": { "cost": "1.25", "since": "2026-12-03T09:00:00Z" } },
        }))
        .unwrap();
        let groups = [group];
        let objects = Objects::new(&groups, &[]);
        let node = objects.tree("crew", Timestamp::UNIX_EPOCH);
        let text = render(&node, Paint::PLAIN);
        let first = text.lines().next().unwrap_or_default();
        assert!(first.contains("spent 1.25/1.00"), "{text}");
        let json = serde_json::to_value(&node).unwrap();
        assert_eq!(json["budget"]["maxCost"], "1.00");
        assert_eq!(json["spend"]["cost"], "1.25");
    }
}
