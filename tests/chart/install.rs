//! `helm install` into the real control plane: what it creates and what the authorizer then lets
//! the operator do.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use serde_yaml::Value;

use crate::support::{self, TestNamespace, eventually};
use crate::{RELEASE, chart, documents, output, run, set_args};

/// A `helm install` of the chart, uninstalled when dropped unless the test did.
pub(crate) struct Release {
    namespace: String,
    installed: bool,
}

impl Release {
    /// Installs the chart into `namespace` (CRDs skipped: the tests install them), returning
    /// the release and helm's output.
    pub(crate) fn install(namespace: &str, sets: &[&str]) -> (Release, String) {
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

pub(crate) fn service_account_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{RELEASE}")
}

/// Waits until the API server's authorizer knows the release's RBAC: bindings reach it through
/// a cache, a moment after they are created.
pub(crate) async fn wait_for_rbac(user: &str, watched: &str) {
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
    for next in [
        "kubectl describe agent basic",
        "restartpolicies.supervisor.dev agentgroups.supervisor.dev",
        "examples/agent-team.yaml",
        "`kubectl get agg`",
        "lists Agents, RestartPolicies and AgentGroups together",
    ] {
        assert!(out.contains(next), "NOTES say `{next}`:\n{out}");
    }

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
        format!("create events -n {there}"),
        format!("patch events -n {there}"),
        format!("create leases.coordination.k8s.io -n {home}"),
        format!("patch leases.coordination.k8s.io/{RELEASE} -n {home}"),
        // The agents' managed identities (agentRBAC.manage): it holds what it grants.
        format!("patch leases.coordination.k8s.io -n {there}"),
        format!("create serviceaccounts -n {there}"),
        format!("create roles.rbac.authorization.k8s.io -n {there}"),
        format!("create rolebindings.rbac.authorization.k8s.io -n {there}"),
        format!("patch rolebindings.rbac.authorization.k8s.io -n {there}"),
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
        format!("get secrets -n {there}"),
        format!("delete roles.rbac.authorization.k8s.io -n {there}"),
        format!("patch roles.rbac.authorization.k8s.io -n {there}"),
        format!("update rolebindings.rbac.authorization.k8s.io -n {there}"),
        format!("delete serviceaccounts -n {there}"),
        format!("escalate roles.rbac.authorization.k8s.io -n {there}"),
        format!("bind roles.rbac.authorization.k8s.io -n {there}"),
        format!("create rolebindings.rbac.authorization.k8s.io -n {home}"),
        format!("create serviceaccounts --subresource=token -n {there}"),
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
