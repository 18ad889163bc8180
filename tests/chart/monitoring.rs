//! What the chart renders for monitoring: the PrometheusRule's alerts, the ServiceMonitor and the
//! Grafana dashboard.

use crate::{RELEASE, chart, documents, template, the};

/// The PrometheusRule's alerts, and a ServiceMonitor that selects the metrics Service's port.
#[test]
fn prometheus_rule_alerts_on_breakers_outages_give_ups_flapping_checkpoints_stalls_and_budgets() {
    let sets = ["prometheusRule.enabled=true,serviceMonitor.enabled=true"];
    let docs = documents(&template("ops", &sets));
    let rule = the(&docs, "PrometheusRule", "ops", RELEASE);
    let alerts: Vec<(&str, &str)> = rule["spec"]["groups"][0]["rules"]
        .as_sequence()
        .expect("alert rules")
        .iter()
        .map(|r| {
            let field = |f: &str| r[f].as_str().unwrap_or_default();
            (field("expr"), field("for"))
        })
        .collect();
    assert_eq!(
        alerts,
        [
            (
                r#"agent_supervisor_agents{phase="CircuitOpen"} - ignoring(phase) agent_supervisor_outage_held_agents > 0"#,
                "5m"
            ),
            ("agent_supervisor_outages_open > 0", "1m"),
            ("increase(agent_supervisor_give_ups_total[15m]) > 0", ""),
            ("increase(agent_supervisor_restarts_total[15m]) > 10", ""),
            (
                "increase(agent_supervisor_checkpoints_poisoned_total[15m]) > 0",
                ""
            ),
            (
                r#"increase(agent_supervisor_crashes_total{reason="NoProgress"}[15m]) > 0"#,
                ""
            ),
            (
                "increase(agent_supervisor_budget_shutdowns_total[15m]) > 0",
                ""
            ),
        ]
    );
    let monitor = the(&docs, "ServiceMonitor", "ops", RELEASE);
    let service = the(&docs, "Service", "ops", &format!("{RELEASE}-metrics"));
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .expect("a selector");
    for (key, value) in selector {
        assert_eq!(
            &service["metadata"]["labels"][key], value,
            "the ServiceMonitor selects the Service"
        );
    }
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
}

/// With `grafanaDashboard.enabled`, a ConfigMap carries the dashboard for Grafana's sidecar: its
/// label, valid JSON, one uid, unique panel ids, and every panel's queries on the data source
/// variable. (tests/e2e/metrics.rs checks each query's metrics against a running operator.)
#[test]
fn the_grafana_dashboard_ships_as_a_configmap_for_the_sidecar() {
    let namespace = "ops";
    let none = documents(&template(namespace, &[]));
    assert!(
        !none.iter().any(|d| d["kind"] == "ConfigMap"),
        "no dashboard unless asked for"
    );
    let docs = documents(&template(
        namespace,
        &[
            "grafanaDashboard.enabled=true,grafanaDashboard.namespace=monitoring,grafanaDashboard.annotations.grafana_folder=Agents",
        ],
    ));
    let map = the(
        &docs,
        "ConfigMap",
        "monitoring",
        &format!("{RELEASE}-dashboard"),
    );
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(map["metadata"]["annotations"]["grafana_folder"], "Agents");
    let json = map["data"]["agent-supervisor.json"]
        .as_str()
        .expect("the dashboard JSON");
    let on_disk =
        std::fs::read_to_string(chart().join("dashboards/agent-supervisor.json")).unwrap();
    assert_eq!(json.trim_end(), on_disk.trim_end(), "the file, unchanged");
    let dashboard: serde_json::Value = serde_json::from_str(json).expect("valid JSON");
    assert_eq!(dashboard["uid"], "agent-supervisor");
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = std::collections::BTreeSet::new();
    let mut queries = 0;
    for panel in panels {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "panel id {} twice",
            panel["id"]
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        for target in panel["targets"].as_array().unwrap() {
            assert!(
                target["expr"].as_str().unwrap().contains("job=~\"$job\""),
                "{target}"
            );
            queries += 1;
        }
    }
    assert!(queries >= 20, "{queries} queries");
    // The panels SPEC asks for, by title.
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for want in [
        "Agents by phase",
        "Restart rate by reason and class",
        "Circuit breakers by state",
        "Outages",
        "Restarts delayed by the budget",
        "Time to recovery",
        "Reconcile duration",
        "Reconcile errors",
        "Poisoned checkpoints",
        "Runs stopped for no progress",
        "Spend over time",
        "Tokens spent",
        "Agents stopped by budget",
    ] {
        assert!(titles.contains(&want), "no panel {want:?}: {titles:?}");
    }
}
