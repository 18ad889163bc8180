//! Property tests for the pure core's invariants: the backoff curve and its jitter, determinism,
//! shutdowns, the one-live-pod rule, bounded history, the breaker's state machine, and no panics —
//! on arbitrary inputs, and along random walks through an agent's life.
//!
//! In `core_properties/`: the strategies (`arb.rs`, `arb_status.rs`, `arb_pod.rs`,
//! `arb_input.rs`), the backoff curve (`backoff.rs`), decisions on arbitrary inputs
//! (`decisions.rs`), and the random walks: their steps (`steps.rs`), the `World` they move
//! (`world.rs`) and the invariants checked along them (`walks.rs`).

use agent_supervisor::api::RestartPolicySpec;
use agent_supervisor::supervise::{Input, PolicyResolution};
use proptest::prelude::*;

const CASES: u32 = 256;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        // Failures are reported with their minimal input; nothing is written next to the tests.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[path = "core_properties/arb.rs"]
mod arb;
#[path = "core_properties/arb_input.rs"]
mod arb_input;
#[path = "core_properties/arb_pod.rs"]
mod arb_pod;
#[path = "core_properties/arb_status.rs"]
mod arb_status;
#[path = "core_properties/backoff.rs"]
mod backoff;
#[path = "core_properties/checkpoints.rs"]
mod checkpoints;
#[path = "common/clock.rs"]
mod clock;
#[path = "core_properties/decisions.rs"]
mod decisions;
#[path = "common/pods.rs"]
mod pods;
#[path = "common/sim.rs"]
mod sim;
#[path = "core_properties/spend.rs"]
mod spend;
#[path = "core_properties/stalls.rs"]
mod stalls;
#[path = "core_properties/steps.rs"]
mod steps;
#[path = "core_properties/walks.rs"]
mod walks;
#[path = "core_properties/world.rs"]
mod world;

fn policy_of(input: &Input) -> RestartPolicySpec {
    match &input.policy {
        PolicyResolution::Named(_, p) | PolicyResolution::NamespaceDefault(p) => p.clone(),
        PolicyResolution::BuiltIn | PolicyResolution::Missing(_) => RestartPolicySpec::default(),
    }
}

fn history_limit(input: &Input) -> usize {
    policy_of(input).history_limit.clamp(1, 50) as usize
}
