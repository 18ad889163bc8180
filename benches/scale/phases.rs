//! The phases, each in a namespace of its own that is gone before the next begins:
//! converge (N Agents until every pod is Running and the controller is idle, and every phase in
//! their status), a quiet
//! stretch (writes in steady state), and a storm (`storm`: M Agents crash-looping, restarted
//! at once, until the controller is idle after it). What they share is here too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_supervisor::api::Agent;
use agent_supervisor::supervise::pod_name;
use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::pod_watch::CHAOS_LABEL;
use crate::procfs::{cpu_seconds, memory_mib};
use crate::report::{Measured, millis};
use crate::{agent_watch, audit, idle, pod_watch, storm};

#[derive(Clone, clap::Args)]
pub struct Options {
    /// Who is measured, as the table names it.
    #[arg(long)]
    pub controller: String,
    /// The controller's process: its CPU time and memory are read from /proc.
    #[arg(long)]
    pub pid: u32,
    /// The control plane's API server and etcd processes, when known (a local control plane):
    /// their CPU time during the storm, what the controller's requests cost them.
    #[arg(long)]
    pub apiserver_pid: Option<u32>,
    #[arg(long)]
    pub etcd_pid: Option<u32>,
    /// The rest of a local control plane: the simulated kubelet (kwok), the scheduler and the
    /// controller manager, whose work grows with each pod (their CPU time during the storm).
    #[arg(long)]
    pub kwok_pid: Option<u32>,
    #[arg(long)]
    pub scheduler_pid: Option<u32>,
    #[arg(long)]
    pub controller_manager_pid: Option<u32>,
    /// The start of the controller's user agent, as the audit log records it.
    #[arg(long)]
    pub user_agent: String,
    /// The directory of the API server's audit log.
    #[arg(long)]
    pub audit_dir: PathBuf,
    /// The phases' namespaces are PREFIX-converge and PREFIX-storm.
    #[arg(long)]
    pub namespace_prefix: String,
    /// Agents created at once in the converge phase.
    #[arg(long, default_value_t = 1000)]
    pub agents: usize,
    /// Crash-looping agents in the storm.
    #[arg(long, default_value_t = 200)]
    pub storm_agents: usize,
    /// How long the storm lasts, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub storm: f64,
    /// Agents created one by one during the storm, spread over it (new work arriving while
    /// the controller is busy restarting).
    #[arg(long, default_value_t = 10)]
    pub newcomers: usize,
    /// The quiet stretch after converging, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub quiet: f64,
    /// The storm's agents back off this long (a duration, such as 2s) before each restart,
    /// instead of restarting at once. The baseline restarts at once all the same: a measure of
    /// the operator against itself.
    #[arg(long)]
    pub storm_backoff: Option<String>,
    /// The controller records every change in its Agents' status (the operator): the
    /// converge waits for every Agent's phase, and both status lags are required figures.
    #[arg(long)]
    pub status_records: bool,
    /// Only the storm: the converge and the quiet stretch are left out (a run that differs
    /// from another only in what the storm measures, such as the restart budget).
    #[arg(long)]
    pub storm_only: bool,
    /// The operator's restart budget as RATE/BURST, when it is set to bind (its
    /// `--restart-rate`, `--restart-burst`): the storm's heading says so.
    #[arg(long)]
    pub restart_budget: Option<String>,
    /// Where the figures go (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

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
        status_records: options.status_records,
        storm_only: options.storm_only,
        restart_budget: options
            .restart_budget
            .as_deref()
            .map(|b| match b.split_once('/') {
                Some((rate, burst)) => format!("{rate}/s, burst {burst}"),
                None => b.to_string(),
            }),
        ..Measured::default()
    };
    let cpu_start = cpu_seconds(options.pid)?;
    if !options.storm_only {
        converge(&client, &options, &mut measured).await?;
        say(&options, "converge and quiet phases done");
    }
    storm::storm(&client, &options, &mut measured).await?;
    say(&options, "storm done");
    measured.cpu_total_s = cpu_seconds(options.pid)? - cpu_start;
    measured.rss_peak_mib = memory_mib(options.pid, "VmHWM")?;
    measured.set_percentiles();
    Ok(measured)
}

