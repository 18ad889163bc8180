//! Agents that supervise an agent-sandbox `Sandbox` (`spec.sandboxRef`): the Sandbox's own
//! controller makes its pod, named after it; the operator adopts each such pod as an attempt
//! (its labels and annotations, as on a pod of its own), records its end, and restarts by
//! deleting the ended pod when the restart is due, so that the Sandbox's controller makes the
//! next. Whatever stops the agent sets the Sandbox's `operatingMode: Suspended` (the pod is
//! deleted and none made); starting it sets `Running` again, if the operator suspended it.

mod adopt;
mod lease;
pub(super) mod made;

use std::time::Duration;

use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Patch;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::error::{ActError, Error, GatherError, is_not_found};
use super::gather::{Source, read};
use super::slim::CachedPod;
use super::watch::{Change, Watches};
use super::{AgentObject, Context, manifests};
use crate::api::sandbox::{RUNNING, SUSPENDED, SUSPENDED_BY_OPERATOR_ANNOTATION, Sandbox};
use crate::api::{AGENT_UID_LABEL, Agent, Phase};
use crate::supervise::{Blocked, EventReason, NewPod};

/// How long a start waits for the Sandbox's controller to make the next pod after the ended one
/// was deleted (it takes well under a second): past it, the start fails and is tried again.
const NEXT_POD_WAIT: Duration = Duration::from_secs(10);
/// How often a start looks for that pod meanwhile.
const NEXT_POD_POLL: Duration = Duration::from_millis(100);

/// Whether agent-sandbox's Sandboxes are served (its CRDs are installed).
pub async fn served(client: &Client) -> bool {
    match client
        .list_api_group_resources("agents.x-k8s.io/v1beta1")
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == "sandboxes"),
        Err(_) => false,
    }
}

/// The Sandbox `agent` supervises, and the pod of its attempt (as `gather` returns an Agent's
/// own): the Sandbox's pod when the operator adopted it for this Agent, else the last state of
/// the attempt's pod if it was deleted; and why no attempt can be started, if none can.
pub async fn gather(
    agent: &Agent,
    sandbox: &str,
    ctx: &Context,
    attempt: u32,
    source: Source,
) -> Result<(Option<Pod>, Option<Blocked>), GatherError> {
    let namespace = agent.namespace().unwrap_or_default();
    let Some(sandboxes) = &ctx.sandboxes else {
        let message = "Sandboxes are not watched: agent-sandbox's CRDs are not installed, or the operator runs with --sandboxes=false (the chart's sandboxes.enabled)";
        return Ok((
            None,
            Some(blocked(EventReason::SandboxesUnavailable, message)),
        ));
    };
    let found = match source {
        Source::Cache => sandboxes
            .get(&ObjectRef::new(sandbox).within(&namespace))
            .map(|s| (*s).clone()),
        Source::Server => {
            read(
                &Api::<Sandbox>::namespaced(ctx.client.clone(), &namespace),
                sandbox,
            )
            .await?
        }
    };
    let Some(found) = found else {
        let message = format!(
            "Sandbox {sandbox} does not exist in this namespace; nothing is supervised until it does"
        );
        return Ok((None, Some(blocked(EventReason::SandboxNotFound, &message))));
    };
    let policy = found.restart_policy();
    if policy != "Never" {
        let message = format!(
            "Sandbox {sandbox}'s pod template has restartPolicy {policy}: the kubelet would restart its containers in place, unseen; set spec.podTemplate.spec.restartPolicy: Never"
        );
        return Ok((
            None,
            Some(blocked(EventReason::SandboxRestartPolicy, &message)),
        ));
    }
    let blocked = if found.expired(jiff::Timestamp::now()) {
        let at = found.spec.shutdown_time.as_ref().map(|t| t.0.to_string());
        let message = format!(
            "Sandbox {sandbox} expired at its shutdownTime {} (its controller deletes the pod then); nothing is restarted unless that time moves later",
            at.unwrap_or_default()
        );
        Some(blocked(EventReason::SandboxExpired, &message))
    } else if found.suspended() && !found.suspended_by_operator() {
        let message = format!(
            "Sandbox {sandbox} was suspended by someone else (spec.operatingMode: Suspended); it is left alone until it runs again"
        );
        Some(blocked(EventReason::SandboxSuspended, &message))
    } else {
        None
    };
    let pod = attempt_pod(agent, &found, ctx, attempt, source).await?;
    Ok((pod, blocked))
}

fn blocked(reason: EventReason, message: &str) -> Blocked {
    Blocked {
        reason,
        message: message.to_string(),
    }
}

