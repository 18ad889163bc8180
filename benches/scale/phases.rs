//! The phases, each in a namespace of its own that is gone before the next begins:
//! converge (N Agents until every pod is Running), a quiet stretch (writes in steady state),
//! and a storm (M Agents crash-looping, restarted at once).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_supervisor::api::{AGENT_LABEL, Agent, RestartPolicy};
use agent_supervisor::supervise::pod_name;
use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::audit;
use crate::pod_watch::PodWatch;
use crate::report::{Measured, millis};

#[derive(Clone, clap::Args)]
pub struct Options {
    /// Who is measured, as the table names it.
    #[arg(long)]
    controller: String,
    /// The controller's process: its CPU time and memory are read from /proc.
    #[arg(long)]
    pid: u32,
    /// The control plane's API server and etcd processes, when known (a local control plane):
    /// their CPU time during the storm, what the controller's requests cost them.
    #[arg(long)]
    apiserver_pid: Option<u32>,
    #[arg(long)]
    etcd_pid: Option<u32>,
    /// The rest of a local control plane: the simulated kubelet (kwok), the scheduler and the
    /// controller manager, whose work grows with each pod (their CPU time during the storm).
    #[arg(long)]
    kwok_pid: Option<u32>,
    #[arg(long)]
    scheduler_pid: Option<u32>,
    #[arg(long)]
    controller_manager_pid: Option<u32>,
    /// The start of the controller's user agent, as the audit log records it.
    #[arg(long)]
    user_agent: String,
    /// The directory of the API server's audit log.
    #[arg(long)]
    audit_dir: PathBuf,
    /// The phases' namespaces are PREFIX-converge and PREFIX-storm.
    #[arg(long)]
    namespace_prefix: String,
    /// Agents created at once in the converge phase.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// Crash-looping agents in the storm.
    #[arg(long, default_value_t = 200)]
    storm_agents: usize,
    /// How long the storm lasts, in seconds.
    #[arg(long, default_value_t = 60.0)]
    storm: f64,
    /// Agents created one by one during the storm, spread over it (new work arriving while
    /// the controller is busy restarting).
    #[arg(long, default_value_t = 10)]
    newcomers: usize,
    /// The quiet stretch after converging, in seconds.
    #[arg(long, default_value_t = 60.0)]
    quiet: f64,
    /// The storm's agents back off this long (a duration, such as 2s) before each restart,
    /// instead of restarting at once. The baseline restarts at once all the same: a measure of
    /// the operator against itself.
    #[arg(long)]
    storm_backoff: Option<String>,
    /// Where the figures go (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

/// The label that makes kwok's chaos stage (pod-container-running-failed) fail a running pod:
/// only the storm's pods carry it.
const CHAOS_LABEL: &str = "pod-container-running-failed.stage.kwok.x-k8s.io";

pub async fn run(options: Options) -> anyhow::Result<Measured> {
    let client = Client::try_default().await?;
    let mut measured = Measured {
        controller: options.controller.clone(),
        rounds: 1,
        agents: options.agents,
        storm_agents: options.storm_agents,
        storm_s: options.storm,
        storm_backoff: options.storm_backoff.clone(),
        quiet_s: options.quiet,
        ..Measured::default()
    };
    let cpu_start = cpu_seconds(options.pid)?;
    converge(&client, &options, &mut measured).await?;
    say(&options, "converge and quiet phases done");
    storm(&client, &options, &mut measured).await?;
    say(&options, "storm done");
    measured.cpu_total_s = cpu_seconds(options.pid)? - cpu_start;
    measured.rss_peak_mib = memory_mib(options.pid, "VmHWM")?;
    measured.set_percentiles();
    Ok(measured)
}

async fn converge(client: &Client, options: &Options, m: &mut Measured) -> anyhow::Result<()> {
    let ns = format!("{}-converge", options.namespace_prefix);
    create_namespace(client, &ns).await?;
    let pods = PodWatch::start(client, &ns).await?;
    let agents: Api<Agent> = Api::namespaced(client.clone(), &ns);
    let cpu0 = cpu_seconds(options.pid)?;
    let (wall0, t0) = (Timestamp::now(), Instant::now());
    let created = create_agents(&agents, options.agents, "agent", agent_spec(None, false)).await?;
    say(options, &format!("{} Agents created", options.agents));
    let timeout = Duration::from_secs(120 + options.agents as u64 / 10);
    let all = options.agents;
    pods.wait(timeout, |s| s.running.len() >= all).await;
    let seen = pods.snapshot();
    m.pods_running = seen.running.len();
    m.converge_s = seen
        .running
        .values()
        .max()
        .map(|t| t.duration_since(t0).as_secs_f64());
    let seen_latencies: Vec<Duration> = created
        .iter()
        .filter_map(|(agent, at)| {
            seen.first_pod
                .get(agent)
                .map(|pod| pod.saturating_duration_since(*at))
        })
        .collect();
    m.samples.seen_pod_ms = millis(&seen_latencies);
    m.converge_cpu_s = cpu_seconds(options.pid)? - cpu0;
    m.rss_converged_mib = memory_mib(options.pid, "VmRSS")?;
    let wall1 = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    m.converge_requests = audit::count(
        &options.audit_dir,
        &options.user_agent,
        &ns,
        (wall0, wall1),
        None,
    )?;
    // The same latency by the API server's clock.
    let latencies = first_pod_latencies(&options.audit_dir, &ns, created.keys())?;
    m.create_to_pod_timed = latencies.len();
    m.samples.create_to_pod_ms = millis(&latencies);

    // Steady state: nothing changes, so a controller should write nothing.
    let quiet0 = Timestamp::now();
    tokio::time::sleep(Duration::from_secs_f64(options.quiet)).await;
    let quiet1 = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let quiet = audit::count(
        &options.audit_dir,
        &options.user_agent,
        &ns,
        (quiet0, quiet1),
        None,
    )?;
    m.quiet_writes = audit::writes(&quiet);
    drop(pods);
    say(options, &format!("deleting namespace {ns}"));
    delete_namespace(client, &ns).await
}

async fn storm(client: &Client, options: &Options, m: &mut Measured) -> anyhow::Result<()> {
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
    let pods = PodWatch::start(client, &ns).await?;
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
    let apiserver0 = options.apiserver_pid.map(cpu_seconds).transpose()?;
    let etcd0 = options.etcd_pid.map(cpu_seconds).transpose()?;
    let kwok0 = options.kwok_pid.map(cpu_seconds).transpose()?;
    let scheduler0 = options.scheduler_pid.map(cpu_seconds).transpose()?;
    let controller_manager0 = options
        .controller_manager_pid
        .map(cpu_seconds)
        .transpose()?;
    let wall0 = Timestamp::now();
    let start = Instant::now();
    pods.state.lock().unwrap().window = Some((start, start + storm));
    // New work arrives during the storm: Agents that do not crash, one at a time, spread over it.
    let spacing = storm / (options.newcomers as u32 + 1);
    let mut newcomers = Vec::new();
    for i in 0..options.newcomers {
        tokio::time::sleep_until((start + spacing * (i as u32 + 1)).into()).await;
        let name = format!("{NEWCOMER}{i}");
        create_agent(&agents, &name, &agent_spec(None, false)).await?;
        newcomers.push(name);
    }
    tokio::time::sleep_until((start + storm).into()).await;
    let wall1 = Timestamp::now();
    m.storm_cpu_s = cpu_seconds(options.pid)? - cpu0;
    let since = |pid: Option<u32>, cpu0: Option<f64>| -> anyhow::Result<Option<f64>> {
        match (pid, cpu0) {
            (Some(pid), Some(cpu0)) => Ok(Some(cpu_seconds(pid)? - cpu0)),
            _ => Ok(None),
        }
    };
    m.storm_apiserver_cpu_s = since(options.apiserver_pid, apiserver0)?;
    m.storm_etcd_cpu_s = since(options.etcd_pid, etcd0)?;
    m.storm_kwok_cpu_s = since(options.kwok_pid, kwok0)?;
    m.storm_scheduler_cpu_s = since(options.scheduler_pid, scheduler0)?;
    m.storm_controller_manager_cpu_s = since(options.controller_manager_pid, controller_manager0)?;
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
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The restarts' requests: the newcomers' own are left out.
    m.storm_requests = audit::count(
        &options.audit_dir,
        &options.user_agent,
        &ns,
        (wall0, wall1),
        Some(NEWCOMER),
    )?;
    let steps = audit::pod_steps(&options.audit_dir, &ns, (wall0, wall1), Some(NEWCOMER))?;
    m.samples.bound_ms = millis(&steps.bound);
    m.samples.running_ms = millis(&steps.running);
    m.samples.failed_ms = millis(&steps.failed);
    m.samples.kwok_patch_ms = millis(&steps.kwok_patch);
    let latencies = first_pod_latencies(&options.audit_dir, &ns, newcomers.iter())?;
    m.storm_newcomers = newcomers.len();
    m.storm_newcomers_timed = latencies.len();
    m.samples.storm_newcomer_ms = millis(&latencies);
    drop(pods);
    say(options, &format!("deleting namespace {ns}"));
    delete_namespace(client, &ns).await
}

/// What the warm-up does: `agents` Agents and a pod for each, made directly (no controller
/// watches the namespace), until every pod runs; then the namespace goes.
#[derive(Clone, clap::Args)]
pub struct WarmUp {
    #[arg(long)]
    namespace: String,
    #[arg(long, default_value_t = 1000)]
    agents: usize,
}

/// Warms a fresh control plane up before the first controller is measured: its first burst of
/// creates (etcd, the API server's caches, the scheduler, kwok) is slower than every later one,
/// and without this the controller measured first would pay for it. It ends once the garbage
/// collector watches Agents, for the same reason.
pub async fn warm_up(options: WarmUp) -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let ns = &options.namespace;
    create_namespace(&client, ns).await?;
    let pods = PodWatch::start(&client, ns).await?;
    let agents: Api<Agent> = Api::namespaced(client.clone(), ns);
    let spec = agent_spec(None, false);
    create_agents(&agents, options.agents, "warm", spec.clone()).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..options.agents)
        .map(|i| {
            let agent = format!("warm-{i}");
            let pod = json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name(&agent, 1), "labels": {AGENT_LABEL: agent}},
                "spec": spec["template"]["spec"],
            });
            let api = api.clone();
            async move {
                let pod: Pod = serde_json::from_value(pod)?;
                api.create(&PostParams::default(), &pod).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await?;
    let all = options.agents;
    let timeout = Duration::from_secs(120 + all as u64 / 10);
    if !pods.wait(timeout, |s| s.running.len() >= all).await {
        bail!("the warm-up's {all} pods did not all run within {timeout:?}");
    }
    drop(pods);
    garbage_collector_watches_agents(&agents).await?;
    delete_namespace(&client, ns).await
}

