//! The outage breaker's decision, for one RestartPolicy: from its agents' failures and its open
//! outages, at time `now` — which outages open, which probe, which end. Pure, like `decide`.
//!
//! An outage opens when `agents` distinct agents fail with one fingerprint within `window`.
//! While it is open, agents failing with it hold their restarts (their own decision reads the
//! policy's status). After `holdFor` one held agent is restarted as the probe; if it survives,
//! the outage ends and the held agents restart; if it fails the same way, the hold doubles.

mod decider;
mod view;

use std::sync::Arc;

use jiff::Timestamp;

use crate::api::{FailureReason, Outage, OutagePolicy, OutageState, Time};

use decider::Decider;
pub use view::AgentTraits;

/// At most this many outages are open per policy; more distinct failures wait for a slot.
pub const MAX_OUTAGES: usize = 16;
/// An outage's message is cut to this many bytes.
const MESSAGE_LIMIT: usize = 256;
/// How often a probe is looked at while its pod is not seen running, and while it runs if it can
/// prove itself (readiness, heartbeat).
const PROBE_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything `decide_outages` looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct OutageInput {
    pub now: Timestamp,
    /// The policy's `spec.outage`; `None`: detection is off and open outages end.
    pub config: Option<OutagePolicy>,
    /// The policy's `resetAfter`: how long a probe must run to end an outage.
    pub reset_after: std::time::Duration,
    /// The breaker's `maxOpenDuration`: the longest a doubled hold grows.
    pub max_hold: std::time::Duration,
    /// The open outages, as the policy's status has them.
    pub outages: Vec<Outage>,
    /// The agents using the policy.
    pub agents: Vec<AgentOutageView>,
}

/// What the outage decision needs of one agent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentOutageView {
    pub name: String,
    pub attempt: u32,
    /// Its failures, newest first, that may declare or feed an outage (see [`AgentOutageView::of`]).
    pub failures: Vec<FailureSeen>,
    /// The fingerprint its restart is held for, and since when.
    pub held: Option<(String, Timestamp)>,
    /// It may be restarted as a probe: held, and not suspended.
    pub available: bool,
    /// Since when its current attempt's pod runs.
    pub running_since: Option<Timestamp>,
    /// Its current attempt proved itself: ready (with a readiness probe) and renewing its
    /// heartbeat (with a heartbeat).
    pub proven: bool,
    /// It has a readiness probe or a heartbeat: `proven` can come before `resetAfter`.
    pub provable: bool,
}

/// One failure of an agent.
#[derive(Clone, Debug, PartialEq)]
pub struct FailureSeen {
    pub fingerprint: String,
    pub at: Timestamp,
    /// The attempt that failed.
    pub attempt: u32,
    pub reason: FailureReason,
    pub message: Option<Arc<str>>,
    /// A fresh failure (not one already held for an outage): only these declare a new outage.
    pub fresh: bool,
}

/// The outcome: the policy's outages after the decision, Events about them, and when to look
/// again.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutagePlan {
    pub outages: Vec<Outage>,
    pub events: Vec<OutageEvent>,
    pub requeue_at: Option<Timestamp>,
}

/// An Event on the RestartPolicy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutageEvent {
    pub reason: OutageEventReason,
    pub note: String,
    /// The agent it concerns (the probe), if any: a "related" object, so that Events about
    /// different probes are told apart instead of counted as one.
    pub agent: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutageEventReason {
    /// Agents failed alike: an outage opened (Warning).
    OutageDetected,
    /// One held agent is restarted as the probe.
    OutageProbe,
    /// The probe failed the same way: the hold doubles (Warning).
    OutageProbeFailed,
    /// The outage ended: held agents restart.
    OutageEnded,
}

impl OutageEventReason {
    /// Every reason, in declaration order.
    pub const ALL: [OutageEventReason; 4] = [
        OutageEventReason::OutageDetected,
        OutageEventReason::OutageProbe,
        OutageEventReason::OutageProbeFailed,
        OutageEventReason::OutageEnded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OutageEventReason::OutageDetected => "OutageDetected",
            OutageEventReason::OutageProbe => "OutageProbe",
            OutageEventReason::OutageProbeFailed => "OutageProbeFailed",
            OutageEventReason::OutageEnded => "OutageEnded",
        }
    }

    pub fn is_warning(self) -> bool {
        matches!(
            self,
            OutageEventReason::OutageDetected | OutageEventReason::OutageProbeFailed
        )
    }
}

/// Decides the policy's outages at `input.now`. The same input always gives the same plan.
pub fn decide_outages(input: &OutageInput) -> OutagePlan {
    let mut d = Decider {
        input,
        now: Timestamp::from_second(input.now.as_second()).unwrap_or(input.now),
        plan: OutagePlan::default(),
    };
    let Some(config) = &input.config else {
        for outage in &input.outages {
            d.ended(
                outage,
                "outage detection was turned off in the policy".to_string(),
            );
        }
        return d.plan;
    };
    for outage in &input.outages {
        if let Some(kept) = d.step(config, outage.clone()) {
            d.plan.outages.push(kept);
        }
    }
    d.detect(config);
    d.plan
}

fn holding(o: &mut Outage, next: Timestamp) {
    o.state = OutageState::Holding;
    o.probe_agent = None;
    o.probe_attempt = None;
    o.probe_started_at = None;
    o.next_probe_at = Some(Time(next));
}

/// The hold after `failed` failed probes: `holdFor` doubled for each, up to `max_hold` (or
/// `holdFor`, if that is longer).
pub fn hold(
    config: &OutagePolicy,
    failed: u32,
    max_hold: std::time::Duration,
) -> std::time::Duration {
    let base = config.hold_for.as_std();
    let cap = max_hold.max(base);
    base.checked_mul(2u32.saturating_pow(failed.min(31)))
        .unwrap_or(cap)
        .min(cap)
}

fn sub(t: Timestamp, d: std::time::Duration) -> Timestamp {
    let d = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    t.checked_sub(d).unwrap_or(Timestamp::MIN)
}

/// `s` cut to at most `limit` bytes on a character boundary.
fn cut(s: &str, limit: usize) -> String {
    super::classify::truncate_to(s.to_string(), limit)
}
