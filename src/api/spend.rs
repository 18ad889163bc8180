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

/// What one attempt spent, as it last reported it (`restartHistory[].spend`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// Its cost, a decimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub cost: Option<String>,
    /// Its tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
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

/// A group's spend (`status.spend`): what its members reported, each member's growth counted
/// once. What was counted stays counted when a member leaves or its own window begins again;
/// with a budget `window`, the count begins again from zero when the window has run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSpend {
    /// The cost spent, a decimal in the unit the members report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub cost: Option<String>,
    /// The tokens spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Since when: the first spend counted, or the start of the budget's window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// Each member's total as last counted: a later look adds only what it grew by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub members: Vec<MemberSpend>,
}

/// A member's spend as its group last counted it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSpend {
    /// `Agent` or `AgentGroup`.
    pub kind: super::MemberKind,
    /// The member's name.
    #[schemars(length(max = 253))]
    pub name: String,
    /// The `since` of the member's own total: another one means the member counts anew (its own
    /// budget window began again), and all of its new total is added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// Its cost then, a decimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub cost: Option<String>,
    /// Its tokens then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// A spend budget (`RestartPolicy.spec.budget`, `AgentGroup.spec.budget`): when what an agent
/// (or a group's members together) reports spending reaches a maximum, its pod is stopped and it
/// shuts down (`Economic`, source `Budget`) until the budget is raised or its window moves on.
/// The budget trusts the agent's reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = budget_rules)]
pub struct Budget {
    /// The most it may cost, a decimal in the unit the agents report (such as `25.00`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{1,11}(\.[0-9]{1,9})?$"), length(max = 21))]
    pub max_cost: Option<String>,

    /// The most tokens it may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_tokens: Option<u64>,

    /// The spend counted is what was reported since the window began; when it has run this
    /// long, a new one begins (and an agent or group stopped by the budget resumes). Must be
    /// longer than 0s. Without it: the Agent's (or the group's) whole life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<super::Duration>,

    /// The share of a maximum at which `BudgetLow` is said (an Event, and the condition): above
    /// 0, at most 1. Default 0.8.
    #[serde(default = "warn_at")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub warn_at: f64,
}

fn warn_at() -> f64 {
    0.8
}

fn budget_rules(schema: &mut schemars::Schema) {
    super::duration::positive_when(
        schema,
        "window",
        "has(self.window)",
        "budget window must be longer than 0s",
    );
    super::duration::add_rule(
        schema,
        serde_json::json!({
            "rule": "!has(self.warnAt) || self.warnAt > 0.0",
            "message": "budget warnAt must be above 0 (and at most 1)",
            "fieldPath": ".warnAt",
            "reason": "FieldValueInvalid",
        }),
    );
    super::duration::add_rule(
        schema,
        serde_json::json!({
            "rule": "has(self.maxCost) || has(self.maxTokens)",
            "message": "a budget sets maxCost, maxTokens or both",
            "reason": "FieldValueRequired",
        }),
    );
}
