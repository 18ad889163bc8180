//! What the operator's watches do: one it may not list is reported and holds every worker, and a
//! policy's own status writes wake none of the Agents that use it.

use std::sync::Arc;

use agent_supervisor::api::{Phase, RestartPolicy};
use agent_supervisor::controller::Config;
use agent_supervisor::controller::health::Health;
use agent_supervisor::controller::metrics::Metrics;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::PostParams;
use kube::config::AuthInfo;
use serde_json::{Value, json};

use crate::failures_io::namespace;
use crate::fast_policy;
use crate::support::kubelet::REACT;
use crate::support::{self, Operator, TestNamespace, eventually};

/// The operator watching only `ns`, with `config` otherwise.
fn config_for(ns: &TestNamespace, config: Config) -> Config {
    Config {
        namespaces: vec![ns.name.clone()],
        ..config
    }
}

/// Agent reconciles so far, from the operator's own metrics.
fn reconciles(metrics: &Metrics) -> u64 {
    metrics
        .encode()
        .lines()
        .find_map(|line| line.strip_prefix("agent_supervisor_reconcile_duration_seconds_count "))
        .map(|count| count.trim().parse().expect("a count"))
        .unwrap_or(0)
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// A client of a ServiceAccount that may do everything the operator does in `ns` except read
/// Leases, and the Role that says so.
async fn client_without_leases(ns: &TestNamespace) -> Client {
    ns.api::<ServiceAccount>()
        .create(
            &PostParams::default(),
            &from_json(json!({ "metadata": { "name": "operator" } })),
        )
        .await
        .expect("create the service account");
    ns.api::<Role>()
        .create(&PostParams::default(), &from_json(role_rules(false)))
        .await
        .expect("create the role");
    ns.api::<RoleBinding>()
        .create(
            &PostParams::default(),
            &from_json(json!({
                "metadata": { "name": "operator" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "operator" },
                "subjects": [{ "kind": "ServiceAccount", "name": "operator", "namespace": ns.name }],
            })),
        )
        .await
        .expect("create the role binding");
    let token = support::service_account_token(&ns.client, &ns.name, "operator").await;
    let mut config = support::admin_config().await;
    config.auth_info = AuthInfo {
        token: Some(token.into()),
        ..AuthInfo::default()
    };
    Client::try_from(config).expect("a token client")
}

/// The operator's Role in the test namespace, with or without Leases.
fn role_rules(leases: bool) -> Value {
    let mut rules = vec![
        json!({ "apiGroups": ["supervisor.dev"], "resources": ["agents", "agents/status", "restartpolicies", "restartpolicies/status", "agentgroups", "agentgroups/status"], "verbs": ["*"] }),
        json!({ "apiGroups": [""], "resources": ["pods", "persistentvolumeclaims", "events"], "verbs": ["*"] }),
        json!({ "apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"] }),
        // What it watches to make the agents' identities (`--manage-agent-rbac`, on).
        json!({ "apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["*"] }),
        json!({ "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["*"] }),
    ];
    if leases {
        rules.push(json!({ "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"] }));
    }
    json!({ "metadata": { "name": "operator" }, "rules": rules })
}

/// The operator, under an identity that may not read Leases, watching `ns`; and its readiness
/// and metrics.
async fn operator_without_leases(ns: &TestNamespace) -> (Operator, Arc<Health>, Arc<Metrics>) {
    let client = client_without_leases(ns).await;
    let health = Arc::new(Health::default());
    health.set_ready(true);
    let metrics = Arc::new(Metrics::default());
    let config = Config {
        health: health.clone(),
        metrics: metrics.clone(),
        // Its ServiceAccount may not watch Sandboxes either: only the Lease watch is tried.
        sandboxes: false,
        ..Config::default()
    };
    let operator = Operator::start_with_config(client, config_for(ns, config));
    (operator, health, metrics)
}

/// The Lease lists refused to the operator's ServiceAccount in `ns` since `since` in the control
/// plane's audit log.
fn refused_lease_lists(ns: &TestNamespace, since: support::AuditPosition) -> usize {
    let text = support::audit_log_since(since);
    let user = format!("system:serviceaccount:{}:operator", ns.name);
    text.lines()
        .filter(|line| line.contains(&user))
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| {
            e["user"]["username"] == user.as_str()
                && e["objectRef"]["resource"] == "leases"
                && e["verb"] == "list"
                && e["responseStatus"]["code"] == 403
        })
        .count()
}

#[tokio::test]
async fn a_watch_that_cannot_list_is_reported_and_holds_every_worker() {
    let ns = namespace().await;
    // In every cache from the first list on: a worker would reconcile it at once.
    ns.create_agent("held", json!({})).await;
    let since = support::audit_log_position();
    let (_operator, health, metrics) = operator_without_leases(&ns).await;

    let why = eventually(REACT, "readiness to blame the Lease watch alone", || {
        let health = health.clone();
        async move {
            let why = health.readiness().err()?;
            let blamed = why.split("; ").collect::<Vec<_>>();
            (blamed.len() == 1 && why.contains("Leases")).then_some(why)
        }
    })
    .await;
    eprintln!("readiness: {why}");
    // The API server refused the list again and again, retried with backoff; meanwhile every
    // other cache was full, and nothing was decided on them.
    eventually(REACT, "three refused Lease lists", || async {
        (refused_lease_lists(&ns, since) >= 3).then_some(())
    })
    .await;
    assert!(
        health.readiness().is_err_and(|why| why.contains("Leases")),
        "ready without a Lease cache"
    );
    assert_eq!(reconciles(&metrics), 0, "an Agent was reconciled");
    assert!(
        ns.status("held").await.phase.is_none(),
        "the Agent was acted on"
    );
    assert!(
        ns.api::<Pod>()
            .get_opt("held-1")
            .await
            .expect("read pod held-1")
            .is_none(),
        "a pod was created on a half-filled cache"
    );

    // Allowed to list Leases, the operator becomes ready and starts the Agent.
    let role: Role = from_json(role_rules(true));
    ns.api::<Role>()
        .replace("operator", &PostParams::default(), &role)
        .await
        .expect("grant leases");
    ns.wait_running("held-1").await;
    ns.wait_status("held", "phase Running", |s| s.phase == Some(Phase::Running))
        .await;
    eventually(REACT, "readiness", || {
        let health = health.clone();
        async move { health.readiness().ok() }
    })
    .await;
}

#[tokio::test]
async fn a_watch_that_cannot_list_is_reported_failing_not_merely_unsynced() {
    let ns = namespace().await;
    let (_operator, health, _) = operator_without_leases(&ns).await;
    eventually(REACT, "readiness to report the Lease watch failing", || {
        let health = health.clone();
        async move {
            health
                .readiness()
                .err()
                .filter(|why| why.contains("Leases") && why.contains("failing"))
        }
    })
    .await;
}

const USERS: usize = 30;
/// Agent reconciles per Agent, on average, for starting it and seeing it run: a few for its pod's
/// changes and the echoes of its status writes, none for the policy's status.
const RECONCILES_PER_AGENT: u64 = 8;

#[tokio::test]
async fn a_policys_status_writes_reconcile_none_of_its_users() {
    let ns = namespace().await;
    let metrics = Arc::new(Metrics::default());
    let config = Config {
        metrics: metrics.clone(),
        ..Config::default()
    };
    let _operator =
        Operator::start_with_config(Operator::admin_client().await, config_for(&ns, config));
    ns.create_policy("shared", fast_policy("1s")).await;
    let policies = ns.api::<RestartPolicy>();
    for i in 0..USERS {
        let name = format!("user-{i}");
        ns.create_agent(&name, json!({ "restartPolicyRef": { "name": "shared" } }))
            .await;
        // Each new user changes the policy's status (its count of users) once.
        eventually(
            REACT,
            &format!("the policy to count {} users", i + 1),
            || {
                let policies = policies.clone();
                async move {
                    let status = policies.get_status("shared").await.ok()?.status?;
                    (status.agents as usize == i + 1).then_some(())
                }
            },
        )
        .await;
        ns.wait_status(&name, "phase Running", |s| s.phase == Some(Phase::Running))
            .await;
    }
    let count = reconciles(&metrics);
    eprintln!(
        "{count} Agent reconciles for {USERS} Agents sharing a policy ({:.1} per Agent)",
        count as f64 / USERS as f64
    );
    assert!(
        count <= RECONCILES_PER_AGENT * USERS as u64,
        "{count} reconciles for {USERS} Agents: more than {RECONCILES_PER_AGENT} per Agent"
    );
}
