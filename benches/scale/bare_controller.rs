//! The baseline of `make bench-scale`: the least a controller can do for Agents. It watches
//! Agents and their pods and, when an Agent has no pod or its latest pod failed, creates the
//! next attempt's pod (`<agent>-<attempt>`, as the operator names them). Nothing else: no
//! status, no Events, no policy, no backoff.
//!
//!     bare-controller --namespaces a,b
//!
//! With `--pods operator` it makes, instead of the least pod, the pod the operator would make
//! for the same attempt (`manifests::pod`: its labels, annotations and `AGENT_*` environment),
//! and nothing else more: what those pods alone cost the API server shows apart from what the
//! operator does (`BARE_PODS=operator make bench-scale`, a diagnosis, not the baseline).
//!
//! With `--records` it also writes each Agent's status as the operator once did in a crash
//! storm, where a record waited for ten failures (`HELD`): after every tenth restart, one
//! status write (server-side apply, as the operator's) with those ten restarts in its history,
//! the last failure and the three conditions. What the record the contract asks for costs the
//! control plane, measured on the least controller (`BARE_RECORDS=1 make bench-scale`, a
//! diagnosis, not the baseline).
//!
//! It sends the user agent `bare-controller/<version>`, so the API server's audit log tells its
//! requests apart, and prints `ready` once its caches have listed everything.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_supervisor::api::{
    AGENT_LABEL, ATTEMPT_LABEL, Agent, FailureClass, FailureReason, Trigger,
};
use agent_supervisor::controller::manifests;
use agent_supervisor::supervise::{LastFailure, NewPod, PodOrigin};
use anyhow::Context as _;
use clap::Parser;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// The namespaces to watch, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    namespaces: Vec<String>,
    /// Which pods it makes: `least` (the template, the agent and attempt labels, the owner) or
    /// `operator` (the operator's pod for the same attempt).
    #[arg(long, value_enum, default_value_t = Pods::Least)]
    pods: Pods,
    /// Also write each Agent's status after every tenth restart, as the operator once did in a
    /// storm.
    #[arg(long)]
    records: bool,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Pods {
    Least,
    Operator,
}

struct Context {
    client: Client,
    pods: Store<Pod>,
    shape: Pods,
    records: bool,
    /// The highest attempt created or seen per Agent: where the walk over its pods starts.
    latest: Mutex<HashMap<ObjectRef<Agent>, u32>>,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct Error(#[from] kube::Error);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = kube::Config::infer()
        .await
        .context("no Kubernetes client configuration")?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("bare-controller/", env!("CARGO_PKG_VERSION"))),
    ));
    let client = Client::try_from(config)?;
    let controllers = args
        .namespaces
        .iter()
        .map(|ns| run(client.clone(), ns, args.pods, args.records));
    futures::future::join_all(controllers).await;
    Ok(())
}

/// One controller for one namespace, until the process is stopped.
async fn run(client: Client, namespace: &str, shape: Pods, records: bool) {
    // `ready` once both watches have listed everything.
    let synced = Arc::new(AtomicUsize::new(0));
    let (pods, writer) = reflector::store();
    let pod_changes = watcher(
        Api::<Pod>::namespaced(client.clone(), namespace),
        watcher::Config::default().labels(AGENT_LABEL),
    )
    .default_backoff()
    .inspect(announce(synced.clone(), namespace))
    .inspect_err(|e| eprintln!("pod watch failed: {e}"))
    .reflect(writer)
    .touched_objects();
    let (agents, writer) = reflector::store();
    let agent_changes = watcher(
        Api::<Agent>::namespaced(client.clone(), namespace),
        watcher::Config::default(),
    )
    .default_backoff()
    .inspect(announce(synced, namespace))
    .inspect_err(|e| eprintln!("Agent watch failed: {e}"))
    .reflect(writer)
    .applied_objects();
    let controller = Controller::for_stream(agent_changes, agents).owns_stream(pod_changes);
    let context = Arc::new(Context {
        client,
        pods,
        shape,
        records,
        latest: Mutex::default(),
    });
    controller
        .run(
            reconcile,
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            context,
        )
        .for_each(|result| {
            if let Err(e) = result {
                eprintln!("{e}");
            }
            futures::future::ready(())
        })
        .await;
}

/// Counts the watches that have listed everything; the second prints `ready: <namespace>`.
fn announce<K>(
    synced: Arc<AtomicUsize>,
    namespace: &str,
) -> impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + use<K> {
    let namespace = namespace.to_string();
    move |event| {
        if matches!(event, Ok(watcher::Event::InitDone))
            && synced.fetch_add(1, Ordering::SeqCst) == 1
        {
            eprintln!("ready: {namespace}");
        }
    }
}

