//! `Agent`: a long-running program, run as one pod at a time and kept alive by the operator.

use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::duration::Duration;
use super::{AgentStatus, PodTemplate};

/// A long-running agent: the operator runs it as a pod, restarts it when it crashes, and leaves
/// it alone when it shuts down for economic or voluntary reasons.
// kube's `printcolumn(...)` repeats the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "supervisor.dev",
    version = "v1alpha1",
    kind = "Agent",
    plural = "agents",
    shortname = "ag",
    category = "supervisor",
    namespaced,
    status = "AgentStatus",
    doc = "A long-running agent, run as a pod and restarted when it crashes, within its RestartPolicy.",
    // The name becomes a label value on every pod (`supervisor.dev/agent`): at most 63 characters.
    validation = Rule::new("self.metadata.name.size() <= 63").message(
        "an Agent's name must be at most 63 characters: it is the value of the supervisor.dev/agent label on its pods"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Restarts",
        type_ = "integer",
        json_path = ".status.restartCount"
    ),
    printcolumn(
        name = "Circuit",
        type_ = "string",
        json_path = ".status.circuitBreaker.state"
    ),
    printcolumn(
        name = "Last Failure",
        type_ = "string",
        json_path = ".status.lastFailure.reason"
    ),
    printcolumn(
        name = "Progress",
        type_ = "integer",
        json_path = ".status.progress.value"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = agent_spec_rules)]
pub struct AgentSpec {
    /// The agent's pod. The operator creates one pod from it per attempt, with
    /// `restartPolicy: Never`: the operator, not the kubelet, decides about restarts. Exactly
    /// one of `template` and `sandboxRef`.
    #[serde(default, skip_serializing_if = "PodTemplate::is_unset")]
    pub template: PodTemplate,

    /// An agent-sandbox `Sandbox` in this namespace to supervise in place of a template: its
    /// pods are the Sandbox's (its template must say `restartPolicy: Never`), each end is
    /// recorded, and a restart deletes the ended pod when due so that the Sandbox's controller
    /// makes the next; stopping sets its `operatingMode` to `Suspended`. Its pods get their
    /// `AGENT_*` values on the Agent's Lease, named after the Sandbox. Cannot be changed, nor
    /// combined with `volumeClaimTemplates` (the Sandbox's own claims keep its volumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_ref: Option<SandboxReference>,

    /// The RestartPolicy in this namespace that governs restarts. When omitted: the namespace's
    /// RestartPolicy named `default` if there is one, else the built-in defaults. When named but
    /// missing, no pod is created until it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy_ref: Option<PolicyReference>,

    /// True: stop the current pod gracefully, start none, phase `Suspended`. False again: resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,

    /// The name of the agent's own container in the template; default: the first container. An
    /// attempt ends when this container terminates, even if sidecar containers still run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub agent_container: Option<String>,

    /// Liveness by heartbeat: the agent renews a Lease named after the Agent (after the Sandbox,
    /// with `sandboxRef`), and is restarted with reason `HeartbeatLost` when it stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<Heartbeat>,

    /// PersistentVolumeClaims created once per Agent (named `<agent>-<name>`) and mounted into
    /// every attempt's pod as the volume `<name>`: the agent's memory survives its restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub volume_claim_templates: Vec<VolumeClaimTemplate>,
}

fn agent_spec_rules(schema: &mut schemars::Schema) {
    let rules = [
        serde_json::json!({
            "rule": "!has(self.agentContainer) || !has(self.template) || self.template.spec.containers.exists(c, c.name == self.agentContainer)",
            "message": "agentContainer must name one of the template's containers",
            "fieldPath": ".agentContainer",
        }),
        serde_json::json!({
            "rule": "has(self.template) != has(self.sandboxRef)",
            "message": "give exactly one of template (a pod the operator makes) and sandboxRef (a Sandbox it supervises)",
            "reason": "FieldValueInvalid",
        }),
        serde_json::json!({
            "rule": "!has(self.sandboxRef) || !has(self.volumeClaimTemplates)",
            "message": "volumeClaimTemplates cannot be used with sandboxRef: the Sandbox's own volumeClaimTemplates keep its volumes",
            "fieldPath": ".volumeClaimTemplates",
            "reason": "FieldValueForbidden",
        }),
        serde_json::json!({
            "rule": "has(self.sandboxRef) == has(oldSelf.sandboxRef) && (!has(self.sandboxRef) || self.sandboxRef.name == oldSelf.sandboxRef.name)",
            "message": "sandboxRef cannot be added, removed or changed: make a new Agent",
            "fieldPath": ".sandboxRef",
            "reason": "FieldValueForbidden",
        }),
    ];
    for rule in rules {
        super::duration::add_rule(schema, rule);
    }
}

/// Names an agent-sandbox `Sandbox` (`agents.x-k8s.io`) in the Agent's own namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxReference {
    /// The Sandbox's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Names a RestartPolicy in the Agent's own namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyReference {
    /// The RestartPolicy's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// How the agent proves it is alive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = heartbeat_rules)]
pub struct Heartbeat {
    /// The agent is hung when its Lease's `renewTime` is older than this, or the Lease is held
    /// by another pod. Must be longer than 0s.
    pub timeout: Duration,

    /// How long after the pod starts running before heartbeats are required. Default: the
    /// timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<Duration>,
}

fn heartbeat_rules(schema: &mut schemars::Schema) {
    super::duration::positive_when(
        schema,
        "timeout",
        "true",
        "heartbeat timeout must be longer than 0s",
    );
}

impl Heartbeat {
    pub fn grace(&self) -> Duration {
        self.grace_period.unwrap_or(self.timeout)
    }
}

/// A PersistentVolumeClaim made once for the Agent and kept across its restarts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VolumeClaimTemplate {
    /// The claim's name within the Agent: the PVC is `<agent>-<name>`, and the pod volume
    /// that mounts it is `<name>`.
    pub metadata: ClaimMetadata,
    /// The claim's spec, as in a PersistentVolumeClaim.
    pub spec: PersistentVolumeClaimSpec,
}

/// The name, labels and annotations of a claim template.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimMetadata {
    /// A DNS label: lowercase letters, digits and '-'.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    /// Labels of the PersistentVolumeClaim.
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    /// Annotations of the PersistentVolumeClaim.
    pub annotations: BTreeMap<String, String>,
}
