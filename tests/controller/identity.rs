//! Managed identity: an Agent with a heartbeat gets what its pod needs to renew its Lease and
//! nothing more, owned by the Agent; a piece deleted is made again; RBAC it did not make is
//! never touched. The token checks run as the agent would: a ServiceAccount token from the
//! TokenRequest API, against the API server's own RBAC.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde_json::json;

use crate::setup;
use crate::support::{self, TestNamespace, eventually};

fn heartbeat_agent(account: Option<&str>) -> serde_json::Value {
    let mut spec = json!({
        "restartPolicyRef": { "name": "p" },
        "heartbeat": { "timeout": "5m", "gracePeriod": "5m" },
    });
    if let Some(account) = account {
        spec["template"] = json!({ "spec": {
            "serviceAccountName": account,
            "containers": [{ "name": "agent", "image": "example.com/agent:1" }],
        }});
    }
    spec
}

/// A client that is the ServiceAccount `account` of `ns`, as a pod running as it would be.
async fn client_as(ns: &TestNamespace, account: &str) -> Client {
    let token = support::service_account_token(&ns.client, &ns.name, account).await;
    let mut config = support::admin_config().await;
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    Client::try_from(config).expect("a client with the token")
}

/// Renews `lease` as `holder`; the API server's answer.
async fn renew(client: &Client, ns: &str, lease: &str, holder: &str) -> Result<Lease, kube::Error> {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let patch = json!({ "spec": { "holderIdentity": holder, "renewTime": now } });
    Api::<Lease>::namespaced(client.clone(), ns)
        .patch(lease, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(e)) if e.code == 403)
}

fn owned_by_agent<K: Resource>(object: &K, agent: &str) -> bool {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Agent" && o.name == agent && o.controller == Some(true))
}

async fn wait_object<K>(ns: &TestNamespace, name: &str) -> K
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = ns.api();
    eventually(
        std::time::Duration::from_secs(30),
        &format!("{} {name}", K::kind(&())),
        || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok().flatten() }
        },
    )
    .await
}

#[tokio::test]
async fn a_heartbeat_agent_renews_its_own_lease_with_its_managed_token_and_no_other() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", json!({ "backoff": { "type": "Immediate" } }))
        .await;
    ns.create_agent("scout", heartbeat_agent(None)).await;
    ns.create_agent("other", heartbeat_agent(None)).await;
    let pod: Pod = ns.wait_running("scout-1").await;
    ns.wait_running("other-1").await;

    // The pod runs as a ServiceAccount made for it; the Role allows exactly its Lease.
    let spec = pod.spec.expect("a pod spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("scout"));
    let account: ServiceAccount = wait_object(&ns, "scout").await;
    let role: Role = wait_object(&ns, "scout-heartbeat").await;
    let binding: RoleBinding = wait_object(&ns, "scout-heartbeat").await;
    for owned in [
        owned_by_agent(&account, "scout"),
        owned_by_agent(&role, "scout"),
        owned_by_agent(&binding, "scout"),
    ] {
        assert!(owned, "each piece is owned by its Agent");
    }
    let rule = &role.rules.expect("rules")[0];
    assert_eq!(rule.resource_names, Some(vec!["scout".to_string()]));
    assert_eq!(binding.subjects.expect("subjects")[0].name, "scout");

    // Its token renews its own Lease, and is refused another's, and anything else.
    let agent = client_as(&ns, "scout").await;
    let renewed = renew(&agent, &ns.name, "scout", "scout-1")
        .await
        .expect("the managed token renews the agent's own Lease");
    assert_eq!(
        renewed.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("scout-1")
    );
    assert!(forbidden(renew(&agent, &ns.name, "other", "scout-1").await));
    let leases: Api<Lease> = Api::namespaced(agent.clone(), &ns.name);
    assert!(forbidden(leases.get("other").await), "reads no other Lease");
    assert!(
        forbidden(leases.list(&Default::default()).await),
        "lists none"
    );
    let pods: Api<Pod> = Api::namespaced(agent.clone(), &ns.name);
    assert!(
        forbidden(pods.list(&Default::default()).await),
        "and nothing else"
    );

    // A piece deleted is made again, and works again.
    let roles: Api<Role> = ns.api();
    let before = role.metadata.uid.clone();
    roles
        .delete("scout-heartbeat", &DeleteParams::default())
        .await
        .expect("delete the Role");
    let again: Role = eventually(
        std::time::Duration::from_secs(30),
        "the Role made again",
        || {
            let roles = roles.clone();
            let before = before.clone();
            async move {
                let role = roles.get_opt("scout-heartbeat").await.ok().flatten()?;
                (role.metadata.uid != before).then_some(role)
            }
        },
    )
    .await;
    assert!(owned_by_agent(&again, "scout"));
    eventually(
        std::time::Duration::from_secs(30),
        "the token renews again",
        || {
            let agent = agent.clone();
            let ns = ns.name.clone();
            async move { renew(&agent, &ns, "scout", "scout-1").await.ok() }
        },
    )
    .await;
}

