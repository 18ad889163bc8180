//! The command line (every flag also reads an environment variable).

use std::net::SocketAddr;

use clap::{ArgAction, Parser, ValueEnum};

/// Keeps long-running AI agents alive: runs each Agent as a pod, restarts crashes with backoff
/// behind a circuit breaker, and leaves economic and voluntary shutdowns alone.
#[derive(Clone, Debug, Parser)]
#[command(name = "agent-supervisor", version)]
pub struct Args {
    /// Namespaces to watch, comma-separated; all when empty.
    #[arg(long, env = "WATCH_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,

    /// Where /healthz, /readyz and /metrics are served.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,

    /// Log lines as JSON objects or for people.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,

    /// Only the replica holding the leader Lease acts.
    #[arg(long, env = "LEADER_ELECT", default_value_t = true, action = ArgAction::Set)]
    pub leader_elect: bool,

    /// The leader Lease's name.
    #[arg(
        long,
        env = "LEADER_ELECTION_LEASE_NAME",
        default_value = "agent-supervisor"
    )]
    pub leader_election_lease_name: String,

    /// The leader Lease's namespace [default: the pod's namespace (POD_NAMESPACE), else the
    /// client's default namespace].
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Seconds a leader's Lease stays valid without renewal: how soon a standby takes over.
    #[arg(long, env = "LEADER_ELECTION_LEASE_DURATION", default_value_t = 15)]
    pub leader_election_lease_duration: u64,

    /// Agents reconciled at once (per watched namespace). Each reconcile waits on one API
    /// request at a time, so this bounds the operator's requests in flight.
    #[arg(long, env = "CONCURRENCY", default_value_t = 128)]
    pub concurrency: u16,

    /// Threads that run the operator's tasks. One is enough for 10,000 agents (the operator
    /// uses a fraction of one core), and under a crash storm spends a tenth less CPU than two,
    /// handing less work between threads.
    #[arg(long, env = "WORKER_THREADS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,

    /// Restarts a second the operator makes at most, on average, across all agents (shared
    /// fairly between namespaces); restarts over it wait.
    #[arg(long, env = "RESTART_RATE", default_value_t = 20.0, value_parser = positive_rate)]
    pub restart_rate: f64,

    /// Restarts the operator makes at once at most, before the rate applies.
    #[arg(long, env = "RESTART_BURST", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub restart_burst: u32,

    /// Requests a second the operator sends the API server at most, on average; 0 sets no limit
    /// of its own (the server's API Priority and Fairness, and the restart budget, bound it).
    /// Answers 429 and 503 are retried after the Retry-After they ask for, either way.
    #[arg(long, env = "KUBE_QPS", default_value_t = 0.0, value_parser = request_rate)]
    pub kube_qps: f64,

    /// How old an Agent's status may be: every change the operator decides is written within
    /// this of its cause. An Agent not written for this long is written at once; changes to one
    /// written more recently are merged and written when this is up (so a crash loop costs one
    /// write this often). Such as 10s or 500ms.
    #[arg(long, env = "STATUS_INTERVAL", default_value = "10s", value_parser = interval)]
    pub status_interval: Interval,

    /// Requests the operator sends at once at most, before --kube-qps applies.
    #[arg(long, env = "KUBE_BURST", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub kube_burst: u32,

    /// Where the read-only status page (/status, /status.json) is served; empty turns it off.
    /// Loopback by default: reach it with `kubectl port-forward`.
    #[arg(long, env = "STATUS_ADDR", default_value = "127.0.0.1:8081", value_parser = status_addr)]
    pub status_addr: StatusAddr,

    /// Give each Agent with a heartbeat what its pod needs to renew its Lease: a Role on exactly
    /// that Lease, bound to the template's ServiceAccount or to one made for the Agent. False
    /// where the operator may not create RBAC: the agents' RBAC is then the user's to write.
    #[arg(long, env = "MANAGE_AGENT_RBAC", default_value_t = true, action = ArgAction::Set)]
    pub manage_agent_rbac: bool,

    /// Supervise agent-sandbox Sandboxes (Agents with `spec.sandboxRef`) when agent-sandbox's
    /// CRDs are installed: watch Sandboxes, adopt and delete their pods, set their
    /// operatingMode. False where the operator may not (the chart's `sandboxes.enabled`).
    #[arg(long, env = "SANDBOXES", default_value_t = true, action = ArgAction::Set)]
    pub sandboxes: bool,

    /// Export agent_supervisor_agent_restarts with a label per agent (unbounded cardinality).
    #[arg(long, env = "PER_AGENT_METRICS", default_value_t = false, action = ArgAction::Set)]
    pub per_agent_metrics: bool,
}