/// Waits until the garbage collector watches Agents. It learns of a new resource (the Agents'
/// CRD, applied moments before on a fresh control plane) only at its next discovery, up to 30 s
/// later; until then every pod owned by an Agent sends it to the API server for the owner, ten
/// GETs a second, and those fell on whichever controller was measured first (on a control plane
/// just started: 200 in the operator's converge of 20 Agents and 600 in its storm, none in the
/// baseline's). An Agent deleted in the foreground is gone only once the collector has seen it
/// (its finalizer is the collector's to remove), so its going is the sign.
async fn garbage_collector_watches_agents(agents: &Api<Agent>) -> anyhow::Result<()> {
    let name = "gc-probe";
    create_agent(agents, name, &agent_spec(None, false)).await?;
    delete_and_wait(
        agents,
        name,
        &DeleteParams::foreground(),
        Duration::from_secs(120),
    )
    .await
}

/// From each Agent's create to its first pod's (`pod_name(agent, 1)`, as both controllers name
/// it), each when the API server completed it (the audit log); Agents without both are left out.
fn first_pod_latencies<'a>(
    audit_dir: &Path,
    namespace: &str,
    agents: impl Iterator<Item = &'a String>,
) -> anyhow::Result<Vec<Duration>> {
    let agents_at = audit::created(audit_dir, namespace, "agents")?;
    let pods_at = audit::created(audit_dir, namespace, "pods")?;
    Ok(agents
        .filter_map(|agent| {
            let pod = *pods_at.get(&pod_name(agent, 1))?;
            Some(audit::between(*agents_at.get(agent)?, pod))
        })
        .collect())
}

