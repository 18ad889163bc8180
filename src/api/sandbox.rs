//! agent-sandbox's `Sandbox` (`agents.x-k8s.io/v1beta1`, kubernetes-sigs/agent-sandbox), as far
//! as the operator reads it: not the operator's own API, so only what it needs is typed, every
//! field optional (anything else a Sandbox says is ignored).

use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The annotation the operator puts on a Sandbox it suspended (`spec.operatingMode: Suspended`):
/// it resumes only what it suspended.
pub const SUSPENDED_BY_OPERATOR_ANNOTATION: &str = "supervisor.dev/suspended-by-operator";

/// The annotation that asks for an Agent to be made for a Sandbox (named after it, owned by
/// it), with the RestartPolicy it names; empty: the namespace's default policy.
pub const RESTART_POLICY_ANNOTATION: &str = "supervisor.dev/restart-policy";

/// The annotation on a Sandbox-supervising Agent's Lease (named after the Sandbox, as its pod
/// is) with what an Agent's own pod gets as `AGENT_*` variables, for the attempt about to start:
/// a JSON object of names to values. The operator does not edit a Sandbox's template; the SDK
/// reads this when the variables are absent.
pub const AGENT_ENV_ANNOTATION: &str = "supervisor.dev/agent-env";

/// The operating mode in which the Sandbox's controller keeps its pod.
pub const RUNNING: &str = "Running";
/// The operating mode in which the Sandbox's controller deletes its pod and makes none.
pub const SUSPENDED: &str = "Suspended";

/// What the operator reads of a Sandbox's spec.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agents.x-k8s.io",
    version = "v1beta1",
    kind = "Sandbox",
    plural = "sandboxes",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<SandboxPodTemplate>,
    /// When the Sandbox expires: its controller deletes the pod then, and makes none after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// `Running` (the default) or `Suspended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_mode: Option<String>,
}

/// The Sandbox's pod template, as far as it is read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxPodTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SandboxPodSpec>,
}

/// The pod spec of a Sandbox's template, as far as it is read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

impl Sandbox {
    /// The pod template's `restartPolicy`; `Always` when it says none, as for any pod.
    pub fn restart_policy(&self) -> &str {
        self.spec
            .pod_template
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("Always")
    }

    /// The ServiceAccount its pods run as: the template's, else the namespace's `default`.
    pub fn service_account(&self) -> &str {
        self.spec
            .pod_template
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.service_account_name.as_deref())
            .filter(|name| !name.is_empty())
            .unwrap_or("default")
    }

    /// Whether it is suspended (`spec.operatingMode: Suspended`).
    pub fn suspended(&self) -> bool {
        self.spec.operating_mode.as_deref() == Some(SUSPENDED)
    }

    /// Whether it has expired at `now`: its `shutdownTime` reached, as its controller judges it.
    pub fn expired(&self, now: jiff::Timestamp) -> bool {
        self.spec.shutdown_time.as_ref().is_some_and(|t| t.0 <= now)
    }

    /// Whether the operator suspended it (and so may resume it).
    pub fn suspended_by_operator(&self) -> bool {
        self.metadata.annotations.as_ref().is_some_and(|a| {
            a.get(SUSPENDED_BY_OPERATOR_ANNOTATION).map(String::as_str) == Some("true")
        })
    }
}