#[tokio::test]
async fn the_templates_account_is_bound_and_rbac_of_someone_else_is_never_touched() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", json!({ "backoff": { "type": "Immediate" } }))
        .await;
    let accounts: Api<ServiceAccount> = ns.api();
    let researcher: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "researcher" } })).unwrap();
    accounts
        .create(&PostParams::default(), &researcher)
        .await
        .expect("create the user's ServiceAccount");
    // Someone's own Role with the name the operator would use for `taken`.
    let foreign: Role = serde_json::from_value(json!({
        "metadata": { "name": "taken-heartbeat" },
        "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] }],
    }))
    .unwrap();
    let roles: Api<Role> = ns.api();
    roles
        .create(&PostParams::default(), &foreign)
        .await
        .expect("create the user's Role");

    ns.create_agent("analyst", heartbeat_agent(Some("researcher")))
        .await;
    ns.create_agent("taken", heartbeat_agent(None)).await;
    let pod: Pod = ns.wait_running("analyst-1").await;
    assert_eq!(
        pod.spec.and_then(|s| s.service_account_name).as_deref(),
        Some("researcher"),
        "the template's account is kept"
    );
    let binding: RoleBinding = wait_object(&ns, "analyst-heartbeat").await;
    assert_eq!(binding.subjects.expect("subjects")[0].name, "researcher");
    assert!(
        accounts.get_opt("analyst").await.expect("read").is_none(),
        "no account is made when the template names one"
    );
    let agent = client_as(&ns, "researcher").await;
    renew(&agent, &ns.name, "analyst", "analyst-1")
        .await
        .expect("the template's account renews the Lease");
    let researcher_again = accounts.get("researcher").await.expect("still there");
    assert!(
        !owned_by_agent(&researcher_again, "analyst"),
        "the user's account is not adopted"
    );

    // A ServiceAccount named after an Agent, made by its user before (as the examples once
    // had it): the pod runs as it and it is bound, never adopted or changed.
    let mine: ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "upgraded" } })).unwrap();
    accounts
        .create(&PostParams::default(), &mine)
        .await
        .expect("create the user's ServiceAccount");
    ns.create_agent("upgraded", heartbeat_agent(None)).await;
    let pod: Pod = ns.wait_running("upgraded-1").await;
    assert_eq!(
        pod.spec.and_then(|s| s.service_account_name).as_deref(),
        Some("upgraded")
    );
    let binding: RoleBinding = wait_object(&ns, "upgraded-heartbeat").await;
    assert_eq!(binding.subjects.expect("subjects")[0].name, "upgraded");
    let account = accounts.get("upgraded").await.expect("still there");
    assert!(!owned_by_agent(&account, "upgraded"), "not adopted");

    // The name taken: reported on the Agent, the Role left exactly as it was and bound to
    // nothing; the agent runs all the same.
    ns.wait_running("taken-1").await;
    let warning = ns.wait_event("taken", "NameTaken").await;
    assert!(warning.contains("taken-heartbeat"), "{warning}");
    let role = roles.get("taken-heartbeat").await.expect("read the Role");
    assert!(!owned_by_agent(&role, "taken"));
    assert_eq!(
        serde_json::to_value(&role.rules).unwrap(),
        json!([{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] }])
    );
    let bindings: Api<RoleBinding> = ns.api();
    assert!(
        bindings
            .get_opt("taken-heartbeat")
            .await
            .expect("read")
            .is_none(),
        "nothing is bound to a Role the operator did not make"
    );
}

#[tokio::test]
async fn the_binding_follows_the_account_the_pods_run_as() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", json!({ "backoff": { "type": "Immediate" } }))
        .await;
    let accounts: Api<ServiceAccount> = ns.api();
    for name in ["researcher", "writer"] {
        let account: ServiceAccount =
            serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap();
        accounts
            .create(&PostParams::default(), &account)
            .await
            .expect("create the user's ServiceAccount");
    }
    ns.create_agent("analyst", heartbeat_agent(Some("researcher")))
        .await;
    ns.wait_running("analyst-1").await;
    let binding: RoleBinding = wait_object(&ns, "analyst-heartbeat").await;
    assert_eq!(binding.subjects.expect("subjects")[0].name, "researcher");

    // The template's account changes (a rollout): the next pod runs as it, and the binding
    // follows, so the old account may no longer renew and the new one may.
    let patch = json!({ "spec": { "template": { "spec": { "serviceAccountName": "writer" } } } });
    ns.api::<agent_supervisor::api::Agent>()
        .patch("analyst", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("change the template's account");
    let pod: Pod = ns.wait_running("analyst-2").await;
    assert_eq!(
        pod.spec.and_then(|s| s.service_account_name).as_deref(),
        Some("writer")
    );
    let bindings: Api<RoleBinding> = ns.api();
    eventually(
        std::time::Duration::from_secs(30),
        "the binding names the new account",
        || {
            let bindings = bindings.clone();
            async move {
                let binding = bindings.get("analyst-heartbeat").await.ok()?;
                (binding.subjects?[0].name == "writer").then_some(())
            }
        },
    )
    .await;
    let writer = client_as(&ns, "writer").await;
    renew(&writer, &ns.name, "analyst", "analyst-2")
        .await
        .expect("the new account renews the Lease");
    let researcher = client_as(&ns, "researcher").await;
    assert!(forbidden(
        renew(&researcher, &ns.name, "analyst", "analyst-2").await
    ));
}