/// The names of the Agents created during the storm start so (and so do their pods' and Events').
const NEWCOMER: &str = "newcomer-";

/// A progress line on stderr.
fn say(options: &Options, what: &str) {
    eprintln!("==> {}: {what} ({})", options.controller, Timestamp::now());
}

/// An Agent's spec: one container; crashing soon after it runs when `crash`.
fn agent_spec(policy: Option<&str>, crash: bool) -> serde_json::Value {
    let mut metadata = json!({});
    if crash {
        metadata = json!({
            "labels": {CHAOS_LABEL: "true"},
            "annotations": {
                format!("{CHAOS_LABEL}/exit-code"): "1",
                format!("{CHAOS_LABEL}/reason"): "Error",
            },
        });
    }
    let mut spec = json!({
        "template": {
            "metadata": metadata,
            // Deleted pods go at once, and so does each phase's namespace.
            "spec": {
                "containers": [{"name": "agent", "image": "bench/agent:1"}],
                "terminationGracePeriodSeconds": 0,
            },
        },
    });
    if let Some(policy) = policy {
        spec["restartPolicyRef"] = json!({"name": policy});
    }
    spec
}

/// Creates `count` Agents named `<prefix>-<i>`, 32 requests at a time; when each was created.
async fn create_agents(
    api: &Api<Agent>,
    count: usize,
    prefix: &str,
    spec: serde_json::Value,
) -> anyhow::Result<HashMap<String, Instant>> {
    futures::stream::iter(0..count)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            let spec = &spec;
            async move {
                create_agent(api, &name, spec).await?;
                anyhow::Ok((name, Instant::now()))
            }
        })
        .buffer_unordered(32)
        .try_collect()
        .await
}

