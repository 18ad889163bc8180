//! What a RestartPolicy makes of the progress and checkpoints agents report: how many
//! checkpoints are kept and when one is given up on, when a run that goes nowhere is stopped,
//! and whether a reset needs progress.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::{Duration, positive_when};

/// The checkpoints an agent reports (`supervisor.dev/checkpoint` on its heartbeat Lease, or
/// `checkpoint` in its typed termination message): each new attempt resumes from the newest one
/// that is not poisoned (`AGENT_CHECKPOINT`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointPolicy {
    /// How many checkpoints `status.checkpoints` keeps, newest first: 1 to 20. Default 5.
    #[serde(default = "checkpoints_keep")]
    #[schemars(range(min = 1, max = 20))]
    pub keep: u32,

    /// A checkpoint is poisoned once this many attempts in a row resumed from it and failed
    /// before reporting a newer one; the next attempt resumes from the one before it (or from
    /// scratch). Disruptions, held restarts and stops by the group do not count. 1 to 100.
    /// Default 3.
    #[serde(default = "checkpoints_max_failures")]
    #[schemars(range(min = 1, max = 100))]
    pub max_failures: u32,
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy {
            keep: checkpoints_keep(),
            max_failures: checkpoints_max_failures(),
        }
    }
}

/// The progress an agent reports (`supervisor.dev/progress` on its heartbeat Lease): a run
/// whose progress stops growing is stuck, however alive it looks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = progress_rules)]
pub struct ProgressPolicy {
    /// A Running agent whose reported progress has not grown for this long (counted from the
    /// end of its heartbeat's grace period, or from the last time its progress grew) is stuck:
    /// its pod is stopped and the attempt fails with reason `NoProgress`. Applies to agents with
    /// a heartbeat, whose Lease carries the progress. Must be longer than 0s. Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_timeout: Option<Duration>,

    /// When true, running for `resetAfter` resets the failure count and the backoff, and
    /// closes a HalfOpen breaker, only if the attempt's progress grew: a loop that runs long
    /// and crashes without getting anywhere keeps backing off. Default false.
    #[serde(default)]
    pub required_for_reset: bool,

    /// How far past the start of its stall clock (its last progress, or the end of its grace
    /// period) an agent that said a step will be slow (`supervisor.dev/expect-slow-until` on its
    /// Lease: the SDK's `expect_slow`) may go before `stallTimeout` judges it stuck. Must be
    /// longer than 0s. Default 6h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_extension: Option<Duration>,
}

impl ProgressPolicy {
    /// `maxExtension`, or its default of 6h.
    pub fn max_extension(&self) -> Duration {
        self.max_extension.unwrap_or(Duration::from_secs(6 * 3600))
    }
}

fn progress_rules(schema: &mut schemars::Schema) {
    positive_when(
        schema,
        "stallTimeout",
        "has(self.stallTimeout)",
        "stallTimeout must be longer than 0s",
    );
    positive_when(
        schema,
        "maxExtension",
        "has(self.maxExtension)",
        "maxExtension must be longer than 0s",
    );
}

fn checkpoints_keep() -> u32 {
    5
}

fn checkpoints_max_failures() -> u32 {
    3
}
