//! `RestartPolicy`: how the agents that use it are restarted — backoff, limits, circuit breaker
//! and the rules that sort failures into restarts, stops and shutdowns.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::{Duration, not_longer_than, positive_when};
use super::{Condition, FailureReason, conditions_schema};

/// How agents that use this policy are restarted when they fail.
// kube's `printcolumn(...)` repeats the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "supervisor.dev",
    version = "v1alpha1",
    kind = "RestartPolicy",
    plural = "restartpolicies",
    shortname = "rsp",
    category = "supervisor",
    namespaced,
    status = "RestartPolicyStatus",
    doc = "How the Agents that use it are restarted when they fail: backoff, limits, circuit breaker and rules.",
    printcolumn(name = "Backoff", type_ = "string", json_path = ".spec.backoff.type"),
    printcolumn(
        name = "Initial",
        type_ = "string",
        json_path = ".spec.backoff.initialDelay"
    ),
    printcolumn(name = "Max", type_ = "string", json_path = ".spec.backoff.maxDelay"),
    printcolumn(
        name = "Breaker",
        type_ = "integer",
        json_path = ".spec.circuitBreaker.failureThreshold"
    ),
    printcolumn(name = "Agents", type_ = "integer", json_path = ".status.agents"),
    printcolumn(
        name = "Outage",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Outage\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RestartPolicySpec {
    /// How long to wait before each restart.
    #[serde(default)]
    pub backoff: Backoff,

    /// Running this long without a failure resets `consecutiveFailures` and the backoff, and
    /// closes a HalfOpen circuit breaker. Default 10m.
    #[serde(default = "defaults::reset_after")]
    pub reset_after: Duration,

    /// The most restarts allowed within a time window before the supervisor gives up.
    #[serde(default)]
    pub limits: Limits,

    /// Stops restarting an agent that keeps failing, and probes it again later.
    #[serde(default)]
    pub circuit_breaker: CircuitBreakerPolicy,

    /// A pod must be Running within this long of its creation, or it fails with reason
    /// `StartupTimeout`. Default 10m.
    #[serde(default = "defaults::startup_timeout")]
    pub startup_timeout: Duration,

    /// How many entries `status.restartHistory` keeps, newest first: 1 to 50. Default 10.
    #[serde(default = "defaults::history_limit")]
    #[schemars(range(min = 1, max = 50))]
    pub history_limit: u32,

    /// Ordered rules; the first that matches a failure decides what happens. A failure that no
    /// rule matches gets the default: exit code 0 is a `VoluntaryShutdown`, `Evicted`,
    /// `Preempted` and `NodeLost` are `Ignore`d, and everything else is a `Restart`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub rules: Vec<Rule>,

    /// The longest wait an agent may ask for with `retryAfter` in its termination message;
    /// longer requests are cut to this. Default 1h.
    #[serde(default = "defaults::max_retry_after")]
    pub max_retry_after: Duration,

    /// Declares an outage when many agents using this policy fail the same way at once: their
    /// restarts are held, and one probe tests whether the cause has passed. Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outage: Option<super::OutagePolicy>,

    /// What is kept of the checkpoints agents report, and when one is given up on.
    #[serde(default)]
    pub checkpoints: super::CheckpointPolicy,

    /// What the progress agents report means for their supervision: a stall is a failure, and
    /// a reset may require progress. Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<super::ProgressPolicy>,

    /// How much each Agent using the policy may spend, as it reports it. None when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::Budget>,
}

impl Default for RestartPolicySpec {
    /// The built-in policy: what an agent gets with no RestartPolicy at all.
    fn default() -> Self {
        RestartPolicySpec {
            backoff: Backoff::default(),
            reset_after: defaults::reset_after(),
            limits: Limits::default(),
            circuit_breaker: CircuitBreakerPolicy::default(),
            startup_timeout: defaults::startup_timeout(),
            history_limit: defaults::history_limit(),
            rules: Vec::new(),
            max_retry_after: defaults::max_retry_after(),
            outage: None,
            checkpoints: super::CheckpointPolicy::default(),
            progress: None,
            budget: None,
        }
    }
}

/// The delay before each restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = backoff_rules)]
pub struct Backoff {
    /// `Never` (do not restart failures), `Immediate`, `Linear` (initialDelay × n) or
    /// `Exponential` (initialDelay × multiplier^(n−1)), where n counts consecutive failures.
    /// Default Exponential.
    #[serde(rename = "type", default)]
    pub kind: BackoffType,

    /// The first delay. Default 10s.
    #[serde(default = "defaults::initial_delay")]
    pub initial_delay: Duration,

    /// No delay is longer than this, before jitter. Default 5m.
    #[serde(default = "defaults::max_delay")]
    pub max_delay: Duration,

    /// Growth per consecutive failure, for Exponential: at least 1. Default 2.0.
    #[serde(default = "defaults::multiplier")]
    #[schemars(range(min = 1.0))]
    pub multiplier: f64,

    /// Spread each delay by a factor drawn uniformly from [1 − jitter, 1 + jitter], so agents
    /// that fail together do not restart together. From 0 up to (not including) 1. Default 0.25.
    #[serde(default = "defaults::jitter")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self >= 0.0 && self < 1.0",
        "message": "jitter must be a fraction from 0 up to (not including) 1, such as 0.25"
    }]))]
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            kind: BackoffType::default(),
            initial_delay: defaults::initial_delay(),
            max_delay: defaults::max_delay(),
            multiplier: defaults::multiplier(),
            jitter: defaults::jitter(),
        }
    }
}