/// Creates the Agent `name` with `spec`.
async fn create_agent(
    api: &Api<Agent>,
    name: &str,
    spec: &serde_json::Value,
) -> anyhow::Result<()> {
    let agent: Agent = serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": spec,
    }))?;
    api.create(&PostParams::default(), &agent)
        .await
        .with_context(|| format!("cannot create Agent {name}"))?;
    Ok(())
}

async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("cannot create namespace {name}"))?;
    Ok(())
}

/// Deletes the namespace and waits until it is gone.
async fn delete_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let api = Api::<Namespace>::all(client.clone());
    delete_and_wait(
        &api,
        name,
        &DeleteParams::default(),
        Duration::from_secs(900),
    )
    .await
}

/// Deletes the object `name` and waits until it is gone, at most `timeout`.
async fn delete_and_wait<K>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
    timeout: Duration,
) -> anyhow::Result<()>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let kind = K::kind(&()).into_owned();
    api.delete(name, params)
        .await
        .with_context(|| format!("cannot delete {kind} {name}"))?;
    let deadline = Instant::now() + timeout;
    while api.get_opt(name).await?.is_some() {
        if Instant::now() > deadline {
            bail!("{kind} {name} still exists {timeout:?} after its deletion");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// User plus system CPU seconds of the process so far.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    // The fields after the command (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
        bail!("cannot read the CPU times in /proc/{pid}/stat");
    };
    Ok((user + system) / clock_ticks())
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// A memory figure of /proc/<pid>/status (VmRSS, VmHWM), in MiB.
fn memory_mib(pid: u32, field: &str) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    Ok(kib / 1024.0)
}
