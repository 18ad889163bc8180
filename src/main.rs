//! The agent-supervisor operator: wiring only.

use std::sync::Arc;

use agent_supervisor::controller;
use agent_supervisor::controller::health::Health;
use agent_supervisor::controller::metrics::Metrics;
use agent_supervisor::controller::watched::Watched;
use agent_supervisor::process::config::{Args, StatusAddr};
use agent_supervisor::process::{client, leader, server, status_page, telemetry};
use anyhow::Context as _;
use clap::Parser;
use tokio::sync::watch;
use tracing::info;

/// jemalloc rather than the C library's allocator: the caches' objects are freed and replaced as
/// watch events arrive, from every worker thread, and glibc's per-thread arenas keep much of
/// that freed memory.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(args.worker_threads))
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        // On a worker, not on this thread: with the watches, the connections and the Event
        // sender on the same thread, a watch event reaches its reconcile and a reconcile its
        // request without waking another thread (less CPU per restart under a crash storm: see
        // the README's Performance section).
        .block_on(async { tokio::spawn(run(args)).await? })
}

async fn run(args: Args) -> anyhow::Result<()> {
    telemetry::init(args.log_format);

    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        terminated().await;
        info!("shutting down");
        let _ = stop.send(true);
    });
    let until_stopped = {
        let stopped = stopped.clone();
        move || {
            let mut stopped = stopped.clone();
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            }
        }
    };

    let metrics = Arc::new(Metrics::new(args.per_agent_metrics));
    let health = Arc::new(Health::default());
    let (addr, server) = server::serve(
        args.metrics_addr,
        health.clone(),
        metrics.clone(),
        until_stopped(),
    )
    .await
    .with_context(|| format!("cannot serve metrics on {}", args.metrics_addr))?;
    info!(%addr, "serving /healthz, /readyz and /metrics");

    let status = Arc::new(Watched::default());
    if let StatusAddr(Some(addr)) = args.status_addr {
        // The page is for people: an operator that cannot serve it still supervises.
        match status_page::serve(addr, status.clone(), until_stopped()).await {
            Ok((addr, _page)) => {
                info!(%addr, "serving the status page at /status and /status.json")
            }
            Err(e) => tracing::error!(%addr, error = %e, "cannot serve the status page"),
        }
    }

    let hostname = std::env::var("HOSTNAME").unwrap_or_else(|_| "agent-supervisor".into());
    let mut kube_config = kube::Config::infer()
        .await
        .context("no Kubernetes client configuration")?;
    // Audit logs tell the operator's requests, and its replicas, apart.
    let user_agent = format!(
        "agent-supervisor/{} ({hostname})",
        env!("CARGO_PKG_VERSION")
    );
    kube_config.headers.push((
        axum::http::header::USER_AGENT,
        axum::http::HeaderValue::from_str(&user_agent).context("invalid HOSTNAME")?,
    ));
    let manners = client::Manners {
        qps: args.kube_qps,
        burst: args.kube_burst,
    };
    let round_trips = controller::round_trips::RoundTrips::new(args.status_interval.0);
    let client = client::build(kube_config, manners, &round_trips)
        .context("cannot build a Kubernetes client")?;
    let version = client
        .apiserver_version()
        .await
        .context("cannot reach the API server")?;
    info!(version = version.git_version, namespaces = ?args.namespaces, "connected");
    health.set_ready(true);

    let config = controller::Config {
        namespaces: args.namespaces.clone(),
        concurrency: args.concurrency,
        metrics,
        health: health.clone(),
        faults: controller::WatchFaults::default(),
        budget: controller::budget::BudgetConfig {
            rate: args.restart_rate,
            burst: args.restart_burst,
        },
        status,
        status_interval: args.status_interval.0,
        round_trips,
        manage_agent_rbac: args.manage_agent_rbac,
        sandboxes: args.sandboxes,
        ..controller::Config::default()
    };
    if args.leader_elect {
        let namespace = args
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| client.default_namespace().to_string());
        let identity = format!("{hostname}-{:08x}", std::process::id());
        let duration = std::time::Duration::from_secs(args.leader_election_lease_duration);
        let mut leadership = leader::elect(
            client.clone(),
            &namespace,
            &args.leader_election_lease_name,
            &identity,
            duration,
        )
        .await
        .context("cannot start leader election")?;
        info!(
            lease = args.leader_election_lease_name,
            namespace, identity, "waiting to lead"
        );
        tokio::select! {
            () = leadership.acquired() => info!(identity, "leading"),
            () = until_stopped() => {
                leadership.release().await;
                return Ok(());
            }
        }
        // Losing the Lease drops the controllers at once: a former leader must not act (it
        // only writes what it had decided, while the Lease still holds).
        let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
        let lost = async move { lost_rx.await.ok().flatten() };
        let run = controller::run_leading(client, config, until_stopped(), lost);
        tokio::pin!(run);
        let ended = tokio::select! {
            ended = &mut run => ended,
            expiry = leadership.lost() => {
                let _ = lost_tx.send(expiry);
                run.await
            }
        };
        match ended {
            controller::Ended::Stopped => leadership.release().await,
            controller::Ended::Lost => anyhow::bail!("lost the leader Lease: stopping"),
        }
    } else {
        controller::run(client, config, until_stopped()).await;
    }
    let _ = server.await;
    Ok(())
}

/// SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn terminated() {
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("cannot listen for SIGTERM");
    tokio::select! {
        _ = sigterm.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
