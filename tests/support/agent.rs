//! The test playing the agent process: what it writes on its heartbeat Lease, and what its pod
//! was given to start with.

use agent_supervisor::api::{CHECKPOINT_ANNOTATION, PROGRESS_ANNOTATION};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::TestNamespace;

impl TestNamespace {
    /// The pod `holder` reports `progress` and `checkpoint` on the Lease `lease` and renews it,
    /// as the agent's own process would.
    pub async fn report_on_lease(
        &self,
        lease: &str,
        holder: &str,
        progress: &str,
        checkpoint: &str,
    ) {
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let patch = json!({
            "metadata": { "annotations": {
                PROGRESS_ANNOTATION: progress,
                CHECKPOINT_ANNOTATION: checkpoint,
            }},
            "spec": { "holderIdentity": holder, "renewTime": now },
        });
        self.api::<Lease>()
            .patch(lease, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the agent writes its Lease");
    }
}

/// The value of the environment variable `name` in the pod's first container (empty if unset).
pub fn env_of(pod: &Pod, name: &str) -> String {
    let container = &pod.spec.as_ref().expect("a spec").containers[0];
    let var = container.env.iter().flatten().find(|v| v.name == name);
    var.and_then(|v| v.value.clone()).unwrap_or_default()
}
