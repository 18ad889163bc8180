//! Objects into facts: what the pure core decides on, read from Pods, Leases and Agents as the API
//! server has them. The core never sees a Kubernetes object; this is where they stop.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ContainerState, Pod};
use kube::ResourceExt;

use crate::api::{
    ATTEMPT_LABEL, Agent, AgentGroup, AgentGroupStatus, AgentStatus, CHECKPOINT_ANNOTATION,
    EXPECT_SLOW_ANNOTATION, HANDLED_RESET_ANNOTATION, HANDLED_RESTART_ANNOTATION,
    PROGRESS_ANNOTATION, SPEND_ANNOTATION, TEMPLATE_HASH_ANNOTATION, TRIGGER_ANNOTATION, Trigger,
};
use crate::supervise::group::{AgentView, ChildView};
use crate::supervise::input::{
    ContainerFacts, ContainerPhase, LeaseFacts, PodFacts, PodOrigin, PodPhase, Termination,
};
use crate::supervise::outage::AgentTraits;
use crate::supervise::progress::Reported;

/// The facts of a pod whose agent container is `agent_container` (`None`: the first). Missing
/// fields read as "not known yet".
pub fn pod_facts(pod: &Pod, agent_container: Option<&str>) -> PodFacts {
    let meta = &pod.metadata;
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    let status = pod.status.as_ref();
    let condition = |kind: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == kind))
    };
    let phase = match status.and_then(|s| s.phase.as_deref()) {
        Some("Pending") | None => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some(_) => PodPhase::Unknown,
    };
    let statuses = status.and_then(|s| s.container_statuses.as_ref());
    let containers = pod
        .spec
        .iter()
        .flat_map(|spec| &spec.containers)
        .map(|c| {
            let state = statuses
                .and_then(|ss| ss.iter().find(|s| s.name == c.name))
                .and_then(|s| s.state.as_ref());
            ContainerFacts {
                name: c.name.clone(),
                state: container_phase(state),
            }
        })
        .collect();
    PodFacts {
        name: meta.name.clone().unwrap_or_default(),
        attempt: meta
            .labels
            .as_ref()
            .and_then(|l| l.get(ATTEMPT_LABEL))
            .and_then(|a| a.parse().ok())
            .unwrap_or(0),
        template_hash: annotation(TEMPLATE_HASH_ANNOTATION),
        created_at: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or_default(),
        adopted_at: annotation(crate::api::ADOPTED_AT_ANNOTATION).and_then(|t| t.parse().ok()),
        deleting: meta.deletion_timestamp.is_some(),
        phase,
        reason: status.and_then(|s| s.reason.clone()),
        message: status.and_then(|s| s.message.clone()),
        disruption: condition("DisruptionTarget")
            .filter(|c| c.status == "True")
            .and_then(|c| c.reason.clone()),
        unschedulable: condition("PodScheduled")
            .filter(|c| c.status == "False")
            .map(|c| c.reason.clone().unwrap_or_else(|| "Unschedulable".into())),
        scheduled_at: condition("PodScheduled")
            .filter(|c| c.status == "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0),
        ready: condition("Ready").is_some_and(|c| c.status == "True"),
        containers,
        agent_container: agent_container.map(str::to_string),
        origin: PodOrigin {
            trigger: annotation(TRIGGER_ANNOTATION).and_then(|t| Trigger::parse(&t)),
            handled_restart: annotation(HANDLED_RESTART_ANNOTATION),
            handled_reset: annotation(HANDLED_RESET_ANNOTATION),
            handled_group_reset: annotation(crate::api::HANDLED_GROUP_RESET_ANNOTATION),
            checkpoint: annotation(crate::api::RESUMED_FROM_ANNOTATION),
        },
    }
}

