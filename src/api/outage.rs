//! Outages: many agents using one RestartPolicy failing the same way at once. The policy's
//! `spec.outage` says when that is an outage; its `status.outages` says which are open.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::{Duration, positive_when};
use super::{FailureReason, Time};

/// When agents failing alike are an outage: at least `agents` distinct agents using the policy
/// failing with the same fingerprint within `window`. Their restarts are then held, one agent
/// probes after `holdFor`, and all restart (within the restart budget) once the probe survives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = outage_rules)]
pub struct OutagePolicy {
    /// Distinct agents failing with the same fingerprint that make an outage: 2 to 10000.
    #[schemars(range(min = 2, max = 10000))]
    pub agents: u32,

    /// The sliding window those failures must fall within. Default 1m.
    #[serde(default = "defaults::window")]
    pub window: Duration,

    /// How long restarts are held before one agent is restarted as a probe. Each failed probe
    /// doubles it, up to the circuit breaker's `maxOpenDuration`. Default 5m.
    #[serde(default = "defaults::hold_for")]
    pub hold_for: Duration,
}

/// An open outage: agents that failed with `fingerprint` hold their restarts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Outage {
    /// The failures' fingerprint (an agent's `lastFailure.fingerprint`).
    #[schemars(length(min = 16, max = 16))]
    pub fingerprint: String,
    /// The failures' reason.
    pub reason: FailureReason,
    /// The message of the latest of them, at most 256 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub message: Option<String>,
    /// When the outage was declared.
    pub since: Time,
    /// Distinct agents that failed with it, from the window before it was declared on.
    pub agents: u32,
    pub state: OutageState,
    /// The agent restarted as the probe (state `Probing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_agent: Option<String>,
    /// The probe agent's attempt when it was chosen: its probe is the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_attempt: Option<u32>,
    /// When the probe was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_started_at: Option<Time>,
    /// When the next probe is chosen (state `Holding`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_probe_at: Option<Time>,
    /// Probes that failed the same way: each doubles the hold.
    #[serde(default)]
    pub failed_probes: u32,
}

/// Where an outage is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum OutageState {
    /// Restarts are held until `nextProbeAt`.
    Holding,
    /// One agent runs as a probe; the rest stay held.
    Probing,
}

impl OutageState {
    pub fn as_str(self) -> &'static str {
        match self {
            OutageState::Holding => "Holding",
            OutageState::Probing => "Probing",
        }
    }
}

fn outage_rules(schema: &mut schemars::Schema) {
    positive_when(schema, "window", "true", "window must be longer than 0s");
    positive_when(schema, "holdFor", "true", "holdFor must be longer than 0s");
}

/// The defaults of `spec.outage`.
pub mod defaults {
    use super::Duration;

    pub fn window() -> Duration {
        Duration::from_secs(60)
    }
    pub fn hold_for() -> Duration {
        Duration::from_secs(300)
    }
}
