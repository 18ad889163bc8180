//! The operator against the real API server, scenario by scenario; the test plays the kubelet
//! (and the user, and sometimes the economy service).

#[path = "../support/mod.rs"]
mod support;

mod breaker;
mod budget;
mod checkpoints;
mod failures;
mod failures_io;
mod groups;
mod groups_escalation;
mod heartbeat;
mod operations;
mod outage;
mod ownership;
mod restarts;
mod shutdown;
mod steady;
mod storm;
mod teardown;
mod watches;

use serde_json::json;
use support::{Operator, TestNamespace};

/// A namespace with the CRDs installed and an operator watching it.
pub async fn setup() -> (TestNamespace, Operator) {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let operator = Operator::start(&ns.name).await;
    (ns, operator)
}

/// A policy with exact, short delays: exponential from `initial`, no jitter, breaker off.
pub fn fast_policy(initial: &str) -> serde_json::Value {
    json!({
        "backoff": { "type": "Exponential", "initialDelay": initial, "maxDelay": "1m", "jitter": 0.0 },
        "circuitBreaker": { "failureThreshold": 0 },
    })
}