/// Creates the first pod, or the next one when the latest failed.
async fn reconcile(agent: Arc<Agent>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let key = ObjectRef::from_obj(&*agent);
    let pod_ref = |attempt: u32| ObjectRef::new(&format!("{name}-{attempt}")).within(&namespace);
    let mut attempt = ctx.latest.lock().unwrap().get(&key).copied().unwrap_or(1);
    while ctx.pods.get(&pod_ref(attempt + 1)).is_some() {
        attempt += 1;
    }
    let next = match ctx.pods.get(&pod_ref(attempt)) {
        // Not seen yet: the first pod, or one created and not yet in the cache (created again,
        // it only meets AlreadyExists).
        None => attempt,
        Some(pod) if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") => {
            attempt + 1
        }
        Some(_) => return Ok(Action::await_change()),
    };
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &namespace);
    let pod = match ctx.shape {
        Pods::Least => pod(&agent, next),
        Pods::Operator => operator_pod(&agent, next),
    };
    match pods.create(&Default::default(), &pod).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        // Its namespace is being deleted: the Agent goes too, and no pod can be made for it.
        Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains("being terminated") => {
            return Ok(Action::await_change());
        }
        Err(e) => return Err(e.into()),
    }
    ctx.latest.lock().unwrap().insert(key, next);
    if ctx.records && next > 1 && (next - 1) % HELD == 0 {
        let api = Api::<Agent>::namespaced(ctx.client.clone(), &namespace);
        let params = PatchParams::apply("bare-controller").force();
        api.patch_status(&name, &params, &Patch::Apply(record(&name, next)))
            .await?;
    }
    Ok(Action::await_change())
}

/// A status record every ten restarts, as the operator once did in a storm (it held up to ten
/// failures back before writing them): how many restarts `--records` writes at once, and so
/// what such a record costs the control plane, measured on the least controller.
const HELD: u32 = 10;

/// The status the operator once wrote in a storm when the pod of attempt `attempt` replaced the
/// last failure held back: the last ten restarts, newest first, all at once and all for exit
/// code 1, as the storm's pods fail.
fn record(name: &str, attempt: u32) -> serde_json::Value {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let failed = |attempt: u32| {
        json!({
            "attempt": attempt, "trigger": "Failure", "failedAt": now, "restartedAt": now,
            "reason": "Error", "class": "Transient", "exitCode": 1,
            "message": "container failed", "ranFor": "2s", "backoff": "0s",
            "fingerprint": "eb4af6b444c491e1",
        })
    };
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now, "observedGeneration": 1,
        })
    };
    json!({
        "apiVersion": "supervisor.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "status": {
            "phase": "Pending",
            "podName": format!("{name}-{attempt}"),
            "attempt": attempt,
            "restartCount": attempt - 1,
            "consecutiveFailures": attempt - 1,
            "lastFailure": {
                "time": now, "reason": "Error", "class": "Transient", "exitCode": 1,
                "message": "container failed", "container": "agent",
                "podName": format!("{name}-{}", attempt - 1), "ranFor": "2s",
                "fingerprint": "eb4af6b444c491e1",
            },
            "restartHistory": (attempt.saturating_sub(HELD)..attempt).rev().map(failed).collect::<Vec<_>>(),
            "circuitBreaker": {"state": "Closed", "trips": 0},
            "conditions": [
                condition("CircuitBreakerOpen", "False", "Closed", ""),
                condition("PolicyResolved", "True", "Found", "using RestartPolicy immediate"),
                condition("Ready", "False", "PodPending", &format!("pod {name}-{attempt}")),
            ],
            "observedGeneration": 1,
        },
    })
}

/// The pod of attempt `attempt`: the template, owned by the Agent, labelled like the operator's.
fn pod(agent: &Agent, attempt: u32) -> Pod {
    let template = agent.spec.template.get();
    let meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(AGENT_LABEL.into(), agent.name_any());
    labels.insert(ATTEMPT_LABEL.into(), attempt.to_string());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.restart_policy = Some("Never".into());
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{}-{attempt}", agent.name_any())),
            namespace: agent.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![agent.controller_owner_ref(&()).unwrap()]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The pod the operator makes for attempt `attempt` of an Agent whose pods fail with exit code 1
/// (the benchmark's storm) and restart at once.
fn operator_pod(agent: &Agent, attempt: u32) -> Pod {
    let restart = attempt > 1;
    let new = NewPod {
        name: format!("{}-{attempt}", agent.name_any()),
        attempt,
        restart_count: attempt - 1,
        last_failure_reason: restart.then_some(FailureReason::Error),
        last_failure: restart.then(|| LastFailure {
            attempt: Some(attempt - 1),
            reason: FailureReason::Error,
            class: FailureClass::Transient,
            exit_code: Some(1),
            message: None,
        }),
        progress: None,
        origin: PodOrigin {
            trigger: restart.then_some(Trigger::Failure),
            ..PodOrigin::default()
        },
    };
    manifests::pod(agent, &new, &manifests::template_hash(agent))
}
