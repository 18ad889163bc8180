//! `kubectl agent`: the kubectl plugin of agent-supervisor. On the PATH as `kubectl-agent`,
//! kubectl runs it for `kubectl agent ...`.

fn main() -> std::process::ExitCode {
    agent_supervisor::cli::main()
}
