//! The `supervisor.dev/v1alpha1` API: the `Agent`, `RestartPolicy` and `AgentGroup` custom resources, as
//! SPEC.md defines them. Field names here are the API.

mod agent;
mod agent_status;
pub mod duration;
mod group;
mod group_status;
pub mod outage;
mod policy;
mod reference;
mod resume;
pub mod sandbox;
mod spend;
mod template;
pub mod wire;

pub use agent::*;
pub use agent_status::*;
pub use duration::Duration;
pub use group::*;
pub use group_status::*;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
pub use outage::{Outage, OutagePolicy, OutageState};
pub use policy::*;
pub use reference::{field_paths, field_reference};
pub use resume::{CheckpointPolicy, ProgressPolicy};
pub use spend::{
    AttemptSpend, Budget, GroupSpend, MemberSpend, SPEND_ANNOTATION, Spend, SpendStatus,
};
pub use template::PodTemplate;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of both kinds.
pub const GROUP: &str = "supervisor.dev";
/// The label on every pod the operator creates, naming its Agent.
pub const AGENT_LABEL: &str = "supervisor.dev/agent";
/// The label on every pod with its Agent's uid: what old pods are removed by, so a pod that only
/// copies the agent's labels is never among them.
pub const AGENT_UID_LABEL: &str = "supervisor.dev/agent-uid";
/// The label on every pod naming its attempt number.
pub const ATTEMPT_LABEL: &str = "supervisor.dev/attempt";
/// The annotation on every pod with a hash of the template it was made from.
pub const TEMPLATE_HASH_ANNOTATION: &str = "supervisor.dev/template-hash";
/// The annotation on every pod naming what its attempt was started for (a restart trigger, such as
/// `Manual` or `Rollout`); absent on a first start or a resume. A pod whose status write was lost
/// tells the next decision what it was made for.
pub const TRIGGER_ANNOTATION: &str = "supervisor.dev/trigger";
/// The annotation on every pod with the `restart-requested-at` value handled when it was created,
/// so a restart request is never acted on twice, even if the status write that remembers it is lost.
pub const HANDLED_RESTART_ANNOTATION: &str = "supervisor.dev/handled-restart-request";
/// Likewise for `reset-requested-at`.
pub const HANDLED_RESET_ANNOTATION: &str = "supervisor.dev/handled-reset-request";
/// Likewise for a reset ordered by the agent's group (its key).
pub const HANDLED_GROUP_RESET_ANNOTATION: &str = "supervisor.dev/handled-group-reset";
/// The annotation on a pod with the checkpoint its attempt resumes from (its `AGENT_CHECKPOINT`),
/// so a failed resume is told even if the status write of its start was lost.
pub const RESUMED_FROM_ANNOTATION: &str = "supervisor.dev/resumed-from";
/// The annotation on a Sandbox's pod with the time the operator took it as an attempt (RFC 3339):
/// a pod adopted while it runs gets its heartbeat grace from then.
pub const ADOPTED_AT_ANNOTATION: &str = "supervisor.dev/adopted-at";
/// On the heartbeat Lease, written by the agent: how far it has got (a whole number that only
/// grows).
pub const PROGRESS_ANNOTATION: &str = "supervisor.dev/progress";
/// On the heartbeat Lease, written by the agent: a reference to state it can resume from (at
/// most 1 KiB).
pub const CHECKPOINT_ANNOTATION: &str = "supervisor.dev/checkpoint";
/// On the heartbeat Lease, written by the agent: an RFC 3339 time it says a step will be slow
/// until (no progress expected before then; at most the policy's `progress.maxExtension`).
pub const EXPECT_SLOW_ANNOTATION: &str = "supervisor.dev/expect-slow-until";
/// `kubectl annotate agent X supervisor.dev/restart-requested-at=<new value>`: restart once now.
pub const RESTART_REQUESTED_ANNOTATION: &str = "supervisor.dev/restart-requested-at";
/// `kubectl annotate agent X supervisor.dev/reset-requested-at=<new value>`: close the breaker,
/// zero the failure count, clear a give-up, and resume.
pub const RESET_REQUESTED_ANNOTATION: &str = "supervisor.dev/reset-requested-at";

/// Why an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FailureReason {
    /// The container exited with a non-zero code, and there is no better reason.
    Error,
    /// The container was killed for using too much memory.
    #[serde(rename = "OOMKilled")]
    OomKilled,
    /// The container was killed by a signal (exit code above 128).
    Signal,
    /// The agent stopped renewing its heartbeat Lease.
    HeartbeatLost,
    /// The pod was not Running within the policy's startupTimeout.
    StartupTimeout,
    /// The agent ran, but its reported progress did not grow within the policy's
    /// `progress.stallTimeout`: its pod was stopped.
    NoProgress,
    /// The pod was evicted from its node.
    Evicted,
    /// The pod was preempted by a higher-priority pod.
    Preempted,
    /// The pod's node went away, or the pod vanished or was deleted by someone else.
    NodeLost,
    /// The container exited with code 0.
    Completed,
    /// Anything else.
    Unknown,
}

