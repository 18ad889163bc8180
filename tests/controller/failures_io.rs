//! Partial failures of the IO shell: a restart whose status write was lost, an Agent the operator
//! cannot decode, a watch it may not run, a policy's own status writes, and conditions written by
//! someone else.

use std::sync::Arc;

use agent_supervisor::api::{
    AGENT_LABEL, ATTEMPT_LABEL, Agent, HANDLED_RESTART_ANNOTATION, Phase,
    RESTART_REQUESTED_ANNOTATION, RestartPolicy, TEMPLATE_HASH_ANNOTATION, TRIGGER_ANNOTATION,
    Trigger,
};
use agent_supervisor::controller::health::Health;
use agent_supervisor::controller::metrics::Metrics;
use agent_supervisor::controller::{Config, manifests};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::AuthInfo;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::fast_policy;
use crate::support::kubelet::REACT;
use crate::support::{self, Operator, TestNamespace, eventually};

/// A namespace with the CRDs installed and no operator yet.
async fn namespace() -> TestNamespace {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    ns
}

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

#[tokio::test]
async fn a_manual_restart_whose_status_write_was_lost_is_adopted_never_repeated() {
    let ns = namespace().await;
    let operator = Operator::start(&ns.name).await;
    ns.create_policy("p", fast_policy("1s")).await;
    ns.create_agent("x", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("x-1").await;
    ns.wait_status("x", "phase Running", |s| {
        s.phase == Some(Phase::Running) && s.attempt == 1
    })
    .await;
    operator.kill().await;

    // What a restart on request leaves behind when the operator stops right after creating the
    // replacement: the request not yet marked handled, attempt 1 gone, attempt 2 created (as the
    // operator creates it), and the status still at attempt 1.
    let agents = ns.api::<Agent>();
    let patch = json!({ "metadata": { "annotations": { RESTART_REQUESTED_ANNOTATION: "v1" } } });
    let agent = agents
        .patch("x", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("request a restart");
    let pods = ns.api::<Pod>();
    pods.delete("x-1", &DeleteParams::default())
        .await
        .expect("delete attempt 1");
    ns.wait_gone("x-1").await;
    let mut spec = serde_json::to_value(agent.spec.template.get().spec.expect("a pod spec"))
        .expect("a pod spec serializes");
    spec["restartPolicy"] = json!("Never");
    let replacement: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "x-2",
            "labels": { AGENT_LABEL: "x", ATTEMPT_LABEL: "2" },
            "annotations": {
                TEMPLATE_HASH_ANNOTATION: manifests::template_hash(&agent),
                TRIGGER_ANNOTATION: "Manual",
                HANDLED_RESTART_ANNOTATION: "v1",
            },
            "ownerReferences": [manifests::owner_reference(&agent)],
        },
        "spec": spec,
    }))
    .expect("a valid pod");
    pods.create(&PostParams::default(), &replacement)
        .await
        .expect("create attempt 2");
    let before = ns.status("x").await;
    assert_eq!(
        (before.attempt, before.handled_restart_request.as_deref()),
        (1, None),
        "the status has not seen the restart"
    );

    let _operator = Operator::start(&ns.name).await;
    let adopted = ns
        .wait_status("x", "attempt 2 adopted, request v1 handled", |s| {
            s.attempt == 2 && s.handled_restart_request.as_deref() == Some("v1")
        })
        .await;
    assert_eq!(adopted.pod_name.as_deref(), Some("x-2"));
    ns.wait_running("x-2").await;
    let running = ns
        .wait_status("x", "phase Running on attempt 2", |s| {
            s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(running.attempt, 2, "the restart was not repeated");
    assert_eq!(running.restart_count, 1);
    assert_eq!(
        running.restart_history.len(),
        1,
        "one restart, recorded once"
    );
    let record = running
        .restart_history
        .first()
        .expect("the restart is in the history");
    assert_eq!(record.trigger, Trigger::Manual);
    assert_eq!(record.attempt, 1);
    assert!(record.restarted_at.is_some(), "restartedAt recorded");
    assert!(
        pods.get_opt("x-3").await.expect("read pod x-3").is_none(),
        "a second pod was created for the same request"
    );
    let adopted_pod = pods.get("x-2").await.expect("pod x-2 exists");
    assert!(
        adopted_pod.metadata.deletion_timestamp.is_none(),
        "the adopted pod is being deleted"
    );
}

#[tokio::test]
async fn an_agent_the_operator_cannot_decode_stalls_nothing_else() {
    let ns = namespace().await;
    ns.create_agent("bad", json!({})).await;
    // Valid for the schema (an integer ≥ 0), too large for the operator's u32.
    let agents: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::erase::<Agent>(&()),
    );
    let patch = json!({ "status": { "restartCount": 5_000_000_000u64 } });
    let stored = agents
        .patch_status("bad", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the API server takes the status");
    assert_eq!(
        stored.data["status"]["restartCount"],
        json!(5_000_000_000u64)
    );

    let operator = Operator::start(&ns.name).await;
    ns.create_agent("good", json!({})).await;
    ns.wait_running("good-1").await;
    ns.wait_status("good", "phase Running", |s| s.phase == Some(Phase::Running))
        .await;
    let note = ns.wait_event("bad", "InvalidObject").await;
    assert!(
        note.contains("5000000000"),
        "the Event says what is wrong: {note}"
    );
    assert!(operator.is_running(), "the operator stopped");
    assert!(
        ns.api::<Pod>()
            .get_opt("bad-1")
            .await
            .expect("read pod bad-1")
            .is_none(),
        "the undecodable Agent was acted on"
    );
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

/// A third party's condition on an Agent, applied under its own field manager.
async fn apply_external_check(ns: &TestNamespace, agent: &str, present: bool) -> Agent {
    let conditions = if present {
        json!([{
            "type": "ExternalCheck", "status": "True", "reason": "Passed",
            "message": "checked by someone else", "lastTransitionTime": jiff::Timestamp::now().to_string(),
        }])
    } else {
        json!([])
    };
    let patch = json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
        "metadata": { "name": agent },
        "status": { "conditions": conditions },
    });
    ns.api::<Agent>()
        .patch_status(
            agent,
            &PatchParams::apply("external-checker"),
            &Patch::Apply(&patch),
        )
        .await
        .expect("apply the third party's status")
}

