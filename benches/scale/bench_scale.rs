//! The measuring side of `make bench-scale` (hack/bench-scale.sh runs it; see
//! docs/performance.md).
//!
//!     bench-scale warm-up --namespace NS --agents N
//!         makes N Agents and their pods directly in NS until all run, then deletes NS: the
//!         fresh control plane's first burst, paid before anyone is measured;
//!     bench-scale run --controller NAME --pid PID --user-agent PREFIX --audit-dir DIR ...
//!         runs the phases against a controller already started (pid PID, watching the
//!         namespaces PREFIX-converge and PREFIX-storm) and writes what it measured as JSON;
//!     bench-scale table --operator FILE --bare FILE [--storm-only FILE] [--check]
//!         prints the comparison as one markdown table, and a storm-only run's storm (such as
//!         the operator's at its restart budget's defaults) in one more; --check fails unless
//!         every figure is present and sane (the smoke run of `make test`), never on a speed
//!         (`check`). Given
//!         several rounds (--operator and --bare once each per round, in the same order), the
//!         table pools them (`pool::pool`) and a second one gives each round's storm apart;
//!     bench-scale seconds --audit-dir DIR --namespace NS
//!         prints NS's restarts and requests second by second, from the audit log (which seconds
//!         made a storm's percentiles, and who sent what in them).
//!
//! Agent created → its pod created is timed by the API server's clock, from the audit log. Every
//! other time comes from this process's clock as it sees the watch events of ONE pod watch per
//! phase (the API server orders them): the Failed update of a pod is always seen before the
//! creation of its replacement. The status lag is timed between that pod watch and ONE Agent
//! watch per phase (`agent_watch`): a pod seen Failed → its attempt first seen in its Agent's
//! `status.restartHistory`, an Agent created → a phase first seen in its status. The storm's
//! requests are counted in its window and until the controller is idle after it (`idle`).

mod agent_watch;
mod audit;
mod check;
mod finished;
mod idle;
mod phases;
mod pod_watch;
mod pool;
mod procfs;
mod report;
mod seconds;
mod storm;
mod table;
mod table_storm;
mod warm_up;
mod watch;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    WarmUp(warm_up::WarmUp),
    Run(phases::Options),
    Table {
        /// One run's figures per round.
        #[arg(long, required = true)]
        operator: Vec<PathBuf>,
        /// One run's figures per round, in the order of --operator's.
        #[arg(long, required = true)]
        bare: Vec<PathBuf>,
        /// One storm-only run's figures per round (such as the operator at its restart
        /// budget's defaults), given a table of its own against --bare's storms; or none.
        #[arg(long)]
        storm_only: Vec<PathBuf>,
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
        Command::WarmUp(options) => warm_up::warm_up(options).await?,
        Command::Run(options) => {
            let out = options.out.clone();
            let result = phases::run(options).await?;
            std::fs::write(&out, serde_json::to_string_pretty(&result)?)?;
        }
        Command::Table {
            operator,
            bare,
            storm_only,
            check,
        } => {
            anyhow::ensure!(
                operator.len() == bare.len(),
                "as many --bare as --operator: one each per round"
            );
            anyhow::ensure!(
                storm_only.is_empty() || storm_only.len() == bare.len(),
                "as many --storm-only as --bare, or none: one each per round"
            );
            let read = |paths: &[PathBuf]| -> anyhow::Result<Vec<report::Measured>> {
                paths
                    .iter()
                    .map(|path| Ok(serde_json::from_slice(&std::fs::read(path)?)?))
                    .collect()
            };
            let (operator, bare, storm_only) = (read(&operator)?, read(&bare)?, read(&storm_only)?);
            print!(
                "{}",
                table::table(&pool::pool(&operator), &pool::pool(&bare))
            );
            let by_round = table::by_round(&operator, &bare);
            if !by_round.is_empty() {
                print!("\n{by_round}");
            }
            if !storm_only.is_empty() {
                let storm = table::storm_table(&pool::pool(&storm_only), &pool::pool(&bare));
                print!("\n{storm}");
            }
            if check {
                let problems: Vec<String> = operator
                    .iter()
                    .chain(&bare)
                    .chain(&storm_only)
                    .flat_map(check::problems)
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
