//! The operator against the real API server, scenario by scenario; the test plays the kubelet
//! (and the user, and sometimes the economy service).

#[path = "../support/mod.rs"]
mod support;

mod breaker;
mod budget;
mod checkpoints;
mod events;
mod failures;
mod failures_io;
mod groups;
mod groups_escalation;
mod heartbeat;
mod identity;
mod operations;
mod outage;
mod ownership;
mod restarts;
mod sandboxes_off;
mod shutdown;
mod spend;
mod steady;
mod teardown;
mod watches;
mod writes;

use serde_json::json;
use support::{Operator, TestNamespace};

/// A namespace with the CRDs installed and an operator watching it.
pub async fn setup() -> (TestNamespace, Operator) {
    setup_with(|_| ()).await
}

/// A namespace with the CRDs installed and an operator watching it, configured by `change`
/// (the namespace is already set).
pub async fn setup_with(
    change: impl FnOnce(&mut agent_supervisor::controller::Config),
) -> (TestNamespace, Operator) {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let mut config = agent_supervisor::controller::Config {
        namespaces: vec![ns.name.clone()],
        ..Default::default()
    };
    change(&mut config);
    let operator = Operator::start_with_config(Operator::admin_client().await, config);
    (ns, operator)
}

/// A namespace with the CRDs installed and an operator watching it that writes each status
/// change at once and sends each Event as it comes (`Operator::start_prompt`).
pub async fn setup_prompt() -> (TestNamespace, Operator) {
    setup_with(|config| *config = support::operator::prompt(&config.namespaces[0])).await
}

/// A policy with exact, short delays: exponential from `initial`, no jitter, breaker off.
pub fn fast_policy(initial: &str) -> serde_json::Value {
    json!({
        "backoff": { "type": "Exponential", "initialDelay": initial, "maxDelay": "1m", "jitter": 0.0 },
        "circuitBreaker": { "failureThreshold": 0 },
    })
}
