//! The outage breaker's IO: the facts a policy's outage decision is made from (its agents, their
//! pods and heartbeat Leases, from the caches), and its Events on the RestartPolicy.

use super::slim::CachedPod;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::api::{Agent, AgentStatus, RestartPolicy};
use crate::supervise::conditions::Desired;
use crate::supervise::outage::{AgentOutageView, OutageEvent, OutageInput};

/// The type of the policy condition that says whether an outage is open.
pub const OUTAGE: &str = "Outage";

/// The outage decision's input for `policy`, used by `agents`; `None` when the policy has no
/// outage detection and no open outage (nothing to decide).
pub fn input(
    policy: &RestartPolicy,
    agents: &[&Agent],
    pods: &Store<CachedPod>,
    leases: &Store<Lease>,
    now: jiff::Timestamp,
) -> Option<OutageInput> {
    let outages = policy
        .status
        .as_ref()
        .map(|s| s.outages.clone())
        .unwrap_or_default();
    if policy.spec.outage.is_none() && outages.is_empty() {
        return None;
    }
    let namespace = policy.namespace().unwrap_or_default();
    let unset = AgentStatus::default();
    let views = agents
        .iter()
        .map(|agent| {
            let pod = agent
                .status
                .as_ref()
                .and_then(|s| s.pod_name.as_ref())
                .and_then(|name| pods.get(&ObjectRef::new(name).within(&namespace)))
                .map(|p| {
                    super::facts::pod_facts(&p.to_pod(), agent.spec.agent_container.as_deref())
                });
            let lease = super::manifests::has_lease(agent)
                .then(|| super::manifests::lease_name(agent))
                .and_then(|name| leases.get(&ObjectRef::new(&name).within(&namespace)))
                .map(|l| super::facts::agent_lease_facts(agent, &l, pod.as_ref()));
            let status = agent.status.as_ref().unwrap_or(&unset);
            let traits = super::facts::agent_traits(agent);
            AgentOutageView::of(&traits, status, pod.as_ref(), lease.as_ref())
        })
        .collect();
    Some(OutageInput {
        now,
        config: policy.spec.outage.clone(),
        reset_after: policy.spec.reset_after.as_std(),
        max_hold: policy.spec.circuit_breaker.max_open_duration.as_std(),
        outages,
        agents: views,
    })
}

/// The `Outage` condition for these open outages (`None`: the policy has no outage detection and
/// none is open, so it carries no such condition).
pub fn condition(policy: &RestartPolicy, outages: &[crate::api::Outage]) -> Option<(bool, String)> {
    if outages.is_empty() {
        return policy
            .spec
            .outage
            .as_ref()
            .map(|_| (false, "no open outage".to_string()));
    }
    let listed: Vec<String> = outages
        .iter()
        .take(3)
        .map(|o| {
            let what = match (&o.state, &o.probe_agent) {
                (crate::api::OutageState::Probing, Some(agent)) => format!("agent {agent} probing"),
                _ => match &o.next_probe_at {
                    Some(at) => format!("holding, next probe at {}", at.0),
                    None => "holding".to_string(),
                },
            };
            format!(
                "{} ({}, {} agents, {what})",
                o.fingerprint, o.reason, o.agents
            )
        })
        .collect();
    let more = outages.len().saturating_sub(listed.len());
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    Some((
        true,
        format!(
            "{} open outage(s): {}{tail}",
            outages.len(),
            listed.join("; ")
        ),
    ))
}

/// The desired `Outage` condition from [`condition`]'s result.
pub fn desired(open: bool, message: &str) -> Desired<'_> {
    Desired {
        type_: OUTAGE,
        status: open,
        reason: if open { "OutageOpen" } else { "NoOutage" },
        message,
    }
}

/// Records the decision's Events on the policy, in order, without holding up the reconcile
/// (see `events::Sender`).
pub fn publish(sender: &super::events::Sender, policy: &RestartPolicy, events: &[OutageEvent]) {
    let events = events
        .iter()
        .map(|event| {
            let related = event.agent.as_ref().map(|agent| {
                let api_version = format!("{}/v1alpha1", crate::api::GROUP);
                super::events::related(&api_version, "Agent", agent, policy.namespace())
            });
            let reason = event.reason.as_str();
            super::events::kube_event(reason, event.reason.is_warning(), &event.note, related)
        })
        .collect();
    sender.send_later(policy.object_ref(&()), events);
}
