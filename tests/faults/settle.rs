//! Proof that the operator has settled once a story ends, where a fixed wait would only hope
//! so: every Agent and group gets a change that alters no decision (an Agent names the agent
//! container it already had; a group writes its window in other units) and the operator must
//! acknowledge each (its `observedGeneration`). An object's reconciles run one at a time, in the
//! order its changes arrive: once it acknowledged the change, every decision on it about what
//! came before has been made and written, and a late write over the end state would be in it.

use std::str::FromStr;

use agent_supervisor::api::{Agent, AgentGroup, Duration};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::steps::STEP;
use crate::support::{TestNamespace, eventually};

/// Waits until the operator has acknowledged a change of each of `agents` and `groups` that
/// alters none of its decisions.
pub async fn settle(ns: &TestNamespace, agents: &[&str], groups: &[&str]) {
    for &agent in agents {
        let generation = agent_touched(ns, agent).await;
        ns.wait_status_for(STEP, agent, "the settling change seen", |s| {
            s.observed_generation >= Some(generation)
        })
        .await;
    }
    for &group in groups {
        let generation = group_touched(ns, group).await;
        eventually(
            STEP,
            &format!("group {group} to see its settling change"),
            || {
                let ns = &ns;
                async move {
                    let status = ns.group_status(group).await;
                    (status.observed_generation >= Some(generation)).then_some(())
                }
            },
        )
        .await;
    }
}

/// Names the agent's first container as its agent container, or stops naming it: the first
/// container is the agent's either way. Returns the new generation.
async fn agent_touched(ns: &TestNamespace, name: &str) -> i64 {
    let api = ns.api::<Agent>();
    let agent = api.get(name).await.expect("read the agent");
    let template = agent.spec.template.get();
    let first = template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .expect("the template has a container");
    let named = match agent.spec.agent_container {
        None => Some(first),
        Some(named) if named == first => None,
        Some(other) => panic!("agent {name} names container {other}, not its first: no no-op"),
    };
    let patch = json!({ "spec": { "agentContainer": named } });
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("touch the agent");
    let generation = patched.metadata.generation.expect("a generation");
    assert!(generation > agent.metadata.generation.expect("a generation"));
    generation
}

/// Writes the group's window in other units (as seconds, or as milliseconds if it was written
/// as seconds). Returns the new generation.
async fn group_touched(ns: &TestNamespace, name: &str) -> i64 {
    let api = ns.api::<AgentGroup>();
    let group = api.get(name).await.expect("read the group");
    let before = group.metadata.generation.expect("a generation");
    let millis = group.spec.window.as_millis();
    for same in [format!("{}s", millis / 1000), format!("{millis}ms")] {
        if Duration::from_str(&same).ok() != Some(group.spec.window) {
            continue;
        }
        let patch = json!({ "spec": { "window": same } });
        let patched = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("touch the group");
        let generation = patched.metadata.generation.expect("a generation");
        if generation > before {
            return generation;
        }
    }
    panic!("group {name}: no other way to write its window");
}
