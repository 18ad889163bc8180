//! `kubectl agent`: the kubectl plugin for people who run agents (binary `kubectl-agent`).
//!
//! The commands read what `kubectl get` would show them — Agents, their RestartPolicy, their
//! Events, AgentGroups — and write only what `kubectl annotate` and `kubectl patch` would. The
//! renderings (`why`, `history`, `list`, `tree`) are pure functions of the fetched objects, in
//! `crate::view`.

use crate::view::{history, list, text, tree, why};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde::Serialize;

use crate::api::{
    Agent, AgentGroup, Phase, RESET_REQUESTED_ANNOTATION, RESTART_REQUESTED_ANNOTATION,
    RestartPolicy,
};
use crate::supervise::PolicyResolution;
use text::Paint;

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

/// An error for a person: one line that says what went wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);

type Result<T, E = CliError> = std::result::Result<T, E>;

/// Runs the plugin with the process's arguments; the exit code is 0 on success, 1 on an error
/// (printed as one line on standard error), 2 on bad usage (clap's).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a command prints on success.
pub async fn run(cli: Cli) -> Result<String> {
    let paint = Paint::for_stdout();
    let session = Session::connect(&cli.target).await?;
    let now = Timestamp::now();
    match cli.command {
        Command::List { output, selector } => {
            let agents = session.agents(selector.as_deref()).await?;
            let rows: Vec<_> = agents.iter().map(list::row).collect();
            match output {
                Some(ListOutput::Json) => data(&rows, DataOutput::Json),
                Some(ListOutput::Yaml) => data(&rows, DataOutput::Yaml),
                wide => {
                    if rows.is_empty() {
                        return Ok(session.none_found("agents"));
                    }
                    let layout = list::Layout {
                        namespaces: session.all,
                        wide: wide == Some(ListOutput::Wide),
                        recent: None,
                    };
                    Ok(list::render(&rows, layout, now, paint))
                }
            }
        }
        Command::Top {
            window,
            limit,
            output,
        } => {
            let agents = session.agents(None).await?;
            let secs = i64::try_from(window.as_std().as_secs()).unwrap_or(i64::MAX);
            let rows = list::top(&agents, secs, limit, now);
            if let Some(output) = output {
                return data(&rows, output);
            }
            if rows.is_empty() {
                return Ok(format!(
                    "No agent {} has restarted.\n",
                    session.scope_words()
                ));
            }
            let layout = list::Layout {
                namespaces: session.all,
                wide: false,
                recent: Some(if window == crate::api::Duration::from_secs(3600) {
                    "LAST HOUR"
                } else {
                    "IN WINDOW"
                }),
            };
            Ok(list::render(&rows, layout, now, paint))
        }
        Command::History { name, output } => {
            let agent = session.agent(&name).await?;
            match output {
                Some(output) => data(&history::attempts(&agent), output),
                None => Ok(history::render(&agent, now, paint)),
            }
        }
        Command::Why { name, output } => {
            let agent = session.agent(&name).await?;
            let policy = session.policy_of(&agent).await?;
            let events = session.events_of(&agent).await;
            let group = match agent.status.as_ref().and_then(|s| s.group.as_ref()) {
                Some(membership) => session.group(&membership.name).await.ok(),
                None => None,
            };
            let why = why::explain(&why::Facts {
                agent: &agent,
                policy: &policy,
                events: &events,
                group: group.as_ref(),
                now,
            });
            match output {
                Some(output) => data(&why, output),
                None => Ok(format!("{}\n", why.paragraph())),
            }
        }
        Command::Tree { group, output } => {
            let mut nodes = Vec::new();
            let mut loose = Vec::new();
            for namespace in session.namespaces_with_groups(group.as_deref()).await? {
                let groups = session.groups_in(namespace.as_deref()).await?;
                let agents = session.agents_in(namespace.as_deref(), None).await?;
                let by_namespace = split_by_namespace(&groups, &agents);
                for (ns, groups, agents) in by_namespace {
                    let objects = tree::Objects::new(&groups, &agents);
                    let roots = match &group {
                        Some(g) if !objects.groups.contains_key(g) => {
                            return Err(not_found("agentgroup", g, &ns));
                        }
                        Some(g) => vec![g.clone()],
                        None => objects.roots(),
                    };
                    for root in roots {
                        nodes.push((ns.clone(), objects.tree(&root, now)));
                    }
                    if group.is_none() {
                        loose.extend(objects.loose_agents().into_iter().map(|a| (ns.clone(), a)));
                    }
                }
            }
            if let Some(output) = output {
                let trees: Vec<_> = nodes.into_iter().map(|(_, node)| node).collect();
                return data(&trees, output);
            }
            if nodes.is_empty() {
                return Ok(session.none_found("agent groups"));
            }
            let mut out = String::new();
            for (ns, node) in &nodes {
                if session.all {
                    out.push_str(&paint.dim(&format!("namespace {ns}\n")));
                }
                out.push_str(&tree::render(node, paint));
            }
            if !loose.is_empty() {
                let names: Vec<String> = loose
                    .iter()
                    .map(|(ns, a)| {
                        if session.all {
                            format!("{ns}/{a}")
                        } else {
                            a.clone()
                        }
                    })
                    .collect();
                out.push_str(&format!(
                    "Not in any group ({}): {}\n",
                    names.len(),
                    names.join(", ")
                ));
            }
            Ok(out)
        }
        Command::Restart { name } => {
            let agent = session
                .annotate(&name, RESTART_REQUESTED_ANNOTATION)
                .await?;
            Ok(format!(
                "agent/{name} restart requested{}\n",
                caveat(&agent, "restarted")
            ))
        }
        Command::Reset { name } => {
            let agent = session.annotate(&name, RESET_REQUESTED_ANNOTATION).await?;
            Ok(format!(
                "agent/{name} reset requested: the breaker closes, the failure count goes to zero, and it starts again{}\n",
                caveat(&agent, "reset")
            ))
        }
        Command::Suspend { name } => {
            session.suspend(&name, true).await?;
            Ok(format!(
                "agent/{name} suspended: its pod is stopped gracefully and none is started until `kubectl agent resume {name} -n {}`\n",
                session.namespace
            ))
        }
        Command::Resume { name } => {
            let agent = session.suspend(&name, false).await?;
            let shutdown = agent.status.as_ref().is_some_and(|s| s.shutdown.is_some());
            Ok(format!(
                "agent/{name} resumed{}\n",
                if shutdown {
                    "; note: it is shut down (status.shutdown is set), so it stays stopped until that is cleared"
                } else {
                    ""
                }
            ))
        }
    }
}