fn container_phase(state: Option<&ContainerState>) -> ContainerPhase {
    let Some(state) = state else {
        return ContainerPhase::Waiting {
            reason: None,
            message: None,
        };
    };
    if let Some(t) = &state.terminated {
        return ContainerPhase::Terminated(Termination {
            exit_code: t.exit_code,
            signal: t.signal.filter(|s| *s > 0),
            reason: t.reason.clone(),
            message: t.message.clone(),
            started_at: t.started_at.as_ref().map(|t| t.0),
            finished_at: t.finished_at.as_ref().map(|t| t.0),
        });
    }
    if let Some(r) = &state.running {
        return ContainerPhase::Running {
            started_at: r.started_at.as_ref().map(|t| t.0),
        };
    }
    let waiting = state.waiting.as_ref();
    ContainerPhase::Waiting {
        reason: waiting.and_then(|w| w.reason.clone()),
        message: waiting.and_then(|w| w.message.clone()),
    }
}

/// The facts of a heartbeat Lease.
pub fn lease_facts(lease: &Lease) -> LeaseFacts {
    let spec = lease.spec.as_ref();
    LeaseFacts {
        holder: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        renew_time: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
        reported: Reported {
            progress: lease.annotations().get(PROGRESS_ANNOTATION).cloned(),
            checkpoint: lease.annotations().get(CHECKPOINT_ANNOTATION).cloned(),
            spend: lease.annotations().get(SPEND_ANNOTATION).cloned(),
        },
        // A time that does not parse is no promise: the stall clock runs as if it were absent.
        expect_slow_until: lease
            .annotations()
            .get(EXPECT_SLOW_ANNOTATION)
            .and_then(|t| t.trim().parse::<jiff::Timestamp>().ok()),
    }
}

/// The facts of the Lease of an Agent, as its attempt's pod `pod` (the one the decision judges)
/// would have them. A Sandbox's pods all bear the Sandbox's name, so its agent renews and
/// reports as `manifests::sandbox_holder` (the attempt in it): that identity reads as the pod's
/// name for the attempt it names, and any other (an earlier attempt's, or the bare pod name)
/// as no pod's, so that nothing an earlier attempt left is taken for this one's.
pub fn agent_lease_facts(agent: &Agent, lease: &Lease, pod: Option<&PodFacts>) -> LeaseFacts {
    let mut facts = lease_facts(lease);
    if agent.spec.sandbox_ref.is_none() {
        return facts;
    }
    let Some(pod) = pod else {
        return facts;
    };
    let own = super::manifests::sandbox_holder(&pod.name, pod.attempt);
    let seen_as = |who: &str| {
        if who == own {
            pod.name.clone()
        } else if who == pod.name {
            format!("{who} (no attempt)")
        } else {
            who.to_string()
        }
    };
    facts.holder = facts.holder.as_deref().map(seen_as);
    if let Some(raw) = facts.reported.spend.as_deref()
        && let Ok(serde_json::Value::Object(mut spend)) = serde_json::from_str(raw)
        && let Some(serde_json::Value::String(maker)) = spend.get("pod")
    {
        let maker = seen_as(maker);
        spend.insert("pod".to_string(), maker.into());
        facts.reported.spend = Some(serde_json::Value::Object(spend).to_string());
    }
    facts
}

/// What the outage decision reads of `agent` besides its status.
pub fn agent_traits(agent: &Agent) -> AgentTraits {
    AgentTraits {
        name: agent.metadata.name.clone().unwrap_or_default(),
        suspended: agent.spec.suspend,
        heartbeat: agent.spec.heartbeat.is_some(),
        readiness_probe: has_readiness_probe(agent),
    }
}

/// Whether the agent's own container has a readiness probe.
fn has_readiness_probe(agent: &Agent) -> bool {
    let template = agent.spec.template.get();
    let containers = template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let own = match &agent.spec.agent_container {
        Some(name) => containers.iter().find(|c| &c.name == name),
        None => containers.first(),
    };
    own.is_some_and(|c| c.readiness_probe.is_some())
}

/// What a group reads of a member Agent.
pub fn agent_view(agent: &Agent) -> AgentView {
    let unset = AgentStatus::default();
    AgentView::of(agent.status.as_ref().unwrap_or(&unset), agent.spec.suspend)
}

/// What a parent reads of a child group.
pub fn child_view(group: &AgentGroup) -> ChildView {
    let unset = AgentGroupStatus::default();
    ChildView::of(group.status.as_ref().unwrap_or(&unset))
}
