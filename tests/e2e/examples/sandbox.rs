//! examples/sandbox-agent.yaml: the Agent adopts the Sandbox's pod, made by agent-sandbox's
//! controller, as its first attempt. (The crash loop of a supervised Sandbox, with real
//! containers, is tests/real_node/sandboxes.rs.)

use agent_supervisor::api::Phase;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::{apply, setup};
use crate::support::{eventually, kubelet::REACT};

#[tokio::test]
async fn the_sandbox_agent_supervises_its_sandbox() {
    let (ns, _operator) = setup().await;
    apply(&ns, "sandbox-agent.yaml").await;
    let status = ns
        .wait_status(
            "researcher",
            "the Sandbox's pod running as attempt 1",
            |s| s.phase == Some(Phase::Running) && s.attempt == 1,
        )
        .await;
    assert_eq!(status.pod_name.as_deref(), Some("researcher-sandbox"));
    let pod = eventually(REACT, "the adopted pod", || async {
        ns.api::<Pod>()
            .get_opt("researcher-sandbox")
            .await
            .ok()
            .flatten()
    })
    .await;
    let labels = pod.labels();
    assert_eq!(
        labels.get("supervisor.dev/agent").map(String::as_str),
        Some("researcher")
    );
    assert_eq!(
        labels.get("supervisor.dev/attempt").map(String::as_str),
        Some("1")
    );
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Sandbox", "researcher-sandbox")
    );
}