fn has_condition(agent: &Agent, type_: &str) -> bool {
    agent
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == type_))
}

#[tokio::test]
async fn a_condition_written_by_someone_else_stays_theirs_to_remove() {
    let ns = namespace().await;
    let _operator = Operator::start(&ns.name).await;
    ns.create_policy("slow", fast_policy("30s")).await;
    ns.create_agent("checked", json!({ "restartPolicyRef": { "name": "slow" } }))
        .await;
    ns.wait_running("checked-1").await;
    ns.wait_status("checked", "phase Running", |s| {
        s.phase == Some(Phase::Running)
    })
    .await;

    let applied = apply_external_check(&ns, "checked", true).await;
    assert!(has_condition(&applied, "ExternalCheck"));
    // The operator writes the status after it: a crash, and a restart 30s away.
    ns.terminate("checked-1", 1, "Error", "boom").await;
    ns.wait_status("checked", "phase BackingOff", |s| {
        s.phase == Some(Phase::BackingOff)
    })
    .await;
    let agent = ns.api::<Agent>().get_status("checked").await.expect("read");
    assert!(
        has_condition(&agent, "ExternalCheck"),
        "the operator removed someone else's condition"
    );

    let removed = apply_external_check(&ns, "checked", false).await;
    assert!(
        !has_condition(&removed, "ExternalCheck"),
        "the third party cannot remove its own condition: the operator co-owns it"
    );
    assert!(
        has_condition(&removed, "Ready"),
        "the operator's own conditions stay"
    );
    assert_eq!(
        removed.status.and_then(|s| s.phase),
        Some(Phase::BackingOff)
    );
}
