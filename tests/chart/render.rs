//! What the chart renders, read as YAML: lint, the values schema and guards, the operator's flags.

use serde_yaml::Value;

use crate::{
    RELEASE, chart, documents, kube_version, output, set_args, strings, support, template, the,
};

/// The operator container's command-line arguments.
pub(crate) fn operator_args(docs: &[Value], namespace: &str) -> Vec<String> {
    let deployment = the(docs, "Deployment", namespace, RELEASE);
    strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"])
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
        ("workerThreads=0", "workerThreads"),
        ("statusInterval=soon", "statusInterval"),
        (
            "terminationGracePeriodSeconds=0",
            "terminationGracePeriodSeconds",
        ),
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

/// The status interval becomes the operator's flag: 10s unless set.
#[test]
fn the_status_interval_is_passed_to_the_operator() {
    let namespace = "ops";
    let defaults = operator_args(&documents(&template(namespace, &[])), namespace);
    assert!(
        defaults.contains(&"--status-interval=10s".to_string()),
        "{defaults:?}"
    );
    let set = operator_args(
        &documents(&template(namespace, &["statusInterval=2s"])),
        namespace,
    );
    assert!(set.contains(&"--status-interval=2s".to_string()), "{set:?}");
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
