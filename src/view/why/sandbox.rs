//! `why` for an Agent whose Sandbox keeps it from starting (Ready reason `Sandbox...`).

use super::Why;
use crate::api::{Agent, AgentStatus, Phase};

/// Explains what blocks a Sandbox's agent, if something does; whether it did.
pub(super) fn blocked(agent: &Agent, status: &AgentStatus, why: &mut Why) -> bool {
    let Some(sandbox) = &agent.spec.sandbox_ref else {
        return false;
    };
    let Some(ready) = status.conditions.iter().find(|c| c.type_ == "Ready") else {
        return false;
    };
    if !ready.reason.starts_with("Sandbox") || matches!(status.phase, Some(Phase::Running)) {
        return false;
    }
    let (name, namespace, sandbox) = (&why.name, &why.namespace, &sandbox.name);
    let happened = format!(
        "Agent {name} supervises Sandbox {sandbox}: {}.",
        ready.message
    );
    let action = match ready.reason.as_str() {
        "SandboxRestartPolicy" => format!(
            "Set spec.podTemplate.spec.restartPolicy: Never in Sandbox {sandbox} (its next pod takes it):"
        ),
        "SandboxNotFound" => format!("Create Sandbox {sandbox} in namespace {namespace}:"),
        "SandboxExpired" => format!(
            "Move Sandbox {sandbox}'s spec.shutdownTime later (or remove it) to run it again:"
        ),
        "SandboxSuspended" => {
            format!("Set Sandbox {sandbox}'s spec.operatingMode back to Running:")
        }
        _ => "Install agent-sandbox, or run the operator with --sandboxes=true (chart: sandboxes.enabled=true).".to_string(),
    };
    let command = (ready.reason != "SandboxesUnavailable")
        .then(|| format!("kubectl edit sandbox {sandbox} -n {namespace}"));
    why.happened = happened;
    why.next = "The operator starts no attempt until that changes.".to_string();
    why.action = action;
    why.command = command;
    true
}