/// The Sandbox's pod if it is one of this Agent's attempts; else the attempt's pod as its
/// deletion left it (marked deleted), so that its end is still judged.
async fn attempt_pod(
    agent: &Agent,
    sandbox: &Sandbox,
    ctx: &Context,
    attempt: u32,
    source: Source,
) -> Result<Option<Pod>, GatherError> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = sandbox.name_any();
    let adopted = |pod: &Pod| ours(agent, sandbox, pod);
    let cached = ctx
        .pods
        .get(&ObjectRef::new(&name).within(&namespace))
        .map(|p| p.to_pod())
        .filter(adopted);
    let current = match (source, cached) {
        (Source::Cache, Some(pod)) => Some(pod),
        // Adopted a moment ago and not in the cache yet, or read anew.
        _ => read(
            &Api::<Pod>::namespaced(ctx.client.clone(), &namespace),
            &name,
        )
        .await?
        .filter(adopted),
    };
    if current.is_some() || attempt == 0 {
        return Ok(current);
    }
    let gone = ctx
        .gone
        .get(&name, &namespace)
        .map(|p| p.to_pod())
        .filter(adopted)
        .filter(|p| attempt_of(p) == Some(attempt));
    Ok(gone.map(|mut pod| {
        pod.metadata.deletion_timestamp.get_or_insert_with(|| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now())
        });
        pod
    }))
}

/// Whether `pod` is the Sandbox's own (its controller owner).
fn of_sandbox(sandbox: &Sandbox, pod: &Pod) -> bool {
    sandbox
        .metadata
        .uid
        .as_deref()
        .is_some_and(|uid| manifests::controlled_by_uid(pod.owner_references(), uid))
}

/// Whether `pod` is the Sandbox's, adopted by this Agent.
fn ours(agent: &Agent, sandbox: &Sandbox, pod: &Pod) -> bool {
    of_sandbox(sandbox, pod) && pod.labels().get(AGENT_UID_LABEL) == agent.metadata.uid.as_ref()
}

fn attempt_of(pod: &Pod) -> Option<u32> {
    pod.labels()
        .get(crate::api::ATTEMPT_LABEL)
        .and_then(|a| a.parse().ok())
}

/// Starts attempt `new` in the Sandbox `agent` supervises: hands it its `AGENT_*` values on the
/// Lease, resumes the Sandbox if the operator suspended it, deletes the ended attempt's pod, and
/// adopts the next pod its controller makes.
/// Adopting the attempt's own pod again is a no-op: a start tried again never adopts twice.
pub async fn start(agent: &Agent, sandbox: &str, new: &NewPod, ctx: &Context) -> Result<(), Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let sandboxes: Api<Sandbox> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let found = sandboxes
        .get(sandbox)
        .await
        .map_err(|source| ActError::Read {
            what: format!("Sandbox {sandbox}"),
            source,
        })?;
    // What the attempt's pod reads at its start is there before it can start.
    lease::hand_over(agent, new, ctx).await?;
    if found.suspended() && found.suspended_by_operator() {
        set_mode(&sandboxes, sandbox, RUNNING).await?;
    }
    let deadline = tokio::time::Instant::now() + NEXT_POD_WAIT;
    loop {
        let pod = pods
            .get_opt(sandbox)
            .await
            .map_err(|source| ActError::Read {
                what: format!("pod {sandbox}"),
                source,
            })?;
        match pod.as_ref().filter(|p| of_sandbox(&found, p)) {
            Some(pod) if ours(agent, &found, pod) && attempt_of(pod) == Some(new.attempt) => {
                return Ok(());
            }
            // An earlier attempt's, ended (a restart is made only of an ended or killed pod):
            // deleted, and the Sandbox's controller makes the next.
            Some(pod) if ours(agent, &found, pod) && pod.metadata.deletion_timestamp.is_none() => {
                super::act::delete_pod(&pods, sandbox, ctx).await?;
            }
            Some(pod) if ours(agent, &found, pod) => {}
            // Another Agent's: never taken from it.
            Some(pod) if pod.labels().contains_key(AGENT_UID_LABEL) => {
                let other = pod
                    .labels()
                    .get(crate::api::AGENT_LABEL)
                    .cloned()
                    .unwrap_or_default();
                return Err(ActError::NameTaken(format!(
                    "Sandbox {sandbox}'s pod (supervised by Agent {other})"
                ))
                .into());
            }
            Some(pod) if pod.metadata.deletion_timestamp.is_none() => {
                return adopt::adopt(agent, &pods, pod, new).await;
            }
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ActError::Create {
                what: format!("pod {sandbox}"),
                source: kube::Error::Service(
                    format!(
                        "Sandbox {sandbox}'s controller made no pod within {}s",
                        NEXT_POD_WAIT.as_secs()
                    )
                    .into(),
                ),
            }
            .into());
        }
        tokio::time::sleep(NEXT_POD_POLL).await;
    }
}