/// An address to serve on, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusAddr(pub Option<SocketAddr>);

fn status_addr(s: &str) -> Result<StatusAddr, String> {
    if s.trim().is_empty() {
        return Ok(StatusAddr(None));
    }
    s.parse().map(|a| StatusAddr(Some(a))).map_err(|_| {
        format!("{s:?} is not an address such as 127.0.0.1:8081 (empty turns the page off)")
    })
}

/// A duration for --status-interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval(pub std::time::Duration);

fn interval(s: &str) -> Result<Interval, String> {
    let error =
        || format!("{s:?} is not an interval: write a duration from 100ms to 10m, such as 10s");
    let parsed: crate::api::Duration = s.parse().map_err(|_| error())?;
    let duration = parsed.as_std();
    let allowed = std::time::Duration::from_millis(100)..=std::time::Duration::from_secs(600);
    allowed
        .contains(&duration)
        .then_some(Interval(duration))
        .ok_or_else(error)
}

/// A rate above zero, and finite.
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "{s:?} is not a rate: write restarts a second above 0, such as 20 or 0.5"
        )),
    }
}

fn request_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
        _ => Err(format!(
            "{s:?} is not a rate: write requests a second, such as 200, or 0 for no limit"
        )),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Json,
    Human,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_with_their_defaults() {
        let args = Args::try_parse_from(["agent-supervisor"]).unwrap();
        assert!(args.namespaces.is_empty());
        assert!(args.leader_elect);
        assert_eq!(args.metrics_addr.port(), 8080);
        assert_eq!(args.log_format, LogFormat::Human);
        let args = Args::try_parse_from([
            "agent-supervisor",
            "--namespaces=a,b",
            "--leader-elect=false",
            "--log-format=json",
            "--metrics-addr=127.0.0.1:9090",
            "--concurrency=4",
        ])
        .unwrap();
        assert_eq!(args.namespaces, ["a", "b"]);
        assert!(!args.leader_elect);
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.concurrency, 4);
        assert_eq!(args.worker_threads, 1, "one thread unless asked");
        assert!(Args::try_parse_from(["agent-supervisor", "--worker-threads=0"]).is_err());
        assert!(Args::try_parse_from(["agent-supervisor", "--log-format=xml"]).is_err());
        let args = Args::try_parse_from(["agent-supervisor"]).unwrap();
        assert_eq!((args.restart_rate, args.restart_burst), (20.0, 100));
        let args = Args::try_parse_from([
            "agent-supervisor",
            "--restart-rate=0.5",
            "--restart-burst=3",
        ])
        .unwrap();
        assert_eq!((args.restart_rate, args.restart_burst), (0.5, 3));
        let args = Args::try_parse_from(["agent-supervisor"]).unwrap();
        assert_eq!((args.kube_qps, args.kube_burst), (0.0, 100));
        assert_eq!(args.status_interval.0, std::time::Duration::from_secs(10));
        let args = Args::try_parse_from(["agent-supervisor", "--status-interval=500ms"]).unwrap();
        assert_eq!(
            args.status_interval.0,
            std::time::Duration::from_millis(500)
        );
        for bad in ["0s", "-1s", "ten", "1h"] {
            let flag = format!("--status-interval={bad}");
            assert!(
                Args::try_parse_from(["agent-supervisor", &flag]).is_err(),
                "{bad}"
            );
        }
        let args =
            Args::try_parse_from(["agent-supervisor", "--kube-qps=50", "--kube-burst=10"]).unwrap();
        assert_eq!((args.kube_qps, args.kube_burst), (50.0, 10));
        for bad in [
            "--restart-rate=0",
            "--restart-rate=-1",
            "--restart-rate=fast",
            "--restart-rate=inf",
            "--restart-burst=0",
            "--kube-qps=-1",
            "--kube-qps=many",
            "--kube-burst=0",
        ] {
            assert!(
                Args::try_parse_from(["agent-supervisor", bad]).is_err(),
                "{bad}"
            );
        }
    }
}
