//! The in-process operator running with exactly the chart's permissions: every request it makes
//! while supervising agents and groups is granted, as the API server's audit log shows.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agent_supervisor::api::{Agent, Phase};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Client;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::install::{Release, service_account_user, wait_for_rbac};
use crate::support::{self, TestNamespace, eventually};

/// The user agent of the operator running as the chart's ServiceAccount, to find its requests.
const RBAC_PROBE_USER_AGENT: &str = "agent-supervisor-chart-rbac-test";

/// The in-process operator, acting as the chart's ServiceAccount (impersonated), supervises an
/// agent through creation, a crash, a restart and a suspension, another agent's claim, and a
/// supervision group restarting its members: the API server refuses none of its requests, as its
/// audit log shows.
#[tokio::test(flavor = "multi_thread")]
async fn charts_rbac_is_enough_for_the_operator() {
    let ns = TestNamespace::new().await;
    let watched = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let watch = format!("watchNamespaces={{{}}}", watched.name);
    let (_release, _) = Release::install(&ns.name, &[&watch]);
    let user = service_account_user(&ns.name);
    wait_for_rbac(&user, &watched.name).await;
    let log_start = support::audit_log_position();

    let mut config = support::admin_config().await;
    config.auth_info.impersonate = Some(user.clone());
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(RBAC_PROBE_USER_AGENT),
    ));
    let client = Client::try_from(config).expect("impersonating client");
    // As the chart runs it: without Sandboxes (sandboxes.enabled is false by default).
    let config = agent_supervisor::controller::Config {
        namespaces: vec![watched.name.clone()],
        sandboxes: false,
        ..Default::default()
    };
    let operator = support::Operator::start_with_config(client, config);

    // On its own task, so that when a step times out the refusals below still explain why.
    let watched = Arc::new(watched);
    let scenario = tokio::spawn({
        let watched = watched.clone();
        async move {
            supervise_an_agent(&watched).await;
            supervise_a_group(&watched).await;
        }
    });
    let outcome = scenario.await;
    drop(operator);

    // Once the audit log holds every request made so far, read what the operator was refused
    // (while its namespace and Role still exist: nothing is refused for their deletion).
    support::audit_log_caught_up(&ns).await;
    let requests = operator_requests(&user, log_start);
    let refused: BTreeSet<String> = requests
        .iter()
        .filter(|(_, code)| *code == 403)
        .map(|(request, _)| request.clone())
        .collect();
    assert!(
        refused.is_empty(),
        "the chart's RBAC refused the operator: {refused:#?}"
    );
    if let Err(failed) = outcome {
        std::panic::resume_unwind(failed.into_panic());
    }
    // The groups' requests were made, and granted.
    let watched = &watched.name;
    for request in [
        "list agentgroups".to_owned(),
        "watch agentgroups".to_owned(),
        format!("patch agentgroups/status in {watched}"),
    ] {
        assert!(
            requests
                .iter()
                .any(|(r, code)| r.starts_with(&request) && (200..300).contains(code)),
            "the operator never made `{request}`: {requests:#?}"
        );
    }
}

/// Every kind of request the operator makes: pods created and deleted, status and Events
/// written, a heartbeat Lease and a claim created.
async fn supervise_an_agent(ns: &TestNamespace) {
    ns.create_policy(
        "fast",
        json!({
            "backoff": { "type": "Exponential", "initialDelay": "1s", "maxDelay": "1m", "jitter": 0.0 },
            "circuitBreaker": { "failureThreshold": 0 },
        }),
    )
    .await;
    let probe = json!({ "restartPolicyRef": { "name": "fast" }, "heartbeat": { "timeout": "1h" } });
    ns.create_agent("probe", probe).await;
    let claim = json!({ "metadata": { "name": "memory" }, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } } });
    ns.create_agent("remembers", json!({ "volumeClaimTemplates": [claim] }))
        .await;

    ns.wait_running("probe-1").await;
    ns.terminate("probe-1", 1, "Error", "boom").await;
    ns.wait_running("probe-2").await;
    // Its restart was told (with the crash, if it was due by the time the crash was seen).
    ns.wait_event("probe", "Crashed").await;
    let suspend = json!({ "spec": { "suspend": true } });
    ns.api::<Agent>()
        .patch("probe", &PatchParams::default(), &Patch::Merge(suspend))
        .await
        .expect("suspend the agent");
    ns.wait_status("probe", "phase Suspended", |s| {
        s.phase == Some(Phase::Suspended)
    })
    .await;
    ns.wait_gone("probe-2").await;
    ns.api::<Lease>()
        .get("probe")
        .await
        .expect("the heartbeat Lease");
    let claims = ns.api::<PersistentVolumeClaim>();
    eventually(
        Duration::from_secs(30),
        "the claim remembers-memory",
        || {
            let claims = claims.clone();
            async move { claims.get_opt("remembers-memory").await.ok()? }
        },
    )
    .await;
}

/// A supervision group: its status written, its Events recorded, and its orders carried out by
/// its members: a crash restarts both of them.
async fn supervise_a_group(ns: &TestNamespace) {
    for name in ["alpha", "beta"] {
        ns.create_agent(name, json!({ "restartPolicyRef": { "name": "fast" } }))
            .await;
    }
    ns.create_group(
        "pair",
        json!({ "strategy": "OneForAll", "members": [{ "agent": "alpha" }, { "agent": "beta" }] }),
    )
    .await;
    ns.wait_group_running("pair").await;
    ns.wait_running("beta-1").await;
    ns.terminate("beta-1", 1, "Error", "boom").await;
    ns.wait_running("alpha-2").await;
    ns.wait_running("beta-2").await;
    let pair = ns
        .wait_group("pair", "a group restart", |s| s.restart_count == 1)
        .await;
    assert_eq!(pair.restart_history[0].restarted, ["alpha", "beta"]);
    ns.wait_group_event("pair", "GroupRestart").await;
    ns.wait_event("alpha", "RestartScheduled").await;
}

/// The operator's requests as `user` since `start`, from the API server's audit log, as
/// ("verb resource[/subresource] in namespace", response code); panics if the log has none of
/// its requests at all.
fn operator_requests(user: &str, start: support::AuditPosition) -> Vec<(String, u16)> {
    let log = support::audit_log();
    let text = support::audit_log_since(start);
    let requests: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|e| {
            e["userAgent"] == RBAC_PROBE_USER_AGENT && e["impersonatedUser"]["username"] == user
        })
        .collect();
    assert!(
        !requests.is_empty(),
        "no requests by the operator as {user} in {}",
        log.display()
    );
    requests
        .iter()
        .map(|e| {
            let object = &e["objectRef"];
            let subresource = object["subresource"].as_str().map(|s| format!("/{s}"));
            let request = format!(
                "{} {}{} in {}",
                e["verb"].as_str().unwrap_or_default(),
                object["resource"].as_str().unwrap_or_default(),
                subresource.unwrap_or_default(),
                object["namespace"].as_str().unwrap_or("the cluster"),
            );
            let code = e["responseStatus"]["code"].as_u64().unwrap_or_default();
            (request, u16::try_from(code).unwrap_or_default())
        })
        .collect()
}
