//! `sandboxes.enabled`: supervising agent-sandbox Sandboxes adds exactly its permissions (in the
//! ClusterRole, or in the Role of each watched namespace) and passes `--sandboxes=true`; off by
//! default, when nothing about Sandboxes is rendered but `--sandboxes=false`.

use std::collections::BTreeSet;

use serde_yaml::Value;

use crate::render::operator_args;
use crate::{
    RELEASE, chart, documents, kube_version, of_kind, output, set_args, strings, support, template,
    the,
};

/// What supervising Sandboxes adds, as (API group, resource, verb): reading Sandboxes and
/// patching them (spec.operatingMode, the operator's annotation), and patching pods (the labels
/// and annotations that make the Sandbox's pod an attempt); making, repointing and deleting the
/// Agent an annotated Sandbox asks for; patching Leases (a Sandbox's pods get their `AGENT_*`
/// values on one). Never creating or deleting Sandboxes or pods.
const SANDBOX_PERMISSIONS: &[(&str, &str, &str)] = &[
    ("agents.x-k8s.io", "sandboxes", "get"),
    ("agents.x-k8s.io", "sandboxes", "list"),
    ("agents.x-k8s.io", "sandboxes", "watch"),
    ("agents.x-k8s.io", "sandboxes", "patch"),
    ("", "pods", "patch"),
    ("supervisor.dev", "agents", "create"),
    ("supervisor.dev", "agents", "patch"),
    ("supervisor.dev", "agents", "delete"),
    ("coordination.k8s.io", "leases", "patch"),
];

type Permission = (String, String, String);

fn sandbox_permissions() -> BTreeSet<Permission> {
    SANDBOX_PERMISSIONS
        .iter()
        .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
        .collect()
}

/// Every (API group, resource, verb) a list of RBAC rules grants.
fn granted(rules: &Value) -> BTreeSet<Permission> {
    let mut granted = BTreeSet::new();
    for rule in rules.as_sequence().expect("rules is a list") {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    granted.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    granted
}

/// The rules of the operator's role: the ClusterRole, or the Role in `watched`.
fn operator_rules<'a>(docs: &'a [Value], watched: Option<&str>) -> &'a Value {
    match watched {
        None => {
            let [role] = of_kind(docs, "ClusterRole")[..] else {
                panic!("want one ClusterRole when all namespaces are watched");
            };
            &role["rules"]
        }
        Some(namespace) => &the(docs, "Role", namespace, RELEASE)["rules"],
    }
}

/// On: the ClusterRole, or each watched namespace's Role, grants what it grants by default plus
/// exactly the Sandbox permissions (the Sandbox rule with exactly its verbs); the operator is
/// told `--sandboxes=true`; the chart still lints clean. Off: none of them, `--sandboxes=false`.
#[test]
fn sandboxes_enabled_adds_exactly_their_rbac_and_flag() {
    let namespace = "ops";
    // Without agentRBAC.manage, which grants patch on Leases too.
    let modes: [(&[&str], &[Option<&str>]); 2] = [
        (&["agentRBAC.manage=false"], &[None]),
        (
            &["agentRBAC.manage=false", "watchNamespaces={team-a,team-b}"],
            &[Some("team-a"), Some("team-b")],
        ),
    ];
    for (sets, roles) in modes {
        let off = documents(&template(namespace, sets));
        let mut on_sets = sets.to_vec();
        on_sets.push("sandboxes.enabled=true");
        let on = documents(&template(namespace, &on_sets));
        for watched in roles {
            let (before, after) = (
                granted(operator_rules(&off, *watched)),
                granted(operator_rules(&on, *watched)),
            );
            let added: BTreeSet<Permission> = after.difference(&before).cloned().collect();
            assert_eq!(added, sandbox_permissions(), "{sets:?}, in {watched:?}");
            assert!(after.is_superset(&before), "{sets:?}, in {watched:?}");
            assert!(
                before.is_disjoint(&sandbox_permissions()),
                "off, {sets:?}, in {watched:?}: {before:?}"
            );
            // The Sandbox rule itself, as a reader of the Role sees it.
            let rules = operator_rules(&on, *watched).as_sequence().unwrap();
            let sandbox_rules: Vec<&Value> = rules
                .iter()
                .filter(|r| strings(&r["apiGroups"]) == ["agents.x-k8s.io"])
                .collect();
            let [rule] = sandbox_rules[..] else {
                panic!("want one agents.x-k8s.io rule, found {sandbox_rules:?}");
            };
            assert_eq!(strings(&rule["resources"]), ["sandboxes"]);
            assert_eq!(strings(&rule["verbs"]), ["get", "list", "watch", "patch"]);
        }
        let args = operator_args(&on, namespace);
        assert!(args.contains(&"--sandboxes=true".into()), "{args:?}");
        let args = operator_args(&off, namespace);
        assert!(args.contains(&"--sandboxes=false".into()), "{args:?}");
    }

    let lint = output(
        support::helm()
            .args(["lint", "--strict"])
            .arg(chart())
            .args(set_args(&["sandboxes.enabled=true"])),
        None,
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    assert!(lint.status.success(), "helm lint --strict:\n{text}");
    assert!(
        !text.contains("[WARNING]") && !text.contains("[ERROR]"),
        "{text}"
    );
}

/// By default the chart renders nothing about Sandboxes but the flag that turns them off, in
/// both modes; and the values schema takes only a boolean `enabled`.
#[test]
fn sandboxes_are_off_by_default_and_only_the_flag_says_so() {
    for sets in [&[][..], &["watchNamespaces={team-a}"][..]] {
        let yaml = template("ops", sets);
        let mentions: Vec<&str> = yaml
            .lines()
            .filter(|l| l.to_lowercase().contains("sandbox") || l.contains("agents.x-k8s.io"))
            .map(str::trim)
            .collect();
        assert_eq!(mentions, ["- --sandboxes=false"], "{sets:?}");
    }

    for (set, complaint) in [
        ("sandboxes.enabled=yes", "/sandboxes/enabled"),
        (
            "sandboxes.create=true",
            "additional properties 'create' not allowed",
        ),
    ] {
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
