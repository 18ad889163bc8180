//! The identity's pieces, as made for an Agent.

use super::*;

fn agent(spec: serde_json::Value) -> Agent {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "supervisor.dev/v1alpha1",
        "kind": "Agent",
        "metadata": { "name": "scout", "namespace": "team", "uid": "u-1" },
        "spec": spec,
    }))
    .expect("a valid Agent")
}

fn template(account: Option<&str>) -> serde_json::Value {
    let mut spec = serde_json::json!({ "containers": [{ "name": "main", "image": "x" }] });
    if let Some(account) = account {
        spec["serviceAccountName"] = account.into();
    }
    serde_json::json!({ "spec": spec })
}

#[test]
fn the_role_allows_renewing_exactly_the_agents_lease() {
    let a =
        agent(serde_json::json!({ "template": template(None), "heartbeat": { "timeout": "30s" } }));
    let rules = role(&a).rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].resource_names, Some(vec!["scout".to_string()]));
    assert_eq!(rules[0].resources, Some(vec!["leases".to_string()]));
    assert_eq!(rules[0].verbs, vec!["get", "update", "patch"]);
    let binding = role_binding(&a, None);
    assert_eq!(binding.role_ref.name, "scout-heartbeat");
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        ("scout", Some("team"))
    );
}

#[test]
fn the_templates_account_is_bound_and_none_is_made_or_assigned() {
    let a = agent(
        serde_json::json!({ "template": template(Some("researcher")), "heartbeat": { "timeout": "30s" } }),
    );
    assert_eq!(account(&a, None), "researcher");
    assert_eq!(
        role_binding(&a, None).subjects.unwrap()[0].name,
        "researcher"
    );
    let mut pod = Pod {
        spec: Some(Default::default()),
        ..Pod::default()
    };
    assign_account(&mut pod, &a);
    assert_eq!(pod.spec.unwrap().service_account_name, None);
}

#[test]
fn only_an_agent_with_a_heartbeat_runs_as_its_own_account() {
    let beating =
        agent(serde_json::json!({ "template": template(None), "heartbeat": { "timeout": "30s" } }));
    let silent = agent(serde_json::json!({ "template": template(None) }));
    for (a, want) in [(&beating, Some("scout".to_string())), (&silent, None)] {
        let mut pod = Pod {
            spec: Some(Default::default()),
            ..Pod::default()
        };
        assign_account(&mut pod, a);
        assert_eq!(pod.spec.unwrap().service_account_name, want);
    }
    assert!(wanted(&beating) && !wanted(&silent));
}

#[test]
fn a_binding_is_the_same_whatever_the_server_filled_in_and_differs_by_account() {
    let a = agent(
        serde_json::json!({ "template": template(Some("researcher")), "heartbeat": { "timeout": "30s" } }),
    );
    let wanted = role_binding(&a, None);
    let mut served = wanted.clone();
    served.subjects.as_mut().unwrap()[0].api_group = Some(String::new());
    assert!(same_subjects(&served, &wanted));
    served.subjects.as_mut().unwrap()[0].name = "writer".into();
    assert!(!same_subjects(&served, &wanted));
    assert!(!same_subjects(&role_binding(&a, Some("default")), &wanted));
}
