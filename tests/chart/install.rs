//! `helm install` into the real control plane: what it creates, what the authorizer then lets
//! the operator do, and the in-process operator running with exactly those permissions.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agent_supervisor::api::{Agent, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use serde_yaml::Value;

use crate::support::{self, TestNamespace, eventually};
use crate::{RELEASE, chart, documents, output, run, set_args};

/// A `helm install` of the chart, uninstalled when dropped unless the test did.
struct Release {
    namespace: String,
    installed: bool,
}

impl Release {
    /// Installs the chart into `namespace` (CRDs skipped: the tests install them), returning
    /// the release and helm's output.
    fn install(namespace: &str, sets: &[&str]) -> (Release, String) {
        let out = run(
            support::helm()
                .args(["install", RELEASE])
                .arg(chart())
                .args(["--namespace", namespace, "--skip-crds"])
                .args(set_args(sets)),
            None,
        );
        let release = Release {
            namespace: namespace.to_owned(),
            installed: true,
        };
        (release, out)
    }

    /// The objects helm installed.
    fn manifest(&self) -> Vec<Value> {
        documents(&run(
            support::helm().args(["get", "manifest", RELEASE, "--namespace", &self.namespace]),
            None,
        ))
    }

    fn uninstall(mut self) {
        self.installed = false;
        run(
            support::helm().args([
                "uninstall",
                RELEASE,
                "--namespace",
                &self.namespace,
                "--wait",
            ]),
            None,
        );
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if self.installed {
            let _ = output(
                support::helm().args(["uninstall", RELEASE, "--namespace", &self.namespace]),
                None,
            );
        }
    }
}

/// Whether `user` may make `request` (`kubectl auth can-i <request>`), as the API server's
/// authorizer decides.
fn can(user: &str, request: &str) -> bool {
    let out = output(
        support::kubectl()
            .args(["auth", "can-i"])
            .args(request.split_whitespace())
            .args(["--as", user]),
        None,
    );
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A misspelt resource type is answered "no" with a warning: that must not pass as a denial.
    if stderr.contains("Warning") || !matches!(answer.as_str(), "yes" | "no") {
        panic!("`kubectl auth can-i {request}` as {user}: {answer}\n{stderr}");
    }
    answer == "yes"
}

fn service_account_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{RELEASE}")
}

/// Waits until the API server's authorizer knows the release's RBAC: bindings reach it through
/// a cache, a moment after they are created.
async fn wait_for_rbac(user: &str, watched: &str) {
    eventually(
        Duration::from_secs(30),
        "the chart's RBAC to take effect",
        || async move {
            can(user, &format!("list agents.supervisor.dev -n {watched}")).then_some(())
        },
    )
    .await;
}

