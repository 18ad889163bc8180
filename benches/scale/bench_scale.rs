//! The measuring side of `make bench-scale` (hack/bench-scale.sh runs it; see the README's
//! Performance section).
//!
//!     bench-scale warm-up --namespace NS --agents N
//!         makes N Agents and their pods directly in NS until all run, then deletes NS: the
//!         fresh control plane's first burst, paid before anyone is measured;
//!     bench-scale run --controller NAME --pid PID --user-agent PREFIX --audit-dir DIR ...
//!         runs the phases against a controller already started (pid PID, watching the
//!         namespaces PREFIX-converge and PREFIX-storm) and writes what it measured as JSON;
//!     bench-scale table --operator FILE --bare FILE [--check]
//!         prints the comparison as one markdown table; --check fails unless every figure is
//!         present and sane (the smoke run of `make test`), never on a speed. Given several
//!         rounds (--operator and --bare once each per round, in the same order), the table pools
//!         them (`report::pool`) and a second one gives each round's storm apart;
//!     bench-scale seconds --audit-dir DIR --namespace NS
//!         prints NS's restarts and requests second by second, from the audit log (which seconds
//!         made a storm's percentiles, and who sent what in them).
//!
//! Agent created → its pod created is timed by the API server's clock, from the audit log. Every
//! other time comes from this process's clock as it sees the watch events of ONE pod watch per
//! phase (the API server orders them): the Failed update of a pod is always seen before the
//! creation of its replacement.

mod audit;
mod phases;
mod pod_watch;
mod report;
mod seconds;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    WarmUp(phases::WarmUp),
    Run(phases::Options),
    Table {
        /// One run's figures per round.
        #[arg(long, required = true)]
        operator: Vec<PathBuf>,
        /// One run's figures per round, in the order of --operator's.
        #[arg(long, required = true)]
        bare: Vec<PathBuf>,
        /// Fail unless every figure is present and sane.
        #[arg(long)]
        check: bool,
    },
    Seconds {
        #[arg(long)]
        audit_dir: PathBuf,
        #[arg(long)]
        namespace: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Args::parse().command {
        Command::WarmUp(options) => phases::warm_up(options).await?,
        Command::Run(options) => {
            let out = options.out.clone();
            let result = phases::run(options).await?;
            std::fs::write(&out, serde_json::to_string_pretty(&result)?)?;
        }
        Command::Table {
            operator,
            bare,
            check,
        } => {
            anyhow::ensure!(
                operator.len() == bare.len(),
                "as many --bare as --operator: one each per round"
            );
            let read = |paths: &[PathBuf]| -> anyhow::Result<Vec<report::Measured>> {
                paths
                    .iter()
                    .map(|path| Ok(serde_json::from_slice(&std::fs::read(path)?)?))
                    .collect()
            };
            let (operator, bare) = (read(&operator)?, read(&bare)?);
            print!(
                "{}",
                report::table(&report::pool(&operator), &report::pool(&bare))
            );
            let by_round = report::by_round(&operator, &bare);
            if !by_round.is_empty() {
                print!("\n{by_round}");
            }
            if check {
                let problems: Vec<String> = operator
                    .iter()
                    .chain(&bare)
                    .flat_map(report::problems)
                    .collect();
                if !problems.is_empty() {
                    anyhow::bail!(
                        "the benchmark's figures are not sane:\n{}",
                        problems.join("\n")
                    );
                }
            }
        }
        Command::Seconds {
            audit_dir,
            namespace,
        } => print!("{}", seconds::table(&audit_dir, &namespace)?),
    }
    Ok(())
}