async fn converge(client: &Client, options: &Options, m: &mut Measured) -> anyhow::Result<()> {
    let ns = format!("{}-converge", options.namespace_prefix);
    create_namespace(client, &ns).await?;
    let pods = pod_watch::start(client, &ns).await?;
    let status = agent_watch::start(client, &ns).await?;
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
    // Until the controller is idle: a change it still owes the status (the operator writes each
    // within its status interval, `Running` an interval after `Pending`) counts here, not in the
    // steady state after it.
    let mut tail = idle::Tail::new(&options.audit_dir, false)?;
    let wall1 = Timestamp::now();
    let (last, idle_at) = idle::wait(&mut tail, &options.user_agent, &ns, wall1).await?;
    m.converge_idle_after_s = last.map(|last| audit::between(wall1, last).as_secs_f64());
    tokio::time::sleep(Duration::from_secs(1)).await;
    m.converge_requests = audit::count(
        &options.audit_dir,
        &options.user_agent,
        &ns,
        (wall0, idle_at),
        None,
    )?;
    // The same latency by the API server's clock.
    let latencies = first_pod_latencies(&options.audit_dir, &ns, created.keys())?;
    m.create_to_pod_timed = latencies.len();
    m.samples.create_to_pod_ms = millis(&latencies);
    // The status lag by the API server's clock too: a watch under load hears of a write late.
    let written = first_status_latencies(&options.audit_dir, &ns, created.keys())?;
    m.samples.converge_written_ms = millis(&written);

    // Steady state, from the idle point on: nothing changes, so a controller should write
    // nothing (one that kept writing was never idle, and its writes count here too).
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
    // The status lag: each Agent's create → its phase first seen. A controller that records
    // status is waited for (after the quiet stretch, so as not to change what it measures),
    // and an Agent with no phase by then is timed as seen then.
    if options.status_records {
        let wait = |s: &agent_watch::AgentsSeen| created.keys().all(|a| s.phase.contains_key(a));
        if !status.wait(PHASE_WAIT, wait).await {
            say(options, "not every Agent's phase seen");
        }
    }
    let until = options.status_records.then(Instant::now);
    let (lags, missing) = agent_watch::lags(&created, &status.snapshot().phase, until);
    m.converge_phase_missing = missing;
    m.samples.converge_status_lag_ms = millis(&lags);
    drop((pods, status));
    say(options, &format!("deleting namespace {ns}"));
    delete_namespace(client, &ns).await
}

/// How long the converge waits at most, after its quiet stretch, for every Agent's phase.
const PHASE_WAIT: Duration = Duration::from_secs(60);

/// From each Agent's create to its first pod's (`pod_name(agent, 1)`, as both controllers name
/// it), each when the API server completed it (the audit log); Agents without both are left out.
pub fn first_pod_latencies<'a>(
    audit_dir: &Path,
    namespace: &str,
    agents: impl Iterator<Item = &'a String>,
) -> anyhow::Result<Vec<Duration>> {
    let pods_at = audit::created(audit_dir, namespace, "pods")?;
    after_create(audit_dir, namespace, agents, |agent| {
        pods_at.get(&pod_name(agent, 1)).copied()
    })
}

/// From each Agent's create to its status's first write, each when the API server completed it
/// (the audit log); Agents whose status was not written are left out (a baseline writes none).
pub fn first_status_latencies<'a>(
    audit_dir: &Path,
    namespace: &str,
    agents: impl Iterator<Item = &'a String>,
) -> anyhow::Result<Vec<Duration>> {
    let written_at = audit::first_status_written(audit_dir, namespace, "agents")?;
    after_create(audit_dir, namespace, agents, |agent| {
        written_at.get(agent).copied()
    })
}

/// From each Agent's create (the audit log) to `then` of it, for the Agents with both.
fn after_create<'a>(
    audit_dir: &Path,
    namespace: &str,
    agents: impl Iterator<Item = &'a String>,
    then: impl Fn(&str) -> Option<Timestamp>,
) -> anyhow::Result<Vec<Duration>> {
    let agents_at = audit::created(audit_dir, namespace, "agents")?;
    Ok(agents
        .filter_map(|agent| Some(audit::between(*agents_at.get(agent)?, then(agent)?)))
        .collect())
}

/// The names of the Agents created during the storm start so (and so do their pods' and Events').
pub const NEWCOMER: &str = "newcomer-";

/// A progress line on stderr.
pub fn say(options: &Options, what: &str) {
    eprintln!("==> {}: {what} ({})", options.controller, Timestamp::now());
}

/// An Agent's spec: one container; crashing soon after it runs when `crash`.
pub fn agent_spec(policy: Option<&str>, crash: bool) -> serde_json::Value {
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
pub async fn create_agents(
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
pub async fn create_agent(
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

pub async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("cannot create namespace {name}"))?;
    Ok(())
}

/// Deletes the namespace and waits until it is gone.
pub async fn delete_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
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
pub async fn delete_and_wait<K>(
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