/// `helm install` watching one namespace creates the ServiceAccount, Roles, Deployment and
/// Service and nothing cluster-wide; the authorizer then grants the operator its permissions
/// there and refuses everything else; `helm uninstall` removes it all.
#[tokio::test]
async fn chart_installs_namespaced_and_uninstalls() {
    let ns = TestNamespace::new().await;
    let watched = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let watch = format!("watchNamespaces={{{}}}", watched.name);
    let (release, out) = Release::install(&ns.name, &[&watch]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    assert!(
        out.contains("kubectl describe agent basic"),
        "NOTES say what to do next:\n{out}"
    );

    // What it created, as the API server has it.
    let client = ns.client.clone();
    let (home, there) = (ns.name.clone(), watched.name.clone());
    Api::<ServiceAccount>::namespaced(client.clone(), &home)
        .get(RELEASE)
        .await
        .expect("the ServiceAccount");
    Api::<Service>::namespaced(client.clone(), &home)
        .get(&format!("{RELEASE}-metrics"))
        .await
        .expect("the metrics Service");
    let deployment = Api::<Deployment>::namespaced(client.clone(), &home)
        .get(RELEASE)
        .await
        .expect("the Deployment");
    let args = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(args.contains(&format!("--namespaces={there}")), "{args:?}");
    Api::<Role>::namespaced(client.clone(), &there)
        .get(RELEASE)
        .await
        .expect("the Role in the watched namespace");
    Api::<RoleBinding>::namespaced(client.clone(), &there)
        .get(RELEASE)
        .await
        .expect("its RoleBinding");
    let leader = format!("{RELEASE}-leader-election");
    Api::<Role>::namespaced(client.clone(), &home)
        .get(&leader)
        .await
        .expect("the leader-election Role");
    Api::<RoleBinding>::namespaced(client.clone(), &home)
        .get(&leader)
        .await
        .expect("its RoleBinding");
    let kinds: BTreeSet<String> = release
        .manifest()
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    let namespaced = [
        "Deployment",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ];
    assert_eq!(
        kinds,
        BTreeSet::from(namespaced.map(String::from)),
        "nothing cluster-wide"
    );

    // The authorizer grants the operator what it needs where it works, and nothing else.
    let user = service_account_user(&home);
    wait_for_rbac(&user, &there).await;
    let allowed = [
        format!("watch agents.supervisor.dev -n {there}"),
        format!("patch agents.supervisor.dev --subresource=status -n {there}"),
        format!("update restartpolicies.supervisor.dev --subresource=status -n {there}"),
        format!("list agentgroups.supervisor.dev -n {there}"),
        format!("watch agentgroups.supervisor.dev -n {there}"),
        format!("patch agentgroups.supervisor.dev --subresource=status -n {there}"),
        format!("update agentgroups.supervisor.dev --subresource=status -n {there}"),
        format!("create pods -n {there}"),
        format!("delete pods -n {there}"),
        format!("create persistentvolumeclaims -n {there}"),
        format!("create leases.coordination.k8s.io -n {there}"),
        format!("patch events.events.k8s.io -n {there}"),
        format!("create leases.coordination.k8s.io -n {home}"),
        format!("patch leases.coordination.k8s.io/{RELEASE} -n {home}"),
    ];
    for request in &allowed {
        assert!(can(&user, request), "the operator may not {request}");
    }
    let denied = [
        format!("update agents.supervisor.dev -n {there}"),
        format!("delete agents.supervisor.dev -n {there}"),
        format!("patch agentgroups.supervisor.dev -n {there}"),
        format!("create agentgroups.supervisor.dev -n {there}"),
        format!("delete agentgroups.supervisor.dev -n {there}"),
        format!("delete persistentvolumeclaims -n {there}"),
        format!("patch leases.coordination.k8s.io -n {there}"),
        format!("get secrets -n {there}"),
        format!("list pods -n {home}"),
        "list pods --all-namespaces".to_owned(),
        "list agents.supervisor.dev --all-namespaces".to_owned(),
        "list agentgroups.supervisor.dev --all-namespaces".to_owned(),
        format!("get leases.coordination.k8s.io/someone-else -n {home}"),
        format!("patch leases.coordination.k8s.io/someone-else -n {home}"),
    ];
    for request in &denied {
        assert!(!can(&user, request), "the operator may {request}");
    }

    release.uninstall();
    let roles: Api<Role> = Api::namespaced(client.clone(), &there);
    let deployments: Api<Deployment> = Api::namespaced(client, &home);
    eventually(
        Duration::from_secs(30),
        "the release's objects to be gone",
        || {
            let (roles, deployments) = (roles.clone(), deployments.clone());
            async move {
                let role = roles.get_opt(RELEASE).await.ok()?;
                let deployment = deployments.get_opt(RELEASE).await.ok()?;
                (role.is_none() && deployment.is_none()).then_some(())
            }
        },
    )
    .await;
}

/// `helm install` watching every namespace: the ClusterRole lets the chart's ServiceAccount read
/// Agents, RestartPolicies and AgentGroups and write their status in any namespace, and no more.
#[tokio::test]
async fn chart_installs_cluster_wide_with_exactly_the_operators_permissions() {
    let ns = TestNamespace::new().await;
    let elsewhere = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    // Cluster-scoped names of this test's own, so no other release's ClusterRole is touched.
    let fullname = format!("agent-supervisor-{}", ns.name);
    let (release, _) = Release::install(&ns.name, &[&format!("fullnameOverride={fullname}")]);
    let user = format!("system:serviceaccount:{}:{fullname}", ns.name);
    wait_for_rbac(&user, &elsewhere.name).await;

    let there = &elsewhere.name;
    let allowed = [
        "list agents.supervisor.dev --all-namespaces".to_owned(),
        "watch restartpolicies.supervisor.dev --all-namespaces".to_owned(),
        "list agentgroups.supervisor.dev --all-namespaces".to_owned(),
        "watch agentgroups.supervisor.dev --all-namespaces".to_owned(),
        format!("get agentgroups.supervisor.dev -n {there}"),
        format!("patch agentgroups.supervisor.dev --subresource=status -n {there}"),
        format!("update agentgroups.supervisor.dev --subresource=status -n {there}"),
        format!("patch agents.supervisor.dev --subresource=status -n {there}"),
        "watch pods --all-namespaces".to_owned(),
        format!("create pods -n {there}"),
    ];
    for request in &allowed {
        assert!(can(&user, request), "the operator may not {request}");
    }
    let denied = [
        format!("patch agentgroups.supervisor.dev -n {there}"),
        format!("update agentgroups.supervisor.dev -n {there}"),
        format!("create agentgroups.supervisor.dev -n {there}"),
        format!("delete agentgroups.supervisor.dev -n {there}"),
        format!("update agents.supervisor.dev -n {there}"),
        format!("delete persistentvolumeclaims -n {there}"),
        "list secrets --all-namespaces".to_owned(),
    ];
    for request in &denied {
        assert!(!can(&user, request), "the operator may {request}");
    }
    release.uninstall();
}

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
    let operator = support::Operator::start_with(client, &watched.name);

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
    ns.wait_event("probe", "Restarted").await;
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
