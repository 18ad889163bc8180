//! The plugin's command line: its commands, their arguments and output formats.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// See and steer the agents agent-supervisor keeps alive.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl agent",
    bin_name = "kubectl agent",
    version,
    about = "See and steer the agents agent-supervisor keeps alive",
    long_about = "See and steer the agents agent-supervisor keeps alive.\n\n\
        Start with `kubectl agent list`, then `kubectl agent why NAME` for any agent that is not running.",
    after_help = "Examples:\n  kubectl agent list -A\n  kubectl agent why crasher\n  \
        kubectl agent history crasher\n  kubectl agent restart crasher -n agents"
)]
pub struct Cli {
    #[command(flatten)]
    pub target: Target,
    #[command(subcommand)]
    pub command: Command,
}

/// Where to look, with kubectl's flags and kubeconfig rules.
#[derive(Clone, Debug, Args)]
pub struct Target {
    /// The namespace (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Every namespace (for `list`, `top` and `tree`).
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List agents: phase, restarts, breaker, last failure, next restart.
    List {
        /// Output format: a table (default), `wide` (with pod, group and failure message),
        /// `json` or `yaml`.
        #[arg(short = 'o', long, value_enum)]
        output: Option<ListOutput>,
        /// Only agents with these labels (`key=value,...`, as `kubectl get -l`).
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
    /// An agent's restart history: one line per attempt, with a timeline.
    History {
        /// The agent.
        name: String,
        #[arg(short = 'o', long, value_enum)]
        output: Option<DataOutput>,
    },
    /// Why an agent is in its state, what happens next, and what you can do.
    Why {
        /// The agent.
        name: String,
        #[arg(short = 'o', long, value_enum)]
        output: Option<DataOutput>,
    },
    /// The supervision tree: groups and their members, each with its phase.
    Tree {
        /// Only the tree under this AgentGroup (default: every group in the namespace).
        group: Option<String>,
        #[arg(short = 'o', long, value_enum)]
        output: Option<DataOutput>,
    },
    /// Restart an agent once, now (a manual restart: not counted as a failure).
    Restart {
        /// The agent.
        name: String,
    },
    /// Close the breaker, zero the failure count, clear a give-up, and start the agent again.
    Reset {
        /// The agent.
        name: String,
    },
    /// Stop the agent's pod gracefully and start none until it is resumed.
    Suspend {
        /// The agent.
        name: String,
    },
    /// Resume a suspended agent.
    Resume {
        /// The agent.
        name: String,
    },
    /// The agents that restart the most.
    Top {
        /// Count restarts within this span of now (`30m`, `1h`, `1d`...). Counted from each
        /// agent's restart history, which keeps its policy's `historyLimit` entries.
        #[arg(long, default_value = "1h", value_parser = parse_window)]
        window: crate::api::Duration,
        /// Show at most this many agents.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[arg(short = 'o', long, value_enum)]
        output: Option<DataOutput>,
    },
}

fn parse_window(s: &str) -> Result<crate::api::Duration, String> {
    let s = s.trim();
    if let Some(days) = s.strip_suffix('d') {
        let days: u64 = days
            .parse()
            .map_err(|_| format!("invalid window {s:?}: write 30m, 1h or 2d"))?;
        return Ok(crate::api::Duration::from_secs(days.saturating_mul(86_400)));
    }
    s.parse()
        .map_err(|e: crate::api::duration::ParseDurationError| e.to_string())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ListOutput {
    Wide,
    Json,
    Yaml,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DataOutput {
    Json,
    Yaml,
}
