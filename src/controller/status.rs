//! Record: the Agent's status, written with server-side apply under the operator's field
//! manager, only when it changed, and only if the Agent is still what the decision saw.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::error::RecordError;
use super::{Context, FIELD_MANAGER};
use crate::api::{Agent, AgentStatus};
use crate::supervise::Plan;
use crate::supervise::conditions::OWNED;

/// Writes what the plan changed. A shutdown the operator records (or its own budget shutdown it
/// lifts) goes first, as a merge patch of that one field (so the operator's applied status never
/// owns it, and never removes one written by someone else); then the rest by server-side apply, with only the conditions the
/// operator owns (others' conditions are theirs to change and remove). Both carry the
/// resourceVersion the decision was made on: a decision made on a stale cache is refused (409)
/// and made again. Returns the Agent as written, if anything was.
pub async fn record(
    agent: &Agent,
    before: &AgentStatus,
    plan: &Plan,
    ctx: &Context,
) -> Result<Option<Agent>, RecordError> {
    let api: Api<Agent> =
        Api::namespaced(ctx.client.clone(), &agent.namespace().unwrap_or_default());
    let name = agent.name_any();
    let namespace = agent.namespace().unwrap_or_default();
    let mut resource_version = agent.resource_version();
    let writes = plan.record_shutdown.is_some()
        || plan.clear_shutdown
        || !same_except_shutdown(&plan.status, before);
    if let (true, Some(version)) = (writes, &resource_version) {
        // Until the cache holds this write, nothing is done on the version it was made on.
        ctx.own_writes.writing(&namespace, &name, version);
    }

    // A write the server refused wrote nothing: there is nothing to wait for.
    let refused = |e: kube::Error| {
        if matches!(e, kube::Error::Api(_)) {
            ctx.own_writes.forget(&namespace, &name);
        }
        RecordError(e)
    };

    let shutdown = match (&plan.record_shutdown, plan.clear_shutdown) {
        (Some(shutdown), _) => Some(serde_json::to_value(shutdown).expect("serializes")),
        (None, true) => Some(serde_json::Value::Null),
        (None, false) => None,
    };
    if let Some(shutdown) = shutdown {
        let patch = json!({
            "metadata": { "resourceVersion": resource_version },
            "status": { "shutdown": shutdown },
        });
        let params = super::patch_params();
        let updated = api
            .patch_status(&name, &params, &Patch::Merge(&patch))
            .await
            .map_err(refused)?;
        resource_version = updated.resource_version();
        if let Some(version) = &resource_version {
            // The write that follows is made on this version.
            ctx.own_writes.writing(&namespace, &name, version);
        }
    }

    if !writes {
        return Ok(None);
    }
    let mut applied = serde_json::to_value(&plan.status).expect("a status serializes");
    if let Some(fields) = applied.as_object_mut() {
        fields.remove("shutdown");
        if let Some(serde_json::Value::Array(conditions)) = fields.get_mut("conditions") {
            conditions.retain(|c| c["type"].as_str().is_some_and(|t| OWNED.contains(&t)));
        }
    }
    let patch = json!({
        "apiVersion": "supervisor.dev/v1alpha1",
        "kind": "Agent",
        "metadata": { "name": name, "resourceVersion": resource_version },
        "status": applied,
    });
    let written = api
        .patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(refused)?;
    Ok(Some(written))
}

/// Equal but for `shutdown` (which this write never carries). Copies nothing in the common case.
fn same_except_shutdown(a: &AgentStatus, b: &AgentStatus) -> bool {
    if a.shutdown == b.shutdown {
        return a == b;
    }
    let strip = |s: &AgentStatus| AgentStatus {
        shutdown: None,
        ..s.clone()
    };
    strip(a) == strip(b)
}
