//! What the chart renders, read as YAML: lint, the values schema, RBAC in both modes, alerts.

use std::collections::BTreeSet;

use serde_yaml::Value;

use crate::{
    RELEASE, chart, documents, kube_version, of_kind, output, set_args, strings, support, template,
    the,
};

/// What the operator may do in a namespace it supervises: (API group, resources, verbs).
const OPERATOR_RULES: &[(&str, &[&str], &[&str])] = &[
    (
        "supervisor.dev",
        &["agents", "restartpolicies", "agentgroups"],
        &["get", "list", "watch"],
    ),
    (
        "supervisor.dev",
        &[
            "agents/status",
            "restartpolicies/status",
            "agentgroups/status",
        ],
        &["get", "patch", "update"],
    ),
    (
        "",
        &["pods"],
        &[
            "get",
            "list",
            "watch",
            "create",
            "delete",
            "deletecollection",
        ],
    ),
    (
        "",
        &["persistentvolumeclaims"],
        &["get", "list", "watch", "create"],
    ),
    (
        "coordination.k8s.io",
        &["leases"],
        &["get", "list", "watch", "create"],
    ),
    ("events.k8s.io", &["events"], &["create", "patch"]),
];

/// One permission: (API group, resource, verb, the one object it is limited to).
type Permission = (String, String, String, Option<String>);

fn permission(group: &str, resource: &str, verb: &str, name: Option<&str>) -> Permission {
    let name = name.map(str::to_owned);
    (group.to_owned(), resource.to_owned(), verb.to_owned(), name)
}

/// Every permission a list of RBAC rules grants, one by one.
fn permissions(rules: &Value) -> BTreeSet<Permission> {
    let mut granted = BTreeSet::new();
    for rule in rules.as_sequence().expect("rules is a list") {
        assert!(
            rule.get("nonResourceURLs").is_none(),
            "unexpected rule {rule:?}"
        );
        let names = strings(&rule["resourceNames"]);
        let names: Vec<Option<&str>> = match names.is_empty() {
            true => vec![None],
            false => names.iter().map(|n| Some(n.as_str())).collect(),
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        granted.insert(permission(&group, &resource, &verb, *name));
                    }
                }
            }
        }
    }
    granted
}

fn operator_permissions() -> BTreeSet<Permission> {
    let mut expected = BTreeSet::new();
    for (group, resources, verbs) in OPERATOR_RULES {
        for resource in *resources {
            for verb in *verbs {
                expected.insert(permission(group, resource, verb, None));
            }
        }
    }
    expected
}

/// What kube-lease-manager does with the leader-election Lease: create it (a create names no
/// object), then read and patch only that Lease.
fn leader_election_permissions(lease: &str) -> BTreeSet<Permission> {
    let group = "coordination.k8s.io";
    BTreeSet::from([
        permission(group, "leases", "create", None),
        permission(group, "leases", "get", Some(lease)),
        permission(group, "leases", "patch", Some(lease)),
    ])
}

/// The operator container's command-line arguments.
fn operator_args(docs: &[Value], namespace: &str) -> Vec<String> {
    let deployment = the(docs, "Deployment", namespace, RELEASE);
    strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"])
}

/// The subjects of a binding, as (kind, namespace, name).
fn subjects(binding: &Value) -> Vec<(String, String, String)> {
    binding["subjects"]
        .as_sequence()
        .expect("a binding has subjects")
        .iter()
        .map(|s| {
            let field = |f: &str| s[f].as_str().unwrap_or_default().to_owned();
            (field("kind"), field("namespace"), field("name"))
        })
        .collect()
}

/// The chart's ServiceAccount in `namespace`, as a binding's only subject.
fn operator_account(namespace: &str) -> Vec<(String, String, String)> {
    vec![("ServiceAccount".into(), namespace.into(), RELEASE.into())]
}

