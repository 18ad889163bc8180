//! `bench-scale warm-up`: a fresh control plane's first burst of creates, paid before anyone is
//! measured.

use std::time::Duration;

use agent_supervisor::api::{AGENT_LABEL, Agent};
use agent_supervisor::supervise::pod_name;
use anyhow::bail;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::phases::{
    agent_spec, create_agent, create_agents, create_namespace, delete_and_wait, delete_namespace,
};
use crate::pod_watch;

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
    let pods = pod_watch::start(&client, ns).await?;
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
