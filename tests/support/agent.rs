//! The test playing the agent process: what it writes on its heartbeat Lease, and what its pod
//! was given to start with.

use agent_supervisor::api::{CHECKPOINT_ANNOTATION, PROGRESS_ANNOTATION, SPEND_ANNOTATION};
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
        let now = micro_now();
        let patch = json!({
            "metadata": { "annotations": {
                PROGRESS_ANNOTATION: progress,
                CHECKPOINT_ANNOTATION: checkpoint,
            }},
            "spec": { "holderIdentity": holder, "renewTime": now },
        });
        self.write_lease(lease, patch).await;
    }

    /// The pod `holder` renews the Lease `lease` and reports `spend` (JSON) on it.
    pub async fn report_spend(&self, lease: &str, holder: &str, spend: &str) {
        let patch = json!({
            "metadata": { "annotations": { SPEND_ANNOTATION: spend } },
            "spec": { "holderIdentity": holder, "renewTime": micro_now() },
        });
        self.write_lease(lease, patch).await;
    }

    async fn write_lease(&self, lease: &str, patch: serde_json::Value) {
        self.api::<Lease>()
            .patch(lease, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("the agent writes its Lease");
    }

    /// The Agent `looper`, restarted at once after every crash, with no breaker (under the
    /// policy `immediate`); its first pod running.
    pub async fn looper(&self) {
        self.create_immediate_policy().await;
        self.create_agent(
            "looper",
            json!({ "restartPolicyRef": { "name": "immediate" } }),
        )
        .await;
        self.wait_running("looper-1").await;
    }

    /// The RestartPolicy `immediate`: restart at once after every crash, no breaker.
    pub async fn create_immediate_policy(&self) {
        self.create_policy(
            "immediate",
            json!({ "backoff": { "type": "Immediate", "jitter": 0.0 },
                    "circuitBreaker": { "failureThreshold": 0 } }),
        )
        .await;
    }

    /// Crashes `looper`'s attempts `attempts` in turn (exit code and message by attempt), each
    /// once its pod runs.
    pub async fn crash_looper(&self, attempts: std::ops::RangeInclusive<u32>) {
        for n in attempts {
            let pod = format!("looper-{n}");
            self.wait_running(&pod).await;
            self.terminate(&pod, n as i32, "Error", &format!("failure {n}"))
                .await;
        }
    }
}

/// Now, as a Lease's `renewTime` takes it.
fn micro_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// The value of the environment variable `name` in the pod's first container (empty if unset).
pub fn env_of(pod: &Pod, name: &str) -> String {
    let container = &pod.spec.as_ref().expect("a spec").containers[0];
    let var = container.env.iter().flatten().find(|v| v.name == name);
    var.and_then(|v| v.value.clone()).unwrap_or_default()
}