/// What a person should know when a request will not have the effect they expect.
fn caveat(agent: &Agent, verb: &str) -> String {
    let status = agent.status.clone().unwrap_or_default();
    if status.shutdown.is_some() || status.phase == Some(Phase::Shutdown) {
        format!(
            "; note: it is shut down, so it is not {verb} until its status.shutdown is cleared (kubectl agent why {} says how)",
            agent.metadata.name.as_deref().unwrap_or_default()
        )
    } else if agent.spec.suspend {
        format!(
            "; note: it is suspended, so it is not {verb} until it is resumed (kubectl agent resume {})",
            agent.metadata.name.as_deref().unwrap_or_default()
        )
    } else {
        String::new()
    }
}

fn data<T: Serialize>(value: &T, output: DataOutput) -> Result<String> {
    match output {
        DataOutput::Json => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| CliError(format!("cannot write JSON: {e}"))),
        DataOutput::Yaml => {
            serde_yaml::to_string(value).map_err(|e| CliError(format!("cannot write YAML: {e}")))
        }
    }
}

type Split = Vec<(String, Vec<AgentGroup>, Vec<Agent>)>;

/// Objects of several namespaces, grouped by namespace (sorted).
fn split_by_namespace(groups: &[AgentGroup], agents: &[Agent]) -> Split {
    let mut out: std::collections::BTreeMap<String, (Vec<AgentGroup>, Vec<Agent>)> =
        Default::default();
    for g in groups {
        let ns = g.metadata.namespace.clone().unwrap_or_default();
        out.entry(ns).or_default().0.push(g.clone());
    }
    for a in agents {
        let ns = a.metadata.namespace.clone().unwrap_or_default();
        out.entry(ns).or_default().1.push(a.clone());
    }
    out.into_iter()
        .filter(|(_, (groups, _))| !groups.is_empty())
        .map(|(ns, (g, a))| (ns, g, a))
        .collect()
}

