//! The storm: M Agents crash-looping, restarted at once (or after `--storm-backoff`), for
//! `--storm` seconds, with newcomers created one by one meanwhile. At its end its pods stop
//! failing (`calm`), and the benchmark waits until the controller is idle (`idle`), so that
//! what it does after the storm because of it (status written late, Events, old pods pruned)
//! counts too.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use agent_supervisor::api::{Agent, RestartPolicy};
use anyhow::bail;
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::phases::{
    NEWCOMER, Options, agent_spec, create_agent, create_agents, create_namespace, delete_namespace,
    first_pod_latencies, say,
};
use crate::pod_watch::{CHAOS_LABEL, PodWatch};
use crate::procfs::cpu_seconds;
use crate::report::{Measured, millis};
use crate::{agent_watch, audit, idle, pod_watch};

pub async fn storm(client: &Client, options: &Options, m: &mut Measured) -> anyhow::Result<()> {
    let ns = format!("{}-storm", options.namespace_prefix);
    create_namespace(client, &ns).await?;
    // Restart at once (or after the same short backoff), always: no breaker, no limit.
    let backoff = match &options.storm_backoff {
        None => json!({"type": "Immediate"}),
        Some(delay) => json!({"type": "Exponential", "initialDelay": delay, "maxDelay": delay,
            "jitter": 0.0}),
    };
    let policy: RestartPolicy = serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1",
        "kind": "RestartPolicy",
        "metadata": {"name": "immediate"},
        "spec": {
            "backoff": backoff,
            "circuitBreaker": {"failureThreshold": 0},
            "limits": {"maxRestarts": 0},
        },
    }))?;
    Api::<RestartPolicy>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &policy)
        .await?;
    let pods = pod_watch::start(client, &ns).await?;
    let status = agent_watch::start(client, &ns).await?;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    let spec = agent_spec(Some("immediate"), true);
    create_agents(&agents, options.storm_agents, "crasher", spec).await?;
    let all = options.storm_agents;
    let timeout = Duration::from_secs(120 + options.storm_agents as u64 / 10);
    if !pods.wait(timeout, |s| s.first_pod.len() >= all).await {
        bail!("the storm's {all} agents did not all get a pod within {timeout:?}");
    }
    say(
        options,
        &format!(
            "storm of {all} agents for {storm_s} s",
            storm_s = options.storm
        ),
    );
    // The storm: from the moment every agent has its first pod.
    let storm = Duration::from_secs_f64(options.storm);
    let cpu0 = cpu_seconds(options.pid)?;
    let plane = [
        options.apiserver_pid,
        options.etcd_pid,
        options.kwok_pid,
        options.scheduler_pid,
        options.controller_manager_pid,
    ];
    let plane0 = plane.map(|pid| pid.map(cpu_seconds).transpose());
    let wall0 = Timestamp::now();
    let start = Instant::now();
    {
        let mut seen = pods.state.lock().unwrap();
        seen.window = Some((start, start + storm));
        seen.finished.track();
    }
    // New work arrives during the storm: Agents that do not crash, one at a time, spread over it.
    let spacing = storm / (options.newcomers as u32 + 1);
    let mut newcomers = Vec::new();
    for i in 0..options.newcomers {
        tokio::time::sleep_until((start + spacing * (i as u32 + 1)).into()).await;
        let name = format!("{NEWCOMER}{i}");
        create_agent(&agents, &name, &agent_spec(None, false)).await?;
        newcomers.push(name);
    }
    // The audit log from here on, where the idle point is looked for.
    let mut tail = idle::Tail::new(&options.audit_dir, false)?;
    tokio::time::sleep_until((start + storm).into()).await;
    let wall1 = Timestamp::now();
    m.storm_cpu_s = cpu_seconds(options.pid)? - cpu0;
    let mut plane_cpu = [None; 5];
    for ((pid, cpu0), cpu) in plane.iter().zip(plane0).zip(&mut plane_cpu) {
        if let (Some(pid), Some(cpu0)) = (pid, cpu0?) {
            *cpu = Some(cpu_seconds(*pid)? - cpu0);
        }
    }
    [
        m.storm_apiserver_cpu_s,
        m.storm_etcd_cpu_s,
        m.storm_kwok_cpu_s,
        m.storm_scheduler_cpu_s,
        m.storm_controller_manager_cpu_s,
    ] = plane_cpu;
    let calming = calm(client, &ns, &pods);
    // Failures of the window still waiting for their replacement get a little longer.
    let drain = storm.min(Duration::from_secs(10));
    pods.wait(drain, |s| s.pending.is_empty()).await;
    let end = Instant::now();
    let seen = pods.snapshot();
    let mut latencies = seen.replacements.clone();
    m.unreplaced = seen.pending.len() as u64;
    latencies.extend(
        seen.pending
            .values()
            .map(|failed| end.duration_since(*failed)),
    );
    m.restarts = seen.restarts;
    m.failures = latencies.len() as u64;
    m.samples.replace_ms = millis(&latencies);

    // Until the controller is idle: what it does because of the storm after it counts too.
    say(options, "waiting until the controller is idle");
    let (last, waited) = idle::wait(&mut tail, &options.user_agent, &ns, wall1).await?;
    let idle_at = Instant::now();
    calming.abort();
    m.idle_after_s = last.map(|last| audit::between(wall1, last).as_secs_f64());
    match m.idle_after_s {
        Some(s) => say(
            options,
            &format!("idle: its last request {s:.1} s after the storm"),
        ),
        None => say(
            options,
            &format!("not idle {:?} after the storm", idle::WAIT),
        ),
    }
    let seen = pods.snapshot();
    m.restarts_after_storm = seen.restarts_after;
    m.peak_finished_per_agent = Some(seen.finished.peak_per_agent);
    m.peak_finished = Some(seen.finished.peak);
    // The status lag: each storm pod seen Failed → its attempt seen in restartHistory. A
    // controller that records status and has not recorded one by the idle point is timed as
    // if it had then.
    let until = options.status_records.then_some(idle_at);
    let (lags, unrecorded) = agent_watch::lags(&seen.failures, &status.snapshot().recorded, until);
    m.status_failures = seen.failures.len() as u64;
    m.status_unrecorded = unrecorded as u64;
    m.samples.storm_status_lag_ms = millis(&lags);

    tokio::time::sleep(Duration::from_secs(1)).await;
    // The restarts' requests, in the window and until idle: the newcomers' own are left out.
    let count = |until| {
        let window = (wall0, until);
        audit::count(
            &options.audit_dir,
            &options.user_agent,
            &ns,
            window,
            Some(NEWCOMER),
        )
    };
    m.storm_requests = count(wall1)?;
    m.until_idle_requests = count(waited)?;
    let steps = audit::pod_steps(&options.audit_dir, &ns, (wall0, wall1), Some(NEWCOMER))?;
    m.samples.bound_ms = millis(&steps.bound);
    m.samples.running_ms = millis(&steps.running);
    m.samples.failed_ms = millis(&steps.failed);
    m.samples.kwok_patch_ms = millis(&steps.kwok_patch);
    let latencies = first_pod_latencies(&options.audit_dir, &ns, newcomers.iter())?;
    m.storm_newcomers = newcomers.len();
    m.storm_newcomers_timed = latencies.len();
    m.samples.storm_newcomer_ms = millis(&latencies);
    drop((pods, status));
    say(options, &format!("deleting namespace {ns}"));
    delete_namespace(client, &ns).await
}

/// Ends the storm: kwok fails a pod that carries the chaos label once it runs, so the label is
/// taken off every storm pod not yet running, and off each new one as soon as the pod watch
/// sees it (a merge patch of the benchmark's, not the controller's). A pod already running
/// still fails, so the storm ends within a restart or two per Agent. Stops when aborted.
fn calm(client: &Client, namespace: &str, pods: &PodWatch) -> tokio::task::JoinHandle<()> {
    let (tx, rx) = futures::channel::mpsc::unbounded();
    pods.state.lock().unwrap().calm(tx);
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut calmed = HashSet::new();
    tokio::spawn(async move {
        let patch = Patch::Merge(json!({"metadata": {"labels": {CHAOS_LABEL: null}}}));
        let (api, patch) = (&api, &patch);
        rx.filter(move |pod| futures::future::ready(calmed.insert(pod.clone())))
            .for_each_concurrent(16, |pod| async move {
                match api.patch(&pod, &PatchParams::default(), patch).await {
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => eprintln!("cannot take the chaos label off pod {pod}: {e}"),
                    Ok(_) => {}
                }
            })
            .await;
    })
}