/// How the delay grows with consecutive failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BackoffType {
    /// Do not restart after a failure: the agent is `Stopped`. Disruptions (`Ignore` rules)
    /// and manual restarts still start a new pod.
    Never,
    /// Restart at once.
    Immediate,
    /// initialDelay × n.
    Linear,
    /// initialDelay × multiplier^(n−1).
    #[default]
    Exponential,
}

/// The restart limit: more than `maxRestarts` restarts within `window` and the supervisor gives
/// up (phase `Stopped`, reason `RestartLimitExceeded`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = limits_rules)]
pub struct Limits {
    /// Restarts allowed within `window`; 0 means unlimited. At most 1000. Default 0.
    #[serde(default)]
    #[schemars(range(max = 1000))]
    pub max_restarts: u32,

    /// The sliding window `maxRestarts` counts in. Default 1h.
    #[serde(default = "defaults::window")]
    pub window: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_restarts: 0,
            window: defaults::window(),
        }
    }
}

/// The circuit breaker: after `failureThreshold` consecutive failures it opens, and no restart
/// happens until one probe restart at the end of the open duration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = breaker_rules)]
pub struct CircuitBreakerPolicy {
    /// Consecutive failures that open the breaker; 0 disables it. Default 5.
    #[serde(default = "defaults::failure_threshold")]
    pub failure_threshold: u32,

    /// How long the breaker stays Open before one HalfOpen probe restart. Default 5m.
    #[serde(default = "defaults::open_duration")]
    pub open_duration: Duration,

    /// Each re-trip without recovery multiplies the open duration by this: at least 1.
    /// Default 2.0.
    #[serde(default = "defaults::multiplier")]
    #[schemars(range(min = 1.0))]
    pub open_duration_multiplier: f64,

    /// The open duration never grows past this. Default 1h.
    #[serde(default = "defaults::max_open_duration")]
    pub max_open_duration: Duration,
}

impl Default for CircuitBreakerPolicy {
    fn default() -> Self {
        CircuitBreakerPolicy {
            failure_threshold: defaults::failure_threshold(),
            open_duration: defaults::open_duration(),
            open_duration_multiplier: defaults::multiplier(),
            max_open_duration: defaults::max_open_duration(),
        }
    }
}

/// A rule: when a failure matches every selector given, take `action`. A rule with no selector
/// matches every failure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Matches failures by the container's exit code. A failure without an exit code (such as
    /// `HeartbeatLost`) never matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_codes: Option<ExitCodeSelector>,

    /// Matches failures whose reason is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub reasons: Vec<FailureReason>,

    /// What to do with a matching failure.
    pub action: RuleAction,
}

/// Selects exit codes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExitCodeSelector {
    /// `In`: the exit code is one of `values`; `NotIn`: it is none of them.
    pub operator: ExitCodeOperator,

    /// Exit codes from 0 to 255.
    #[schemars(length(min = 1, max = 256), inner(range(min = 0, max = 255)))]
    pub values: Vec<i32>,
}

/// How `ExitCodeSelector.values` is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ExitCodeOperator {
    In,
    NotIn,
}

/// What a rule does with a failure it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum RuleAction {
    /// Restart with backoff; counts toward the limits and the circuit breaker.
    Restart,
    /// Do not restart: the agent is `Stopped` until reset.
    Stop,
    /// Record a voluntary shutdown in `status.shutdown` and never restart.
    VoluntaryShutdown,
    /// Record an economic shutdown in `status.shutdown` and never restart.
    EconomicShutdown,
    /// Restart at once, counting toward nothing.
    Ignore,
}

/// What the operator observed of a RestartPolicy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestartPolicyStatus {
    /// The generation last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Accepted`: the policy is valid and in use. `Outage`: an outage is open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,

    /// How many Agents use this policy.
    #[serde(default)]
    pub agents: u32,

    /// Open outages, one per fingerprint; an entry is removed when its outage ends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub outages: Vec<super::Outage>,
}

fn backoff_rules(schema: &mut schemars::Schema) {
    not_longer_than(schema, "initialDelay", "maxDelay");
}

fn breaker_rules(schema: &mut schemars::Schema) {
    not_longer_than(schema, "openDuration", "maxOpenDuration");
}

fn limits_rules(schema: &mut schemars::Schema) {
    positive_when(
        schema,
        "window",
        "has(self.maxRestarts) && self.maxRestarts > 0",
        "window must be longer than 0s when maxRestarts is set",
    );
}

/// The defaults, one place: the schema, `Default` and the docs all read these.
pub mod defaults {
    use super::Duration;

    pub fn reset_after() -> Duration {
        Duration::from_secs(600)
    }
    pub fn startup_timeout() -> Duration {
        Duration::from_secs(600)
    }
    pub fn history_limit() -> u32 {
        10
    }
    pub fn initial_delay() -> Duration {
        Duration::from_secs(10)
    }
    pub fn max_delay() -> Duration {
        Duration::from_secs(300)
    }
    pub fn multiplier() -> f64 {
        2.0
    }
    pub fn jitter() -> f64 {
        0.25
    }
    pub fn window() -> Duration {
        Duration::from_secs(3600)
    }
    pub fn failure_threshold() -> u32 {
        5
    }
    pub fn open_duration() -> Duration {
        Duration::from_secs(300)
    }
    pub fn max_open_duration() -> Duration {
        Duration::from_secs(3600)
    }
    pub fn max_retry_after() -> Duration {
        Duration::from_secs(3600)
    }
}