impl FailureReason {
    /// Every value, in declaration order.
    pub const ALL: [FailureReason; 11] = [
        FailureReason::Error,
        FailureReason::OomKilled,
        FailureReason::Signal,
        FailureReason::HeartbeatLost,
        FailureReason::StartupTimeout,
        FailureReason::NoProgress,
        FailureReason::Evicted,
        FailureReason::Preempted,
        FailureReason::NodeLost,
        FailureReason::Completed,
        FailureReason::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Error => "Error",
            FailureReason::OomKilled => "OOMKilled",
            FailureReason::Signal => "Signal",
            FailureReason::HeartbeatLost => "HeartbeatLost",
            FailureReason::StartupTimeout => "StartupTimeout",
            FailureReason::NoProgress => "NoProgress",
            FailureReason::Evicted => "Evicted",
            FailureReason::Preempted => "Preempted",
            FailureReason::NodeLost => "NodeLost",
            FailureReason::Completed => "Completed",
            FailureReason::Unknown => "Unknown",
        }
    }

    /// Evictions, preemptions and lost nodes happen to an agent, not because of it.
    pub fn is_disruption(self) -> bool {
        matches!(
            self,
            FailureReason::Evicted | FailureReason::Preempted | FailureReason::NodeLost
        )
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a failure means for supervision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FailureClass {
    /// Restart with backoff; counts toward the limits and the breaker.
    Transient,
    /// Restart at once; counts toward nothing.
    Disruption,
    /// An economic or voluntary shutdown: never restart.
    Shutdown,
    /// Do not restart.
    Permanent,
}

impl FailureClass {
    /// Every value, in declaration order.
    pub const ALL: [FailureClass; 4] = [
        FailureClass::Transient,
        FailureClass::Disruption,
        FailureClass::Shutdown,
        FailureClass::Permanent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Transient => "Transient",
            FailureClass::Disruption => "Disruption",
            FailureClass::Shutdown => "Shutdown",
            FailureClass::Permanent => "Permanent",
        }
    }
}

/// The schema of a `metav1.Condition` list: a map keyed by `type`, so server-side apply merges
/// conditions one by one.
pub(crate) fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = generator.subschema_for::<Vec<Condition>>();
    schema.insert("x-kubernetes-list-type".into(), "map".into());
    schema.insert(
        "x-kubernetes-list-map-keys".into(),
        serde_json::json!(["type"]),
    );
    schema
}

/// The CRDs of this API as `(file name, YAML)`, in the form `make crds` writes them.
///
/// The Agent's embedded Kubernetes types (the pod template, the claim spec) keep their schema but
/// lose their upstream descriptions — `kubectl explain pod.spec` has those — so the CRD stays
/// small enough for a client-side `kubectl apply`.
pub fn crd_files() -> Vec<(String, String)> {
    use kube::CustomResourceExt;
    let mut agent = serde_json::to_value(Agent::crd()).expect("a CRD serializes");
    for version in agent["spec"]["versions"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let spec = &mut version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        strip_descriptions(&mut spec["template"]["properties"]);
        strip_descriptions(
            &mut spec["volumeClaimTemplates"]["items"]["properties"]["spec"]["properties"],
        );
    }
    let policy = serde_json::to_value(RestartPolicy::crd()).expect("a CRD serializes");
    let group = serde_json::to_value(AgentGroup::crd()).expect("a CRD serializes");
    [agent, policy, group]
        .into_iter()
        .map(|mut crd| {
            reflow_descriptions(&mut crd);
            let name = format!(
                "{}.yaml",
                crd["metadata"]["name"].as_str().unwrap_or_default()
            );
            let yaml = serde_yaml::to_string(&crd).expect("a CRD serializes to YAML");
            (
                name,
                format!("# Generated from the Rust types by `make crds`; do not edit.\n{yaml}"),
            )
        })
        .collect()
}

/// Doc comments wrap at 100 columns; `kubectl explain` wraps by itself. Join wrapped lines, and
/// keep paragraph breaks. Also drops formats the API server does not know.
fn reflow_descriptions(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            // schemars says `uint32` for unsigned fields (their `minimum: 0` already says it);
            // the API server knows no such format and warns on every apply.
            if map
                .get("format")
                .and_then(|f| f.as_str())
                .is_some_and(|f| f.starts_with("uint"))
            {
                map.remove("format");
            }
            if let Some(serde_json::Value::String(text)) = map.get_mut("description") {
                *text = text
                    .split("\n\n")
                    .map(|paragraph| {
                        paragraph
                            .split('\n')
                            .map(str::trim)
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
                    .join("\n\n");
            }
            map.values_mut().for_each(reflow_descriptions);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(reflow_descriptions),
        _ => {}
    }
}

fn strip_descriptions(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            // Only the text: a property that happens to be named "description" is a schema.
            if map.get("description").is_some_and(|d| d.is_string()) {
                map.remove("description");
            }
            map.values_mut().for_each(strip_descriptions);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}