/// Sets the Sandbox's `operatingMode`, marking it as the operator's doing when it suspends.
async fn set_mode(sandboxes: &Api<Sandbox>, name: &str, mode: &str) -> Result<(), Error> {
    let mark = (mode == SUSPENDED).then_some("true");
    let patch = json!({
        "metadata": { "annotations": { SUSPENDED_BY_OPERATOR_ANNOTATION: mark } },
        "spec": { "operatingMode": mode },
    });
    let params = super::patch_params();
    match sandboxes.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(ActError::Create {
            what: format!("Sandbox {name} operatingMode {mode}"),
            source,
        }
        .into()),
    }
}

/// Stops the Sandbox's pod and keeps it from making another: `operatingMode: Suspended`. A
/// Sandbox suspended already (by anyone) is left as it is.
pub async fn suspend(agent: &Agent, sandbox: &str, ctx: &Context) -> Result<(), Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let sandboxes: Api<Sandbox> = Api::namespaced(ctx.client.clone(), &namespace);
    let cached = ctx
        .sandboxes
        .as_ref()
        .and_then(|s| s.get(&ObjectRef::new(sandbox).within(&namespace)));
    if cached.is_some_and(|s| s.suspended()) {
        return Ok(());
    }
    set_mode(&sandboxes, sandbox, SUSPENDED).await
}

/// After a decision is recorded: an agent that will not run again by itself (stopped, shut
/// down, suspended) has its Sandbox suspended too, so that nothing it leaves looks running.
pub async fn settle(agent: &Agent, sandbox: &str, phase: Option<Phase>, ctx: &Context) {
    let stopped = matches!(
        phase,
        Some(Phase::Stopped | Phase::Shutdown | Phase::Suspended)
    );
    if stopped && let Err(e) = suspend(agent, sandbox, ctx).await {
        tracing::warn!(sandbox, error = %e, "could not suspend the Sandbox");
    }
}

/// Watches the scope's Sandboxes, when they are to be supervised and are served: each change
/// reconciles the Agents that supervise it, and is looked at for an Agent to make (`made`).
/// `None` otherwise (said once).
pub(super) async fn watch(
    watches: &mut Watches,
    client: &Client,
    scope: &Option<String>,
    enabled: bool,
    agents: Store<AgentObject>,
    triggers: mpsc::UnboundedSender<ObjectRef<AgentObject>>,
    looks: mpsc::UnboundedSender<ObjectRef<Sandbox>>,
) -> Option<Store<Sandbox>> {
    static SAID: std::sync::Once = std::sync::Once::new();
    if !enabled {
        return None;
    }
    if !served(client).await {
        SAID.call_once(|| {
            tracing::info!(
                "agent-sandbox is not installed (no agents.x-k8s.io/v1beta1 Sandboxes): Agents with spec.sandboxRef wait, and are supervised once the operator restarts with it installed"
            )
        });
        return None;
    }
    let within = scope.as_deref().unwrap_or("all namespaces");
    Some(watches.spawn(
        format!("Sandboxes in {within}"),
        super::scope::api::<Sandbox>(client, scope),
        watcher::Config::default(),
        |_| (),
        move |change| {
            let (Change::Applied(sandbox) | Change::Deleted(sandbox)) = change;
            let _ = looks.unbounded_send(ObjectRef::from(&sandbox));
            for agent in supervising(&agents, &sandbox) {
                let _ = triggers.unbounded_send(agent);
            }
        },
    ))
}

/// The Agents that supervise `sandbox`.
fn supervising(agents: &Store<AgentObject>, sandbox: &Sandbox) -> Vec<ObjectRef<AgentObject>> {
    let (namespace, name) = (sandbox.namespace(), sandbox.name_any());
    agents
        .state()
        .iter()
        .filter(|a| a.namespace() == namespace)
        .filter(|a| {
            a.0.as_ref().is_ok_and(|a| {
                a.spec.sandbox_ref.as_ref().map(|r| r.name.as_str()) == Some(name.as_str())
            })
        })
        .map(|a| ObjectRef::from(a.as_ref()))
        .collect()
}

/// The Agent a change of an adopted Sandbox pod concerns (its owner is the Sandbox, not the
/// Agent): named by the pod's agent label.
pub(super) fn agent_of(pod: &CachedPod) -> Option<ObjectRef<AgentObject>> {
    let of_sandbox = pod
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.kind == "Sandbox");
    let agent = pod.labels().get(crate::api::AGENT_LABEL)?;
    of_sandbox.then(|| ObjectRef::new(agent).within(&pod.namespace().unwrap_or_default()))
}
