//! The status page as HTML: no script, nothing loaded from elsewhere, every value from an
//! object escaped.

use jiff::Timestamp;

use super::{StatusPage, escape};
use crate::api::Time;
use crate::view::list::Row;
use crate::view::spend;
use crate::view::text::relative;
use crate::view::tree::Node;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1b1b;background:#fff}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}h3{font-size:1em}\
table{border-collapse:collapse;margin:.4em 0}th,td{text-align:left;padding:.2em .7em;border-bottom:1px solid #ddd;vertical-align:top}\
th{background:#f4f4f4}.Running{color:#17692a}.Stopped,.CircuitOpen,.Escalated,.Missing{color:#b3261e;font-weight:600}\
.BackingOff,.Pending,.Restarting,.Starting{color:#8a5a00}.hot{background:#fff3e0}.msg{max-width:40em;overflow-wrap:anywhere;font-family:ui-monospace,monospace;font-size:.9em}\
.spent{color:#b3261e;font-weight:600}.low{color:#8a5a00}.note{color:#555}ul.tree{list-style:none;padding-left:1.2em}ul.tree li{margin:.15em 0}";

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
        h.push_str("<table><tr><th>agent</th><th>phase</th><th>restarts</th><th>breaker</th><th>last failure</th><th>next restart</th><th>progress</th><th>spend</th><th>group</th></tr>\n");
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
                "<tr{class}><td>{}</td><td class=\"{1}\">{1}</td><td>{2}</td><td>{3}</td><td class=\"msg\">{4}</td><td>{5}</td><td>{6}</td>{7}<td>{8}</td></tr>\n",
                escape(&r.name),
                escape(&r.phase),
                r.restarts,
                escape(&r.breaker),
                escape(&failure_text(r)),
                next,
                r.progress.map_or("-".to_string(), |p| p.to_string()),
                spend_cell(r),
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

/// What the agent spent, against its budget: red when spent, amber past `warnAt`.
fn spend_cell(r: &Row) -> String {
    let (spent, budget) = (r.spend.as_ref(), r.budget.as_ref());
    let class = spend::standing(spent, budget)
        .map(|s| format!(" class=\"{s}\""))
        .unwrap_or_default();
    format!("<td{class}>{}</td>", escape(&spend::words(spent, budget)))
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
    if node.spend.is_some() || node.budget.is_some() {
        let (spent, budget) = (node.spend.as_ref(), node.budget.as_ref());
        let class = spend::standing(spent, budget).unwrap_or("spend");
        let words = escape(&spend::words(spent, budget));
        h.push_str(&format!(" · spent <span class=\"{class}\">{words}</span>"));
    }
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