/// `helm lint --strict` finds nothing to warn about, watching all namespaces or some, and with
/// the optional monitoring objects on.
#[test]
fn chart_lints_clean_in_both_modes() {
    let variants: [&[&str]; 3] = [
        &[],
        &["watchNamespaces={team-a,team-b}"],
        &["serviceMonitor.enabled=true,prometheusRule.enabled=true,logFormat=human"],
    ];
    for sets in variants {
        let out = output(
            support::helm()
                .args(["lint", "--strict"])
                .arg(chart())
                .args(set_args(sets)),
            None,
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "helm lint --strict {sets:?} failed:\n{text}"
        );
        let problems: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("[WARNING]") || l.contains("[ERROR]"))
            .collect();
        assert!(problems.is_empty(), "helm lint --strict {sets:?}:\n{text}");
        assert!(
            text.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{text}"
        );
    }
}

/// values.schema.json is strict (unknown keys, wrong enums, bad names and ranges are errors)
/// and the templates refuse combinations that cannot work.
#[test]
fn values_schema_and_guards_reject_mistakes() {
    let mistakes = [
        ("logFormat=xml", "logFormat"),
        (
            "imagePullPolicy=Always",
            "additional properties 'imagePullPolicy' not allowed",
        ),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("watchNamespaces={Team_A}", "watchNamespaces"),
        ("concurrency=0", "concurrency"),
        ("restartBudget.rate=0", "rate"),
        ("restartBudget.burst=0", "burst"),
        (
            "restartBudget.pace=3",
            "additional properties 'pace' not allowed",
        ),
        ("metrics.port=70000", "port"),
        ("statusPage.addr=somewhere", "addr"),
        (
            "leaderElection.enabled=false,replicaCount=2",
            "needs leaderElection.enabled",
        ),
        (
            "serviceMonitor.enabled=true,metrics.service.enabled=false",
            "needs metrics.service.enabled",
        ),
    ];
    for (set, complaint) in mistakes {
        let out = output(
            support::helm()
                .args(["template", RELEASE])
                .arg(chart())
                .args(["--kube-version", kube_version(), "--set", set]),
            None,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "helm template accepted --set {set}");
        assert!(
            stderr.contains(complaint),
            "--set {set}: want {complaint:?} in\n{stderr}"
        );
    }
}

