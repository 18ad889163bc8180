//! The objects the operator creates for an Agent: the attempt's pod, the heartbeat Lease and
//! the PersistentVolumeClaims. Pure builders; the reconciler sends them.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    EnvVar, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::api::{
    AGENT_LABEL, AGENT_UID_LABEL, ATTEMPT_LABEL, Agent, HANDLED_RESET_ANNOTATION,
    HANDLED_RESTART_ANNOTATION, TEMPLATE_HASH_ANNOTATION, TRIGGER_ANNOTATION,
};
use crate::supervise::NewPod;

/// The owner reference that makes the Agent the controller of what it owns.
pub fn owner_reference(agent: &Agent) -> OwnerReference {
    agent
        .controller_owner_ref(&())
        .expect("an Agent read from the API server has a name and uid")
}

/// True when `owner_refs` names this agent (by uid) as the controller.
pub fn controlled_by(owner_refs: &[OwnerReference], agent: &Agent) -> bool {
    agent
        .metadata
        .uid
        .as_deref()
        .is_some_and(|uid| controlled_by_uid(owner_refs, uid))
}

/// True when `owner_refs` names the object `uid` as the controller.
pub fn controlled_by_uid(owner_refs: &[OwnerReference], uid: &str) -> bool {
    owner_refs
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// A stable hash of everything that shapes the pod: a different hash means a rollout.
pub fn template_hash(agent: &Agent) -> String {
    let claims: Vec<&str> = agent
        .spec
        .volume_claim_templates
        .iter()
        .map(|c| c.metadata.name.as_str())
        .collect();
    let shape = serde_json::json!({
        "template": agent.spec.template.get(),
        "claims": claims,
        "heartbeat": agent.spec.heartbeat.is_some(),
    });
    let bytes = serde_json::to_vec(&shape).expect("the template serializes");
    format!("{:016x}", crate::supervise::stable_hash(bytes))
}

/// The name of the PVC made from a claim template.
pub fn claim_name(agent: &str, template: &str) -> String {
    format!("{agent}-{template}")
}

/// The pod of one attempt: the template, with `restartPolicy: Never`, the Agent as controller,
/// the agent and attempt labels, the template hash, the `AGENT_*` environment in every
/// container, and the agent's PVCs mounted as volumes named after their templates.
pub fn pod(agent: &Agent, new: &NewPod, template_hash: &str) -> Pod {
    let name = agent.name_any();
    let template = agent.spec.template.get();
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    let (own_labels, own_annotations) = attempt_metadata_with(agent, new, template_hash);
    labels.extend(own_labels);
    for (key, value) in own_annotations {
        match value {
            Some(value) => annotations.insert(key, value),
            None => annotations.remove(&key),
        };
    }

    let mut spec: PodSpec = template.spec.clone().unwrap_or_default();
    spec.restart_policy = Some("Never".to_string());
    let env = agent_env(agent, new);
    for container in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        let vars = container.env.get_or_insert_with(Vec::new);
        vars.retain(|v| !env.iter().any(|e| e.name == v.name));
        vars.extend(env.iter().cloned());
    }
    if !agent.spec.volume_claim_templates.is_empty() {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        for claim in &agent.spec.volume_claim_templates {
            let volume = Volume {
                name: claim.metadata.name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name(&name, &claim.metadata.name),
                    read_only: None,
                }),
                ..Volume::default()
            };
            volumes.retain(|v| v.name != volume.name);
            volumes.push(volume);
        }
    }

    Pod {
        metadata: ObjectMeta {
            name: Some(new.name.clone()),
            namespace: agent.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner_reference(agent)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The labels and annotations that make a pod attempt `new` of `agent` (an annotation `None`:
/// absent): the agent, its uid and the attempt; the template hash and what the pod was created
/// for, from which a lost status write is repaired. On the operator's own pods and on the
/// Sandbox pods it adopts.
pub fn attempt_metadata(
    agent: &Agent,
    new: &NewPod,
) -> (BTreeMap<String, String>, BTreeMap<String, Option<String>>) {
    attempt_metadata_with(agent, new, &template_hash(agent))
}

fn attempt_metadata_with(
    agent: &Agent,
    new: &NewPod,
    template_hash: &str,
) -> (BTreeMap<String, String>, BTreeMap<String, Option<String>>) {
    let mut labels = BTreeMap::new();
    labels.insert(AGENT_LABEL.to_string(), agent.name_any());
    labels.insert(ATTEMPT_LABEL.to_string(), new.attempt.to_string());
    if let Some(uid) = &agent.metadata.uid {
        labels.insert(AGENT_UID_LABEL.to_string(), uid.clone());
    }
    let origin = &new.origin;
    let annotations = [
        (TEMPLATE_HASH_ANNOTATION, Some(template_hash.to_string())),
        (
            TRIGGER_ANNOTATION,
            origin.trigger.map(|t| t.as_str().to_string()),
        ),
        (HANDLED_RESTART_ANNOTATION, origin.handled_restart.clone()),
        (HANDLED_RESET_ANNOTATION, origin.handled_reset.clone()),
        (
            crate::api::HANDLED_GROUP_RESET_ANNOTATION,
            origin.handled_group_reset.clone(),
        ),
        (
            crate::api::RESUMED_FROM_ANNOTATION,
            origin.checkpoint.clone(),
        ),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect();
    (labels, annotations)
}

/// The name of the Agent's Lease: the Agent's own, or for a Sandbox's supervisor the Sandbox's
/// (the name its pods have, which is all a Sandbox's pod knows of itself).
pub fn lease_name(agent: &Agent) -> String {
    match &agent.spec.sandbox_ref {
        Some(sandbox) => sandbox.name.clone(),
        None => agent.name_any(),
    }
}

/// Whether the Agent has a Lease: for its heartbeat, or to hand a Sandbox's pods their
/// `AGENT_*` values.
pub fn has_lease(agent: &Agent) -> bool {
    agent.spec.heartbeat.is_some() || agent.spec.sandbox_ref.is_some()
}

/// The identity a Sandbox's attempt renews its Lease and makes its reports as (`AGENT_HOLDER`):
/// its pods all have the Sandbox's name, so the attempt is part of it.
pub fn sandbox_holder(pod: &str, attempt: u32) -> String {
    format!("{pod}#{attempt}")
}

/// What a Sandbox's attempt `new` gets through its Lease (`AGENT_ENV_ANNOTATION`): the variables
/// an Agent's own pod would have, and `AGENT_HOLDER`.
pub fn sandbox_env(agent: &Agent, new: &NewPod) -> String {
    let mut env: BTreeMap<String, String> = agent_env(agent, new)
        .into_iter()
        .map(|v| (v.name, v.value.unwrap_or_default()))
        .collect();
    env.insert(
        "AGENT_HOLDER".to_string(),
        sandbox_holder(&new.name, new.attempt),
    );
    serde_json::to_string(&env).expect("a map of strings serializes")
}

fn agent_env(agent: &Agent, new: &NewPod) -> Vec<EnvVar> {
    let var = |name: &str, value: String| EnvVar {
        name: name.to_string(),
        value: Some(value),
        value_from: None,
    };
    let mut env = vec![
        var("AGENT_NAME", agent.name_any()),
        var("AGENT_NAMESPACE", agent.namespace().unwrap_or_default()),
        var("AGENT_POD_NAME", new.name.clone()),
        var("AGENT_RESTART_COUNT", new.restart_count.to_string()),
        var(
            "AGENT_LAST_FAILURE_REASON",
            new.last_failure_reason
                .map(|r| r.to_string())
                .unwrap_or_default(),
        ),
        var(
            "AGENT_LAST_FAILURE",
            new.last_failure
                .as_ref()
                .and_then(|f| serde_json::to_string(f).ok())
                .unwrap_or_default(),
        ),
    ];
    if agent.spec.heartbeat.is_some() {
        env.push(var("AGENT_HEARTBEAT_LEASE", lease_name(agent)));
    }
    // Where to resume from: empty for a start from scratch, or before any report.
    env.push(var(
        "AGENT_CHECKPOINT",
        new.origin.checkpoint.clone().unwrap_or_default(),
    ));
    env.push(var(
        "AGENT_PROGRESS",
        new.progress.map(|p| p.to_string()).unwrap_or_default(),
    ));
    env
}

/// The metadata of an object `name` the Agent owns: in its namespace, with its label (what the
/// operator's watches select) and the Agent as controller.
pub fn owned_meta(agent: &Agent, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: agent.namespace(),
        labels: Some(BTreeMap::from([(
            AGENT_LABEL.to_string(),
            agent.name_any(),
        )])),
        owner_references: Some(vec![owner_reference(agent)]),
        ..ObjectMeta::default()
    }
}

/// The Agent's Lease (`lease_name`), empty until the agent renews it.
pub fn lease(agent: &Agent) -> Lease {
    let timeout = agent
        .spec
        .heartbeat
        .as_ref()
        .map(|h| h.timeout.as_std().as_secs().max(1));
    Lease {
        metadata: owned_meta(agent, lease_name(agent)),
        spec: Some(LeaseSpec {
            lease_duration_seconds: timeout.map(|t| i32::try_from(t).unwrap_or(i32::MAX)),
            ..LeaseSpec::default()
        }),
    }
}

/// The PVCs of the Agent's claim templates.
pub fn claims(agent: &Agent) -> Vec<PersistentVolumeClaim> {
    let name = agent.name_any();
    agent
        .spec
        .volume_claim_templates
        .iter()
        .map(|template| {
            let mut labels = template.metadata.labels.clone();
            labels.insert(AGENT_LABEL.to_string(), name.clone());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(&name, &template.metadata.name)),
                    namespace: agent.namespace(),
                    labels: Some(labels),
                    annotations: Some(template.metadata.annotations.clone())
                        .filter(|a| !a.is_empty()),
                    owner_references: Some(vec![owner_reference(agent)]),
                    ..ObjectMeta::default()
                },
                spec: Some(template.spec.clone()),
                status: None,
            }
        })
        .collect()
}
