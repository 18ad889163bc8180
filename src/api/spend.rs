//! What an agent spends, as it reports it (`supervisor.dev/spend` on its heartbeat Lease, or
//! `spend` in its typed termination message), kept in its status across restarts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Time;

/// The Lease annotation an agent reports its current attempt's spend so far on, as JSON:
/// `{"cost": "0.42", "tokens": 18000}` (either may be left out).
pub const SPEND_ANNOTATION: &str = "supervisor.dev/spend";

/// An Agent's spend: every attempt's last report, each counted once, kept across restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpendStatus {
    /// The cost spent, a decimal in whatever unit the agent reports (and a budget uses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub cost: Option<String>,
    /// The tokens spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Since when: the first report counted.
    pub since: Time,
    /// The attempt whose latest report the totals hold, and that report: a later report of the
    /// same attempt adds only what it grew by.
    pub current: AttemptSpend,
}

/// One attempt's spend, as it last reported it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptSpend {
    /// The attempt.
    pub attempt: u32,
    /// Its cost so far, a decimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub cost: Option<String>,
    /// Its tokens so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}
