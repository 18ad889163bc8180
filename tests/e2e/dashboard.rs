//! The Grafana dashboard and the alerts query only metrics the operator exports: every PromQL
//! expression is parsed with a real PromQL parser, and each metric it selects is checked against
//! a scrape of the running operator, so neither can silently rot when a metric is renamed.

use std::collections::BTreeSet;
use std::path::PathBuf;

use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};

use crate::support;

fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/agent-supervisor")
}

/// Every target expression of every panel of the dashboard, with its panel's title.
pub fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(chart().join("dashboards/agent-supervisor.json"))
        .expect("the dashboard JSON");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let mut out = Vec::new();
    let mut panels: Vec<&serde_json::Value> =
        dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default().to_string();
            out.push((
                title,
                target["expr"]
                    .as_str()
                    .expect("a PromQL target")
                    .to_string(),
            ));
        }
    }
    // The template variables' queries select metrics too.
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(q) = variable["query"]["query"].as_str()
            && let Some(inner) = q.strip_prefix("label_values(")
        {
            let metric = inner.split(',').next().unwrap().trim();
            out.push((format!("variable {}", variable["name"]), metric.to_string()));
        }
    }
    out
}

/// Every alert expression of the chart's PrometheusRule, as rendered.
pub fn alert_expressions() -> Vec<(String, String)> {
    let out = support::helm()
        .args(["template", "agent-supervisor"])
        .arg(chart())
        .args([
            "--kube-version",
            "1.36.0",
            "--set",
            "prometheusRule.enabled=true",
        ])
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut exprs = Vec::new();
    for doc in serde_yaml::Deserializer::from_slice(&out.stdout) {
        let doc = serde_yaml::Value::deserialize(doc).unwrap();
        if doc["kind"] != "PrometheusRule" {
            continue;
        }
        for group in doc["spec"]["groups"].as_sequence().unwrap() {
            for rule in group["rules"].as_sequence().unwrap() {
                exprs.push((
                    format!("alert {}", rule["alert"].as_str().unwrap_or_default()),
                    rule["expr"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    assert!(!exprs.is_empty(), "the PrometheusRule has alerts");
    exprs
}

use serde::Deserialize;

/// The metric names an expression selects.
pub fn selected_metrics(expr: &str) -> Result<BTreeSet<String>, String> {
    struct Names(BTreeSet<String>);
    impl ExprVisitor for Names {
        type Error = String;
        fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
            let selector = match expr {
                Expr::VectorSelector(vs) => Some(vs),
                Expr::MatrixSelector(ms) => Some(&ms.vs),
                _ => None,
            };
            if let Some(vs) = selector {
                let by_matcher = vs
                    .matchers
                    .matchers
                    .iter()
                    .find(|m| m.name == "__name__")
                    .map(|m| m.value.clone());
                match vs.name.clone().or(by_matcher) {
                    Some(name) => {
                        self.0.insert(name);
                    }
                    None => return Err(format!("a selector without a metric name: {vs}")),
                }
            }
            Ok(true)
        }
    }
    let parsed = parser::parse(expr)?;
    let mut names = Names(BTreeSet::new());
    walk_expr(&mut names, &parsed)?;
    Ok(names.0)
}

/// The series names a scrape exports: each family's name with the suffixes of its type.
pub fn exported(scrape: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in scrape.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                out.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// Checks every dashboard query and alert against a scrape of the operator.
pub fn check_against(scrape: &str) {
    let exported = exported(scrape);
    assert!(exported.contains("agent_supervisor_agents"), "{exported:?}");
    let mut checked = 0;
    for (place, expr) in dashboard_queries().into_iter().chain(alert_expressions()) {
        let names = selected_metrics(&expr)
            .unwrap_or_else(|e| panic!("{place}: {expr:?} does not parse as PromQL: {e}"));
        assert!(!names.is_empty(), "{place}: {expr:?} selects no metric");
        for name in names {
            assert!(
                exported.contains(&name),
                "{place}: {expr:?} selects {name}, which the operator does not export; it exports {exported:?}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 25, "{checked} metric references checked");
}

#[test]
fn the_parser_finds_every_selected_metric_and_refuses_what_is_not_promql() {
    let names = selected_metrics(
        r#"sum by (le) (rate(a_bucket{job=~"$job"}[5m])) / ignoring(x) b + {__name__="c"}"#,
    )
    .unwrap();
    assert_eq!(
        names,
        BTreeSet::from(["a_bucket".into(), "b".into(), "c".into()])
    );
    assert!(selected_metrics("sum(rate(a[5m])").is_err(), "unbalanced");
    assert!(selected_metrics("rate(a)").is_err(), "rate needs a range");
    let scrape = "# TYPE x_total counter\n# TYPE x counter\n# TYPE h histogram\n# TYPE g gauge\n";
    let e = exported(scrape);
    assert!(e.contains("x_total") && e.contains("h_bucket") && e.contains("g"));
    assert!(!e.contains("h"), "a histogram is its series");
}
