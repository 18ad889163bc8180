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

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Serialize;

use super::list::{self, Row};
use super::text::{one_line, relative};
use super::tree::{self, Node};
use crate::api::{Agent, AgentGroup, Outage, Time};
use crate::controller::watched::Snapshot;

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
        let row = list::row(agent);
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

    let most_restarts: Vec<Row> = list::top(&snapshot.agents, 3600, TOP, now)
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

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1b1b;background:#fff}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}h3{font-size:1em}\
table{border-collapse:collapse;margin:.4em 0}th,td{text-align:left;padding:.2em .7em;border-bottom:1px solid #ddd;vertical-align:top}\
th{background:#f4f4f4}.Running{color:#17692a}.Stopped,.CircuitOpen,.Escalated,.Missing{color:#b3261e;font-weight:600}\
.BackingOff,.Pending,.Restarting,.Starting{color:#8a5a00}.hot{background:#fff3e0}.msg{max-width:40em;overflow-wrap:anywhere;font-family:ui-monospace,monospace;font-size:.9em}\
.note{color:#555}ul.tree{list-style:none;padding-left:1.2em}ul.tree li{margin:.15em 0}";

/// The page as HTML. Every value from an object goes through `escape`.
pub fn html(page: &StatusPage) -> String {
    let now = page.generated_at.0;
    let mut h = String::with_capacity(16 * 1024);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width\">");
    h.push_str("<title>agent-supervisor status</title><style>");
    h.push_str(STYLE);
    h.push_str("</style></head><body>\n<h1>agent-supervisor</h1>\n");
    h.push_str(&format!(
        "<p id=\"summary\">{} agent{} at <time datetime=\"{}\">{}</time>: {}.</p>\n",
        page.agents,
        if page.agents == 1 { "" } else { "s" },
        escape(&now.to_string()),
        escape(&now.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()),
        if page.phases.is_empty() {
            "none".to_string()
        } else {
            page.phases
                .iter()
                .map(|(phase, n)| format!("<span class=\"{0}\">{n} {0}</span>", escape(phase)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    if !page.watching {
        h.push_str("<p class=\"note\">This replica is not leading: it watches nothing. The leader's page shows the agents.</p>\n");
    }

    // Outages first: the one thing that hits many agents at once.
    h.push_str("<h2 id=\"outages\">Open outages</h2>\n");
    if page.outages.is_empty() {
        h.push_str("<p>None.</p>\n");
    } else {
        h.push_str("<table><tr><th>namespace</th><th>policy</th><th>failure</th><th>agents</th><th>since</th><th>state</th><th>probe</th><th>next probe</th></tr>\n");
        for o in &page.outages {
            let failure = match &o.outage.message {
                Some(m) => format!("{}: {}", o.outage.reason.as_str(), m),
                None => o.outage.reason.as_str().to_string(),
            };
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"msg\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&o.namespace),
                escape(&o.policy),
                escape(&failure),
                o.outage.agents,
                time(now, Some(&o.outage.since)),
                escape(o.outage.state.as_str()),
                escape(o.outage.probe_agent.as_deref().unwrap_or("-")),
                time(now, o.outage.next_probe_at.as_ref()),
            ));
        }
        h.push_str("</table>\n");
    }

    h.push_str("<h2 id=\"most-restarts\">Most restarts</h2>\n");
    if page.most_restarts.is_empty() {
        h.push_str("<p>No agent has restarted.</p>\n");
    } else {
        h.push_str("<table><tr><th>namespace</th><th>agent</th><th>phase</th><th>last hour</th><th>restarts</th><th>last failure</th></tr>\n");
        for r in &page.most_restarts {
            h.push_str(&format!(
                "<tr class=\"hot\"><td>{}</td><td>{}</td><td class=\"{2}\">{2}</td><td>{3}</td><td>{4}</td><td class=\"msg\">{5}</td></tr>\n",
                escape(&r.namespace),
                escape(&r.name),
                escape(&r.phase),
                r.recent_restarts,
                r.restarts,
                escape(&failure_text(r)),
            ));
        }
        h.push_str("</table>\n");
    }

    h.push_str("<h2 id=\"groups\">Supervision trees</h2>\n");
    if page.groups.is_empty() {
        h.push_str("<p>No AgentGroups.</p>\n");
    }
    for g in &page.groups {
        h.push_str(&format!(
            "<h3>namespace {}</h3>\n<ul class=\"tree\">",
            escape(&g.namespace)
        ));
        node_html(&mut h, &g.tree);
        h.push_str("</ul>\n");
    }
    if page.groups_not_shown > 0 {
        h.push_str(&format!(
            "<p class=\"note\">And {} more group trees, not drawn (the page draws at most {}).</p>\n",
            page.groups_not_shown, page.limits.group_trees
        ));
    }

    // Hot agents: those in the top list, highlighted wherever they are listed.
    let hot: std::collections::BTreeSet<(&str, &str)> = page
        .most_restarts
        .iter()
        .map(|r| (r.namespace.as_str(), r.name.as_str()))
        .collect();
    h.push_str("<h2 id=\"agents\">Agents</h2>\n");
    if page.namespaces.is_empty() {
        h.push_str("<p>No agents.</p>\n");
    }
    for ns in &page.namespaces {
        let counts = ns
            .phases
            .iter()
            .map(|(p, n)| format!("{n} {}", escape(p)))
            .collect::<Vec<_>>()
            .join(", ");
        h.push_str(&format!(
            "<h3 id=\"ns-{0}\">namespace {0}</h3>\n<p>{1} agent{2}: {3}.</p>\n",
            escape(&ns.namespace),
            ns.total,
            if ns.total == 1 { "" } else { "s" },
            counts
        ));
        h.push_str("<table><tr><th>agent</th><th>phase</th><th>restarts</th><th>breaker</th><th>last failure</th><th>next restart</th><th>group</th></tr>\n");
        for r in &ns.agents {
            let class = if hot.contains(&(r.namespace.as_str(), r.name.as_str())) {
                " class=\"hot\""
            } else {
                ""
            };
            let next = if r.held_by_outage {
                "held by outage".to_string()
            } else {
                time(now, r.next_restart_at.as_ref())
            };
            h.push_str(&format!(
                "<tr{class}><td>{}</td><td class=\"{1}\">{1}</td><td>{2}</td><td>{3}</td><td class=\"msg\">{4}</td><td>{5}</td><td>{6}</td></tr>\n",
                escape(&r.name),
                escape(&r.phase),
                r.restarts,
                escape(&r.breaker),
                escape(&failure_text(r)),
                next,
                escape(r.group.as_deref().unwrap_or("-")),
            ));
        }
        h.push_str("</table>\n");
        if ns.not_shown > 0 {
            h.push_str(&format!(
                "<p class=\"note\">And {} more agents in {}, not listed (the page lists at most {} per namespace, those needing attention first): <code>kubectl agent list -n {}</code> shows them all.</p>\n",
                ns.not_shown,
                escape(&ns.namespace),
                page.limits.agents_per_namespace,
                escape(&ns.namespace),
            ));
        }
    }
    if page.namespaces_not_shown > 0 {
        h.push_str(&format!(
            "<p class=\"note\">And {} more namespaces with agents, not listed (the page lists at most {}): <code>kubectl agent list -A</code> shows them.</p>\n",
            page.namespaces_not_shown, page.limits.namespaces
        ));
    }
    h.push_str("<p class=\"note\">The same as JSON: <a href=\"status.json\">status.json</a>. Read-only; reload for fresh data.</p>\n</body></html>\n");
    h
}

fn failure_text(r: &Row) -> String {
    match (&r.last_failure, &r.last_failure_message) {
        (Some(reason), Some(m)) if !m.is_empty() => format!("{reason}: {m}"),
        (Some(reason), _) => reason.clone(),
        _ => "-".to_string(),
    }
}

/// A time as "in 42s" / "3m ago", with the exact time for machines and on hover.
fn time(now: Timestamp, at: Option<&Time>) -> String {
    match at {
        Some(t) => format!(
            "<time datetime=\"{0}\" title=\"{0}\">{1}</time>",
            escape(&t.0.to_string()),
            escape(&relative(now, t.0))
        ),
        None => "-".to_string(),
    }
}

fn node_html(h: &mut String, node: &Node) {
    let label = if node.kind == "AgentGroup" {
        format!("<strong>group {}</strong>", escape(&node.name))
    } else {
        escape(&node.name)
    };
    h.push_str(&format!(
        "<li>{label} <span class=\"{0}\">{0}</span>",
        escape(&node.phase)
    ));
    if let Some(strategy) = &node.strategy {
        h.push_str(&format!(" · {}", escape(strategy)));
    }
    if let Some(ready) = &node.ready {
        h.push_str(&format!(" · ready {}", escape(ready)));
    }
    h.push_str(&match node.restarts {
        1 => " · 1 restart".to_string(),
        n => format!(" · {n} restarts"),
    });
    if let Some(note) = &node.note {
        h.push_str(&format!(" <span class=\"note\">({})</span>", escape(note)));
    }
    if !node.members.is_empty() {
        h.push_str("<ul class=\"tree\">");
        for m in &node.members {
            node_html(h, m);
        }
        h.push_str("</ul>");
    }
    h.push_str("</li>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::RestartPolicy;
    use serde_json::json;

    fn agent(ns: &str, name: &str, status: serde_json::Value) -> Agent {
        serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
            "metadata": { "name": name, "namespace": ns },
            "spec": { "template": {} },
            "status": status,
        }))
        .unwrap()
    }

    fn now() -> Timestamp {
        "2026-11-22T12:00:00Z".parse().unwrap()
    }

    const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&<b>bold</b>";

    #[test]
    fn everything_from_objects_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        let snapshot = Snapshot {
            now: now(),
            watching: true,
            agents: vec![agent(
                "n<s>",
                "a\"b",
                json!({
                    "phase": "BackingOff", "restartCount": 1, "attempt": 2,
                    "lastFailure": { "time": "2026-11-22T11:59:00Z", "reason": "Error", "class": "Transient", "message": HOSTILE },
                }),
            )],
            ..Snapshot::default()
        };
        let out = html(&page(&snapshot));
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(!out.contains("<b>"), "{out}");
        assert!(out.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&quot;&#39;&amp;&lt;b&gt;bold&lt;/b&gt;"), "{out}");
        assert!(
            out.contains("namespace n&lt;s&gt;") && out.contains("<td>a&quot;b</td>"),
            "{out}"
        );
        // The markup the page makes itself is balanced: every table closes.
        assert_eq!(
            out.matches("<table>").count(),
            out.matches("</table>").count()
        );
    }

    #[test]
    fn agents_needing_attention_come_first_and_lists_are_capped() {
        let mut agents = Vec::new();
        for i in 0..(AGENTS_PER_NAMESPACE + 5) {
            agents.push(agent(
                "big",
                &format!("a{i:04}"),
                json!({ "phase": "Running", "attempt": 1 }),
            ));
        }
        agents.push(agent(
            "big",
            "zz-stopped",
            json!({ "phase": "Stopped", "attempt": 3, "restartCount": 2 }),
        ));
        agents.push(agent(
            "big",
            "zz-open",
            json!({ "phase": "CircuitOpen", "attempt": 3, "restartCount": 2 }),
        ));
        for i in 0..(NAMESPACES + 2) {
            agents.push(agent(
                &format!("ns{i:03}"),
                "x",
                json!({ "phase": "Running", "attempt": 1 }),
            ));
        }
        let p = page(&Snapshot {
            now: now(),
            watching: true,
            agents,
            ..Snapshot::default()
        });
        assert_eq!(p.agents, AGENTS_PER_NAMESPACE + 7 + NAMESPACES + 2);
        let big = p.namespaces.iter().find(|n| n.namespace == "big").unwrap();
        assert_eq!(big.total, AGENTS_PER_NAMESPACE + 7);
        assert_eq!(big.agents.len(), AGENTS_PER_NAMESPACE);
        assert_eq!(big.not_shown, 7);
        assert_eq!(big.agents[0].name, "zz-stopped");
        assert_eq!(big.agents[1].name, "zz-open");
        assert_eq!(p.namespaces.len(), NAMESPACES);
        assert_eq!(p.namespaces_not_shown, 3);
        assert_eq!(
            p.phases["Running"],
            AGENTS_PER_NAMESPACE + 5 + NAMESPACES + 2
        );
        let out = html(&p);
        assert!(
            out.contains("And 7 more agents in big, not listed"),
            "the cut is stated"
        );
        assert!(out.contains("And 3 more namespaces with agents, not listed"));
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["limits"]["agentsPerNamespace"], AGENTS_PER_NAMESPACE);
        assert_eq!(json["namespaces"][0]["notShown"], 7);
        assert_eq!(json["namespaces"][1]["notShown"], 0);
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "x".repeat(5000);
        let p = page(&Snapshot {
            now: now(),
            watching: true,
            agents: vec![agent(
                "n",
                "a",
                json!({
                    "phase": "BackingOff", "attempt": 2, "restartCount": 1,
                    "lastFailure": { "time": "2026-11-22T11:59:00Z", "reason": "Error", "class": "Transient", "message": long },
                }),
            )],
            ..Snapshot::default()
        });
        let shown = p.namespaces[0].agents[0]
            .last_failure_message
            .as_deref()
            .unwrap();
        assert_eq!(shown.chars().count(), MESSAGE_CHARS);
    }

    #[test]
    fn the_most_restarting_agents_are_highlighted_and_times_are_relative() {
        let history = |n: u32| -> Vec<serde_json::Value> {
            (1..=n)
                .map(|i| json!({ "attempt": i, "trigger": "Failure", "restartedAt": "2026-11-22T11:50:00Z" }))
                .collect()
        };
        let agents = vec![
            agent("n", "calm", json!({ "phase": "Running", "attempt": 1 })),
            agent(
                "n",
                "flappy",
                json!({
                    "phase": "BackingOff", "attempt": 6, "restartCount": 5, "restartHistory": history(5),
                    "nextRestartAt": "2026-11-22T12:00:42Z",
                }),
            ),
        ];
        let p = page(&Snapshot {
            now: now(),
            watching: true,
            agents,
            ..Snapshot::default()
        });
        assert_eq!(p.most_restarts.len(), 1);
        assert_eq!(p.most_restarts[0].name, "flappy");
        assert_eq!(p.most_restarts[0].recent_restarts, 5);
        let out = html(&p);
        assert!(out.contains("<tr class=\"hot\"><td>flappy</td>"), "{out}");
        assert!(out.contains("<tr><td>calm</td>"), "{out}");
        assert!(out.contains("<time datetime=\"2026-11-22T12:00:42Z\" title=\"2026-11-22T12:00:42Z\">in 42s</time>"), "{out}");
        assert!(out.contains("2 agents at"), "{out}");
    }

    #[test]
    fn groups_are_drawn_as_trees_and_outages_listed() {
        let group = |name: &str, members: serde_json::Value| -> AgentGroup {
            serde_json::from_value(json!({
                "apiVersion": "supervisor.dev/v1alpha1", "kind": "AgentGroup",
                "metadata": { "name": name, "namespace": "n" },
                "spec": { "strategy": "OneForAll", "members": members },
                "status": { "phase": "Running", "ready": "1/1" },
            }))
            .unwrap()
        };
        let policy: RestartPolicy = serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "RestartPolicy",
            "metadata": { "name": "llm", "namespace": "n" },
            "spec": {},
            "status": { "outages": [{
                "fingerprint": "0123456789abcdef", "reason": "Error", "message": "provider <503>",
                "since": "2026-11-22T11:58:00Z", "agents": 4, "state": "Holding",
                "nextProbeAt": "2026-11-22T12:01:00Z"
            }]}
        }))
        .unwrap();
        let p = page(&Snapshot {
            now: now(),
            watching: true,
            agents: vec![agent(
                "n",
                "planner",
                json!({ "phase": "Running", "attempt": 1 }),
            )],
            groups: vec![
                group("outer", json!([{ "group": "inner" }])),
                group("inner", json!([{ "agent": "planner" }])),
            ],
            policies: vec![policy],
        });
        assert_eq!(p.groups.len(), 1, "one root");
        assert_eq!(p.groups[0].tree.name, "outer");
        assert_eq!(p.groups[0].tree.members[0].members[0].name, "planner");
        assert_eq!(p.outages.len(), 1);
        let out = html(&p);
        assert!(out.contains("<li><strong>group outer</strong>"), "{out}");
        assert!(
            out.contains("<li>planner <span class=\"Running\">Running</span>"),
            "{out}"
        );
        assert!(out.contains("Error: provider &lt;503&gt;"), "{out}");
        assert!(out.contains(">in 60s</time>"), "{out}");
    }

    #[test]
    fn a_standby_replica_says_it_watches_nothing() {
        let out = html(&page(&Snapshot {
            now: now(),
            watching: false,
            ..Snapshot::default()
        }));
        assert!(out.contains("This replica is not leading"), "{out}");
        assert!(out.contains("0 agents at"), "{out}");
    }
}
