//! An outage: three agents fail alike, their policy opens an outage, holds their restarts, probes
//! with one of them and, once the probe has run, lets the others go. The outage is written on
//! the policy, each hold and release on its agent: an operator killed between any two of those
//! writes must still restart every agent exactly once, and count none of it.

use serde_json::json;

use crate::groups::restarted_once;
use crate::scenarios::Scenario;
use crate::steps::Run;
use agent_supervisor::api::Trigger;

const AGENTS: [&str; 3] = ["north", "south", "west"];

pub const OUTAGE: Scenario = Scenario {
    name: "outage-hold-probe-release",
    agents: &AGENTS,
    groups: &[],
    pending: false,
    drive: |run| Box::pin(outage(run)),
    expect: |end| {
        AGENTS
            .iter()
            .flat_map(|agent| restarted_once(end, agent, Trigger::Outage))
            .collect()
    },
};

/// A slow own backoff (no agent restarts on its own), no breaker, an outage at three agents,
/// held 2 s; the probe must run 3 s.
fn outage_policy() -> serde_json::Value {
    json!({
        "backoff": { "type": "Exponential", "initialDelay": "5m", "maxDelay": "5m", "jitter": 0.0 },
        "circuitBreaker": { "failureThreshold": 0 },
        "resetAfter": "3s",
        "outage": { "agents": 3, "window": "1m", "holdFor": "2s" },
    })
}

async fn outage(run: &Run) {
    run.create_policy(outage_policy()).await;
    for agent in AGENTS {
        run.on(agent).create_agent(json!({})).await;
    }
    for agent in AGENTS {
        run.on(agent).running(1).await;
    }
    run.focus();
    for (i, agent) in AGENTS.iter().enumerate() {
        let message = format!("provider returned 503 (request req_{i:04}a7c3e9f1d2)");
        run.on(agent).end(1, 1, "Error", &message).await;
    }
    for agent in AGENTS {
        run.on(agent).running(2).await;
        run.on(agent)
            .until("restarted once", |s| s.restart_count >= 1)
            .await;
    }
    for agent in AGENTS {
        run.on(agent).pod_stopped(1).await;
    }
}
