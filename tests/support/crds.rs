//! The operator's CRDs on the test control plane, and the garbage collector caught up.

use std::time::Duration;

use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use super::namespace::TestNamespace;
use super::wait::eventually;

/// Installs (or updates) the CRDs from `crds/` with server-side apply and waits until they are
/// established. Safe to call from every test.
pub async fn install_crds(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("agent-supervisor-tests").force();
    for (name, yaml) in agent_supervisor::api::crd_files() {
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&yaml).expect("generated CRD parses");
        let crd_name = crd.metadata.name.clone().expect("CRD has a name");
        crds.patch(&crd_name, &params, &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("cannot install CRD {name}: {e}"));
        eventually(
            Duration::from_secs(30),
            &format!("CRD {crd_name} to be established"),
            || {
                let crds = crds.clone();
                let crd_name = crd_name.clone();
                async move {
                    let crd = crds.get(&crd_name).await.ok()?;
                    let established = crd
                        .status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    established.then_some(())
                }
            },
        )
        .await;
    }
}

/// Waits until the garbage collector acts on Agents: it discovers new resource types only every
/// 30 seconds, and dependents of an Agent deleted before then would never be collected. Proven
/// by deleting a probe Agent and seeing its dependent ConfigMap collected. Once per process.
pub async fn wait_for_garbage_collection_of_agents(ns: &TestNamespace) {
    use agent_supervisor::api::Agent;
    use k8s_openapi::api::core::v1::ConfigMap;
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_init(|| async {
            let agents: Api<Agent> = ns.api();
            let maps: Api<ConfigMap> = ns.api();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
            for round in 0.. {
                let name = format!("gc-probe-{round}");
                let agent: Agent = serde_json::from_value(serde_json::json!({
                    "metadata": { "name": name },
                    "spec": { "suspend": true, "template": { "spec": { "containers": [{ "name": "c", "image": "none" }] } } }
                }))
                .unwrap();
                let agent = agents.create(&PostParams::default(), &agent).await.expect("create probe agent");
                let map: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": { "name": name, "ownerReferences": [{
                        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent", "name": name,
                        "uid": agent.metadata.uid, "controller": true
                    }]}
                }))
                .unwrap();
                maps.create(&PostParams::default(), &map).await.expect("create probe dependent");
                agents.delete(&name, &DeleteParams::background()).await.expect("delete probe agent");
                let collected = tokio::time::timeout(Duration::from_secs(10), async {
                    while maps.get_opt(&name).await.ok().flatten().is_some() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                })
                .await
                .is_ok();
                if collected {
                    return;
                }
                assert!(tokio::time::Instant::now() < deadline, "the garbage collector never collected Agent dependents");
            }
        })
        .await;
}