/// The rendered RBAC, parsed: exactly the operator's permissions, cluster-wide or in each
/// watched namespace and nowhere else, plus its leader-election Lease; and the flags agree.
#[test]
fn rbac_is_exactly_what_the_operator_needs_in_both_modes() {
    let namespace = "ops";
    let cluster = documents(&template(namespace, &[]));
    let namespaced = documents(&template(namespace, &["watchNamespaces={team-a,team-b}"]));

    // All namespaces: one ClusterRole with exactly the operator's permissions, bound to it.
    let [role] = of_kind(&cluster, "ClusterRole")[..] else {
        panic!("want one ClusterRole in cluster mode");
    };
    assert_eq!(permissions(&role["rules"]), operator_permissions());
    let [binding] = of_kind(&cluster, "ClusterRoleBinding")[..] else {
        panic!("want one ClusterRoleBinding in cluster mode");
    };
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(subjects(binding), operator_account(namespace));
    let args = operator_args(&cluster, namespace);
    assert!(
        !args.iter().any(|a| a.starts_with("--namespaces")),
        "{args:?}"
    );

    // Listed namespaces: the same permissions in a Role in each, nothing cluster-wide.
    assert!(of_kind(&namespaced, "ClusterRole").is_empty());
    assert!(of_kind(&namespaced, "ClusterRoleBinding").is_empty());
    for watched in ["team-a", "team-b"] {
        let role = the(&namespaced, "Role", watched, RELEASE);
        assert_eq!(
            permissions(&role["rules"]),
            operator_permissions(),
            "in {watched}"
        );
        let binding = the(&namespaced, "RoleBinding", watched, RELEASE);
        assert_eq!(binding["roleRef"]["kind"], "Role");
        assert_eq!(binding["roleRef"]["name"], RELEASE);
        assert_eq!(subjects(binding), operator_account(namespace));
    }
    let args = operator_args(&namespaced, namespace);
    assert!(
        args.contains(&"--namespaces=team-a,team-b".into()),
        "{args:?}"
    );

    // Both modes: leader election may create its Lease and read and renew only that one, in
    // the release namespace; no other Role anywhere else.
    let leader = format!("{RELEASE}-leader-election");
    for (docs, namespaces) in [
        (&cluster, vec![namespace]),
        (&namespaced, vec![namespace, "team-a", "team-b"]),
    ] {
        let role = the(docs, "Role", namespace, &leader);
        assert_eq!(
            permissions(&role["rules"]),
            leader_election_permissions(RELEASE)
        );
        let binding = the(docs, "RoleBinding", namespace, &leader);
        assert_eq!(binding["roleRef"]["name"], leader.as_str());
        assert_eq!(subjects(binding), operator_account(namespace));
        let roles: BTreeSet<&str> = of_kind(docs, "Role")
            .iter()
            .map(|r| r["metadata"]["namespace"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(roles, BTreeSet::from_iter(namespaces));
        let args = operator_args(docs, namespace);
        for arg in [
            "--leader-elect=true".to_owned(),
            format!("--leader-election-lease-name={RELEASE}"),
            "--leader-election-namespace=$(POD_NAMESPACE)".to_owned(),
        ] {
            assert!(args.contains(&arg), "no {arg} in {args:?}");
        }
    }

    // Without leader election, no Lease permissions at all.
    let docs = documents(&template(namespace, &["leaderElection.enabled=false"]));
    assert!(
        of_kind(&docs, "Role").is_empty(),
        "a Role without leader election"
    );
    let args = operator_args(&docs, namespace);
    assert!(args.contains(&"--leader-elect=false".into()), "{args:?}");
    assert!(
        !args.iter().any(|a| a.starts_with("--leader-election-")),
        "{args:?}"
    );
}

/// The restart budget's values become the operator's flags.
#[test]
fn the_restart_budget_is_passed_to_the_operator() {
    let namespace = "ops";
    let defaults = operator_args(&documents(&template(namespace, &[])), namespace);
    for flag in ["--restart-rate=20", "--restart-burst=100"] {
        assert!(defaults.contains(&flag.to_string()), "{defaults:?}");
    }
    let sets = ["restartBudget.rate=5,restartBudget.burst=7"];
    let set = operator_args(&documents(&template(namespace, &sets)), namespace);
    for flag in ["--restart-rate=5", "--restart-burst=7"] {
        assert!(set.contains(&flag.to_string()), "{set:?}");
    }
}

/// The client's request limit becomes the operator's flags: off unless set.
#[test]
fn the_request_limit_is_passed_to_the_operator() {
    let namespace = "ops";
    let defaults = operator_args(&documents(&template(namespace, &[])), namespace);
    for flag in ["--kube-qps=0", "--kube-burst=100"] {
        assert!(defaults.contains(&flag.to_string()), "{defaults:?}");
    }
    let sets = ["kubeClient.qps=50,kubeClient.burst=20"];
    let set = operator_args(&documents(&template(namespace, &sets)), namespace);
    for flag in ["--kube-qps=50", "--kube-burst=20"] {
        assert!(set.contains(&flag.to_string()), "{set:?}");
    }
}

/// The status page stays on loopback unless someone chooses otherwise, and can be turned off;
/// it is never put behind the Service.
#[test]
fn the_status_page_is_on_loopback_by_default() {
    let namespace = "ops";
    let docs = documents(&template(namespace, &[]));
    let args = operator_args(&docs, namespace);
    assert!(
        args.contains(&"--status-addr=127.0.0.1:8081".to_string()),
        "{args:?}"
    );
    let service = the(&docs, "Service", namespace, &format!("{RELEASE}-metrics"));
    let ports = serde_yaml::to_string(&service["spec"]["ports"]).unwrap();
    assert!(
        !ports.contains("8081"),
        "the Service exposes no status port: {ports}"
    );
    let off = operator_args(
        &documents(&template(namespace, &["statusPage.addr="])),
        namespace,
    );
    assert!(off.contains(&"--status-addr=".to_string()), "{off:?}");
}

/// The PrometheusRule's alerts, and a ServiceMonitor that selects the metrics Service's port.
#[test]
fn prometheus_rule_alerts_on_breakers_outages_give_ups_and_flapping() {
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
    ] {
        assert!(titles.contains(&want), "no panel {want:?}: {titles:?}");
    }
}
