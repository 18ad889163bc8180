//! The page's data and its HTML, from snapshots made by hand.

use jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::api::RestartPolicy;

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
    assert!(
        out.contains(
            "<time datetime=\"2026-11-22T12:00:42Z\" title=\"2026-11-22T12:00:42Z\">in 42s</time>"
        ),
        "{out}"
    );
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
        groups: vec![group("outer", json!([{ "group": "inner" }])), {
            let mut inner = group("inner", json!([{ "agent": "planner" }]));
            inner.spec.budget = serde_json::from_value(json!({ "maxCost": "2.00" })).unwrap();
            inner.status.as_mut().unwrap().spend =
                serde_json::from_value(json!({ "cost": "1.70" })).unwrap();
            inner
        }],
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
    // A group's spend against its budget, amber past warnAt.
    assert!(
        out.contains("· spent <span class=\"low\">1.70/2.00</span>"),
        "{out}"
    );
    assert!(!out.contains("group outer</strong> <span class=\"Running\">Running</span> · OneForAll · ready 1/1 · 0 restarts · spent"), "{out}");
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

#[test]
fn progress_is_shown_where_agents_report_it() {
    let snapshot = Snapshot {
        now: now(),
        watching: true,
        agents: vec![
            agent(
                "work",
                "summarizer",
                json!({ "phase": "Running", "attempt": 2, "progress": { "value": 1234, "at": "2026-11-22T11:58:00Z" } }),
            ),
            agent("work", "plain", json!({ "phase": "Running", "attempt": 1 })),
        ],
        ..Snapshot::default()
    };
    let data = page(&snapshot);
    let rows = &data.namespaces[0].agents;
    let progress = |name: &str| rows.iter().find(|r| r.name == name).unwrap().progress;
    assert_eq!(
        (progress("summarizer"), progress("plain")),
        (Some(1234), None)
    );
    let out = html(&data);
    assert!(out.contains("<th>progress</th>"), "{out}");
    assert!(out.contains("<td>1234</td>"), "{out}");
}

#[test]
fn spend_is_shown_against_the_budget_of_each_agents_policy() {
    let policy = |ns: &str, name: &str| -> RestartPolicy {
        serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "RestartPolicy",
            "metadata": { "name": name, "namespace": ns },
            "spec": { "budget": { "maxCost": "2.00" } },
        }))
        .unwrap()
    };
    let spent = |cost: &str| json!({ "cost": cost, "since": "2026-11-22T10:00:00Z", "current": { "attempt": 1 } });
    let mut metered = agent(
        "n",
        "metered",
        json!({ "phase": "Shutdown", "spend": spent("2.00") }),
    );
    metered.spec.restart_policy_ref = serde_json::from_value(json!({ "name": "metered" })).unwrap();
    let mut low = agent(
        "n",
        "low",
        json!({ "phase": "Running", "spend": spent("1.7") }),
    );
    low.spec.restart_policy_ref = metered.spec.restart_policy_ref.clone();
    let agents = vec![
        metered,
        low,
        // No policy named: the namespace's default, whose budget is another namespace's.
        agent(
            "other",
            "free",
            json!({ "phase": "Running", "spend": spent("0.35") }),
        ),
        agent("n", "quiet", json!({ "phase": "Running" })),
        agent(
            "n",
            "odd",
            json!({ "phase": "Running", "spend": spent("<b>1</b>") }),
        ),
    ];
    let p = page(&Snapshot {
        now: now(),
        watching: true,
        agents,
        policies: vec![policy("n", "metered"), policy("n", "default")],
        ..Snapshot::default()
    });
    let out = html(&p);
    assert!(out.contains("<th>spend</th>"), "{out}");
    for cell in [
        "<td class=\"spent\">2.00/2.00</td>",
        "<td class=\"low\">1.70/2.00</td>",
        "<td>0.35</td>",
        "<td>0.00/2.00</td>",
        "<td>&lt;b&gt;1&lt;/b&gt;/2.00</td>",
    ] {
        assert!(out.contains(cell), "no {cell} in {out}");
    }
    let json = serde_json::to_value(&p).unwrap();
    let rows = json["namespaces"][0]["agents"].as_array().unwrap();
    let row = rows.iter().find(|r| r["name"] == "metered").unwrap();
    assert_eq!(row["spend"], json!({ "cost": "2.00" }));
    assert_eq!(row["budget"], json!({ "maxCost": "2.00", "warnAt": 0.8 }));
    assert!(json["namespaces"][1]["agents"][0].get("budget").is_none());
}
