//! The chart's RBAC, read as YAML: exactly the operator's permissions in both modes, plus its
//! leader-election Lease.

use std::collections::BTreeSet;

use serde_yaml::Value;

use crate::render::operator_args;
use crate::{RELEASE, documents, of_kind, strings, template, the};

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
    ("", &["events"], &["create", "patch"]),
    ("events.k8s.io", &["events"], &["create", "patch"]),
];

/// What managing the agents' identities adds (`agentRBAC.manage`, on by default): making a
/// ServiceAccount, a Role and a RoleBinding per Agent with a heartbeat, and holding the
/// permissions that Role grants (update and patch on Leases), as Kubernetes requires of whoever
/// grants them.
const IDENTITY_RULES: &[(&str, &[&str], &[&str])] = &[
    ("coordination.k8s.io", &["leases"], &["update", "patch"]),
    (
        "",
        &["serviceaccounts"],
        &["get", "list", "watch", "create"],
    ),
    (
        "rbac.authorization.k8s.io",
        &["roles"],
        &["get", "list", "watch", "create"],
    ),
    (
        "rbac.authorization.k8s.io",
        &["rolebindings"],
        &["get", "list", "watch", "create", "patch"],
    ),
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
    let mut expected = base_permissions();
    for (group, resources, verbs) in IDENTITY_RULES {
        for resource in *resources {
            for verb in *verbs {
                expected.insert(permission(group, resource, verb, None));
            }
        }
    }
    expected
}

/// The operator's permissions when it does not manage the agents' identities.
fn base_permissions() -> BTreeSet<Permission> {
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

/// `agentRBAC.manage=false`: none of what managing identities takes, and the flag says so.
#[test]
fn without_managed_identities_the_operator_cannot_make_rbac() {
    let namespace = "ops";
    for sets in [&[][..], &["watchNamespaces={team-a}"][..]] {
        let mut sets = sets.to_vec();
        let on = operator_args(&documents(&template(namespace, &sets)), namespace);
        assert!(on.contains(&"--manage-agent-rbac=true".into()), "{on:?}");
        sets.push("agentRBAC.manage=false");
        let docs = documents(&template(namespace, &sets));
        let role = match of_kind(&docs, "ClusterRole")[..] {
            [role] => role,
            _ => the(&docs, "Role", "team-a", RELEASE),
        };
        assert_eq!(permissions(&role["rules"]), base_permissions(), "{sets:?}");
        let args = operator_args(&docs, namespace);
        assert!(
            args.contains(&"--manage-agent-rbac=false".into()),
            "{args:?}"
        );
    }
}
