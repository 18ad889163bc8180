//! `kubectl agent`: the kubectl plugin for people who run agents (binary `kubectl-agent`).
//!
//! The commands read what `kubectl get` would show them — Agents, their RestartPolicy, their
//! Events, AgentGroups — and write only what `kubectl annotate` and `kubectl patch` would. The
//! renderings (`why`, `history`, `list`, `tree`) are pure functions of the fetched objects, in
//! `crate::view`.

mod args;
mod session;

use std::process::ExitCode;

use clap::Parser;
use jiff::Timestamp;
use serde::Serialize;

pub use args::{Cli, Command, DataOutput, ListOutput, Target};
use session::{Session, not_found};

use crate::api::{
    Agent, AgentGroup, Phase, RESET_REQUESTED_ANNOTATION, RESTART_REQUESTED_ANNOTATION,
};
use crate::view::text::Paint;
use crate::view::{history, list, tree, why};

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
            let policies = session.policies().await;
            let rows: Vec<_> = agents
                .iter()
                .map(|a| list::budgeted(a, &policies))
                .collect();
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
            let policies = session.policies().await;
            let secs = i64::try_from(window.as_std().as_secs()).unwrap_or(i64::MAX);
            let rows = list::top(&agents, &policies, secs, limit, now);
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
