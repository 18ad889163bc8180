//! The chart's alerts, proven with Prometheus's own rule engine: the rendered PrometheusRule's
//! groups are checked with `promtool check rules` and unit-tested with `promtool test rules`
//! against tests/chart/alerts.test.yaml — series that should fire each alert do, at the right
//! time and with the right labels and text, and healthy series fire nothing.

use std::collections::BTreeSet;
use std::path::Path;

use serde_yaml::Value;

use super::{RELEASE, documents, run, support, template, the};

/// A directory holding the rendered rules and the unit tests, as promtool wants them.
fn rules_and_tests() -> (std::path::PathBuf, Value) {
    let docs = documents(&template("ops", &["prometheusRule.enabled=true"]));
    let rule = the(&docs, "PrometheusRule", "ops", RELEASE);
    let groups = rule["spec"]["groups"].clone();
    let dir = std::env::temp_dir().join(format!(
        "agent-supervisor-alerts-{:08x}",
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut rules = serde_yaml::Mapping::new();
    rules.insert("groups".into(), groups.clone());
    std::fs::write(
        dir.join("alerts.rules.yaml"),
        serde_yaml::to_string(&rules).unwrap(),
    )
    .expect("write the rules");
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chart/alerts.test.yaml");
    std::fs::copy(&tests, dir.join("alerts.test.yaml")).expect("copy the unit tests");
    (dir, groups)
}

#[test]
fn promtool_proves_every_alert_fires_when_it_should_and_only_then() {
    let (dir, groups) = rules_and_tests();
    let checked = run(
        support::tool("promtool")
            .current_dir(&dir)
            .args(["check", "rules", "alerts.rules.yaml"]),
        None,
    );
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = run(
        support::tool("promtool")
            .current_dir(&dir)
            .args(["test", "rules", "alerts.test.yaml"]),
        None,
    );
    assert!(tested.contains("SUCCESS"), "{tested}");

    // Every alert of the chart is tested firing, and tested quiet.
    let alerts: BTreeSet<String> = groups
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    assert!(alerts.len() >= 4, "{alerts:?}");
    let tests: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("alerts.test.yaml")).unwrap())
            .unwrap();
    let (mut firing, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for test in tests["tests"].as_sequence().unwrap() {
        for case in test["alert_rule_test"].as_sequence().unwrap() {
            let name = case["alertname"].as_str().unwrap().to_string();
            if case["exp_alerts"]
                .as_sequence()
                .is_some_and(|a| a.is_empty())
            {
                quiet.insert(name);
            } else {
                firing.insert(name);
            }
        }
    }
    assert_eq!(firing, alerts, "alerts tested firing");
    assert_eq!(quiet, alerts, "alerts tested quiet");
    let _ = std::fs::remove_dir_all(dir);
}