/// A connection to the cluster, and the namespace the command is about.
struct Session {
    client: Client,
    namespace: String,
    all: bool,
    server: String,
}

impl Session {
    async fn connect(target: &Target) -> Result<Session> {
        let options = KubeConfigOptions {
            context: target.context.clone(),
            cluster: None,
            user: None,
        };
        let config = match &target.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                    CliError(format!(
                        "cannot read kubeconfig {}: {e}",
                        path.display()
                    ))
                })?;
                Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => Config::from_kubeconfig(&options).await,
        }
        .map_err(|e| {
            CliError(format!(
                "no usable kubeconfig: {e}; pass --kubeconfig FILE or set KUBECONFIG, and --context to pick a context"
            ))
        })?;
        let server = config.cluster_url.to_string();
        let namespace = target
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let mut config = config;
        config.connect_timeout = Some(std::time::Duration::from_secs(10));
        config.read_timeout = Some(std::time::Duration::from_secs(30));
        let client = Client::try_from(config)
            .map_err(|e| CliError(format!("cannot make a client for {server}: {e}")))?;
        Ok(Session {
            client,
            namespace,
            all: target.all_namespaces,
            server,
        })
    }

    fn scope_words(&self) -> String {
        if self.all {
            "in any namespace".into()
        } else {
            format!("in namespace {}", self.namespace)
        }
    }

    fn none_found(&self, what: &str) -> String {
        format!("No {what} found {}.\n", self.scope_words())
    }

    /// The namespaces to list in: every one (`None`) with `-A` and no group named, else this one.
    async fn namespaces_with_groups(&self, group: Option<&str>) -> Result<Vec<Option<String>>> {
        if self.all && group.is_none() {
            Ok(vec![None])
        } else {
            Ok(vec![Some(self.namespace.clone())])
        }
    }

    fn api<K>(&self, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    async fn agents(&self, selector: Option<&str>) -> Result<Vec<Agent>> {
        let ns = (!self.all).then_some(self.namespace.as_str());
        self.agents_in(ns, selector).await
    }

    async fn agents_in(&self, ns: Option<&str>, selector: Option<&str>) -> Result<Vec<Agent>> {
        let mut params = ListParams::default();
        if let Some(selector) = selector {
            params = params.labels(selector);
        }
        let mut agents = self
            .api::<Agent>(ns)
            .list(&params)
            .await
            .map_err(|e| self.explain(e, "list", "agents", None, ns))?
            .items;
        agents.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        Ok(agents)
    }

    async fn groups_in(&self, ns: Option<&str>) -> Result<Vec<AgentGroup>> {
        Ok(self
            .api::<AgentGroup>(ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| self.explain(e, "list", "agentgroups", None, ns))?
            .items)
    }

    async fn agent(&self, name: &str) -> Result<Agent> {
        self.api::<Agent>(Some(&self.namespace))
            .get(name)
            .await
            .map_err(|e| self.explain(e, "get", "agents", Some(name), Some(&self.namespace)))
    }

    async fn group(&self, name: &str) -> Result<AgentGroup> {
        self.api::<AgentGroup>(Some(&self.namespace))
            .get(name)
            .await
            .map_err(|e| self.explain(e, "get", "agentgroups", Some(name), Some(&self.namespace)))
    }

    /// How the agent's policy resolves, as the operator resolves it.
    async fn policy_of(&self, agent: &Agent) -> Result<PolicyResolution> {
        let api = self.api::<RestartPolicy>(Some(&self.namespace));
        let named = agent
            .spec
            .restart_policy_ref
            .as_ref()
            .map(|r| r.name.clone());
        let name = named.clone().unwrap_or_else(|| "default".to_string());
        match api.get_opt(&name).await {
            Ok(Some(policy)) => Ok(match named {
                Some(name) => PolicyResolution::Named(name, policy.spec),
                None => PolicyResolution::NamespaceDefault(policy.spec),
            }),
            Ok(None) => Ok(match named {
                Some(name) => PolicyResolution::Missing(name),
                None => PolicyResolution::BuiltIn,
            }),
            Err(e) => Err(self.explain(
                e,
                "get",
                "restartpolicies",
                Some(&name),
                Some(&self.namespace),
            )),
        }
    }

    /// The agent's Events; none if they cannot be read (the explanation does without them).
    async fn events_of(&self, agent: &Agent) -> Vec<why::EventFact> {
        let uid = agent.metadata.uid.clone().unwrap_or_default();
        let params = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
        let Ok(events) = self.api::<Event>(Some(&self.namespace)).list(&params).await else {
            return Vec::new();
        };
        events
            .items
            .into_iter()
            .filter_map(|e| {
                let last = e
                    .series
                    .as_ref()
                    .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
                    .or(e.last_timestamp.as_ref().map(|t| t.0))
                    .or(e.event_time.as_ref().map(|t| t.0))
                    .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
                Some(why::EventFact {
                    reason: e.reason.unwrap_or_default(),
                    message: e.message.unwrap_or_default(),
                    warning: e.type_.as_deref() == Some("Warning"),
                    last,
                })
            })
            .collect()
    }

    /// Sets `annotation` to the current time, so each request is a new value the operator acts
    /// on once.
    async fn annotate(&self, name: &str, annotation: &str) -> Result<Agent> {
        let value = Timestamp::now().to_string();
        let patch = serde_json::json!({ "metadata": { "annotations": { annotation: value } } });
        self.patch(name, &patch).await
    }

    async fn suspend(&self, name: &str, suspend: bool) -> Result<Agent> {
        let patch = serde_json::json!({ "spec": { "suspend": suspend } });
        self.patch(name, &patch).await
    }

    async fn patch(&self, name: &str, patch: &serde_json::Value) -> Result<Agent> {
        let params = PatchParams {
            field_manager: Some("kubectl-agent".into()),
            ..PatchParams::default()
        };
        self.api::<Agent>(Some(&self.namespace))
            .patch(name, &params, &Patch::Merge(patch))
            .await
            .map_err(|e| self.explain(e, "patch", "agents", Some(name), Some(&self.namespace)))
    }

    /// A failed request as one line that says what to do.
    fn explain(
        &self,
        error: kube::Error,
        verb: &str,
        resource: &str,
        name: Option<&str>,
        ns: Option<&str>,
    ) -> CliError {
        let kind = resource
            .trim_end_matches('s')
            .replace("restartpolicie", "restartpolicy");
        let place = match ns {
            Some(ns) => format!("in namespace {ns}"),
            None => "in any namespace".into(),
        };
        match error {
            kube::Error::Api(status) if status.code == 404 => {
                if status
                    .message
                    .contains("could not find the requested resource")
                {
                    CliError(format!(
                        "the cluster at {} has no {resource}.supervisor.dev API: install agent-supervisor's CRDs (the Helm chart, or kubectl apply -f crds/)",
                        self.server
                    ))
                } else {
                    not_found(&kind, name.unwrap_or_default(), ns.unwrap_or_default())
                }
            }
            kube::Error::Api(status) if status.code == 403 => CliError(format!(
                "you may not {verb} {resource} {place} (forbidden: {}); ask a cluster admin for access, and check with: kubectl auth can-i {verb} {resource}.supervisor.dev{}",
                status.message,
                ns.map(|ns| format!(" -n {ns}"))
                    .unwrap_or_else(|| " -A".into())
            )),
            kube::Error::Api(status) if status.code == 401 => CliError(format!(
                "the cluster at {} refused your credentials (unauthorized); log in again, or pick another --context or --kubeconfig",
                self.server
            )),
            kube::Error::Api(status) => CliError(format!(
                "cannot {verb} {resource} {place}: {} ({})",
                status.message, status.reason
            )),
            other => CliError(format!(
                "cannot reach the cluster at {}: {}; is it running, and are --context and --kubeconfig the ones you meant?",
                self.server,
                root_cause(&other)
            )),
        }
    }
}

fn not_found(kind: &str, name: &str, ns: &str) -> CliError {
    let list = if kind == "agentgroup" {
        format!("kubectl agent tree -n {ns}")
    } else {
        format!("kubectl agent list -n {ns}")
    };
    CliError(format!(
        "{kind} {name:?} not found in namespace {ns}; see what is there with: {list}"
    ))
}

/// The innermost error of a chain: "connection refused" rather than "client error (Connect)".
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}
