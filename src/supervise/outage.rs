//! The outage breaker's decision, for one RestartPolicy: from its agents' failures and its open
//! outages, at time `now` — which outages open, which probe, which end. Pure, like `decide`.
//!
//! An outage opens when `agents` distinct agents fail with one fingerprint within `window`.
//! While it is open, agents failing with it hold their restarts (their own decision reads the
//! policy's status). After `holdFor` one held agent is restarted as the probe; if it survives,
//! the outage ends and the held agents restart; if it fails the same way, the hold doubles.

use std::sync::Arc;

use jiff::Timestamp;

use super::classify::add;
use super::input::{LeaseFacts, PodFacts, PodPhase};
use crate::api::{
    AgentStatus, FailureClass, FailureReason, Outage, OutagePolicy, OutageState, Phase, Time,
    Trigger,
};

/// At most this many outages are open per policy; more distinct failures wait for a slot.
pub const MAX_OUTAGES: usize = 16;
/// An outage's message is cut to this many bytes.
const MESSAGE_LIMIT: usize = 256;
/// How often a running probe that can prove itself (readiness, heartbeat) is looked at.
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

struct Decider<'a> {
    input: &'a OutageInput,
    now: Timestamp,
    plan: OutagePlan,
}

impl Decider<'_> {
    /// An open outage, one step on. `None`: it ended.
    fn step(&mut self, config: &OutagePolicy, mut o: Outage) -> Option<Outage> {
        let from = sub(o.since.0, config.window.as_std());
        o.agents = o.agents.max(self.affected(&o.fingerprint, from, false));
        if o.state == OutageState::Probing {
            match self.probe_outcome(&o) {
                Probe::Waiting(at) => {
                    if let Some(at) = at {
                        self.requeue(at);
                    }
                    return Some(o);
                }
                Probe::Survived(how) => {
                    let held = self.held_for(&o.fingerprint).count();
                    let note = format!(
                        "Outage {} ended: probe agent {} {how}; {held} held agent(s) restart within the restart budget",
                        o.fingerprint,
                        o.probe_agent.as_deref().unwrap_or_default()
                    );
                    self.event_on(
                        OutageEventReason::OutageEnded,
                        note,
                        o.probe_agent.as_deref(),
                    );
                    return None;
                }
                Probe::FailedAlike => {
                    o.failed_probes = o.failed_probes.saturating_add(1);
                    let hold = hold(config, o.failed_probes, self.input.max_hold);
                    let next = add(self.now, hold);
                    let note = format!(
                        "Outage {}: probe agent {} failed the same way; holding restarts for {}, next probe at {next}",
                        o.fingerprint,
                        o.probe_agent.as_deref().unwrap_or_default(),
                        crate::api::Duration::from(hold)
                    );
                    self.event_on(
                        OutageEventReason::OutageProbeFailed,
                        note,
                        o.probe_agent.as_deref(),
                    );
                    holding(&mut o, next);
                }
                Probe::Lost(why) => {
                    let note = format!(
                        "Outage {}: probe agent {} {why}; choosing another",
                        o.fingerprint,
                        o.probe_agent.as_deref().unwrap_or_default()
                    );
                    self.event_on(
                        OutageEventReason::OutageProbe,
                        note,
                        o.probe_agent.as_deref(),
                    );
                    holding(&mut o, self.now);
                }
            }
        }
        let due = o.next_probe_at.as_ref().map_or(self.now, |t| t.0);
        if due > self.now {
            self.requeue(due);
            return Some(o);
        }
        let held = self.held_for(&o.fingerprint).count();
        let probe = self
            .held_for(&o.fingerprint)
            .filter(|a| a.available)
            .min_by_key(|a| (a.held.as_ref().map(|h| h.1), a.name.as_str()));
        let Some(probe) = probe else {
            let note = format!(
                "Outage {} ended: no agent is held for it any more",
                o.fingerprint
            );
            self.event(OutageEventReason::OutageEnded, note);
            return None;
        };
        o.state = OutageState::Probing;
        o.probe_agent = Some(probe.name.clone());
        o.probe_attempt = Some(probe.attempt);
        o.probe_started_at = Some(Time(self.now));
        o.next_probe_at = None;
        let note = format!(
            "Outage {}: restarting agent {} as a probe ({held} agent(s) held)",
            o.fingerprint, probe.name
        );
        let name = probe.name.clone();
        self.event_on(OutageEventReason::OutageProbe, note, Some(&name));
        Some(o)
    }

    /// How the probe of a `Probing` outage is doing.
    fn probe_outcome(&self, o: &Outage) -> Probe {
        let agent = o
            .probe_agent
            .as_ref()
            .and_then(|name| self.input.agents.iter().find(|a| &a.name == name));
        let (Some(agent), Some(attempt), Some(started)) =
            (agent, o.probe_attempt, o.probe_started_at.as_ref())
        else {
            return Probe::Lost("is gone");
        };
        if agent.attempt <= attempt {
            // Not started yet (the restart budget, its group): it is still held for this outage,
            // unless something else became of it.
            return if agent.available || agent.held.is_none() {
                Probe::Waiting(None)
            } else {
                Probe::Lost("can no longer be restarted")
            };
        }
        let failed = agent
            .failures
            .iter()
            .find(|f| f.attempt > attempt && f.at >= started.0);
        if let Some(failure) = failed {
            return if failure.fingerprint == o.fingerprint {
                Probe::FailedAlike
            } else {
                Probe::Lost("failed another way")
            };
        }
        if agent.proven {
            return Probe::Survived("proved itself ready".to_string());
        }
        match agent.running_since {
            Some(since) => {
                let done = add(since, self.input.reset_after);
                if done <= self.now {
                    let ran = crate::api::Duration::from(self.input.reset_after);
                    return Probe::Survived(format!("ran {ran} without failing"));
                }
                let poll = agent.provable.then(|| add(self.now, PROBE_POLL));
                Probe::Waiting(Some(poll.map_or(done, |p| p.min(done))))
            }
            None => Probe::Waiting(None),
        }
    }

    /// New outages: fingerprints with `agents` distinct agents failing freshly within `window`.
    fn detect(&mut self, config: &OutagePolicy) {
        let from = sub(self.now, config.window.as_std());
        let mut counts: std::collections::BTreeMap<&str, (u32, &FailureSeen)> = Default::default();
        for agent in &self.input.agents {
            let mut seen: Vec<&str> = Vec::new();
            for f in agent.failures.iter().filter(|f| f.fresh && f.at >= from) {
                if seen.contains(&f.fingerprint.as_str()) {
                    continue;
                }
                seen.push(&f.fingerprint);
                let entry = counts.entry(&f.fingerprint).or_insert((0, f));
                entry.0 += 1;
                if f.at > entry.1.at {
                    entry.1 = f;
                }
            }
        }
        let known = |fp: &str, outages: &[Outage]| outages.iter().any(|o| o.fingerprint == fp);
        for (fingerprint, (n, latest)) in counts {
            if n < config.agents
                || known(fingerprint, &self.plan.outages)
                || known(fingerprint, &self.input.outages)
                || self.plan.outages.len() >= MAX_OUTAGES
            {
                continue;
            }
            let next = add(self.now, config.hold_for.as_std());
            let message = latest.message.as_deref().map(|m| cut(m, MESSAGE_LIMIT));
            let note = format!(
                "{n} agents failed the same way within {}: {}{} (fingerprint {fingerprint}); their restarts are held, one probe at {next}",
                config.window,
                latest.reason,
                message
                    .as_deref()
                    .map(|m| format!(": {}", cut(m, 200)))
                    .unwrap_or_default()
            );
            self.event(OutageEventReason::OutageDetected, note);
            self.plan.outages.push(Outage {
                fingerprint: fingerprint.to_string(),
                reason: latest.reason,
                message,
                since: Time(self.now),
                agents: n,
                state: OutageState::Holding,
                probe_agent: None,
                probe_attempt: None,
                probe_started_at: None,
                next_probe_at: Some(Time(next)),
                failed_probes: 0,
            });
            self.requeue(next);
        }
    }

    /// Distinct agents with a failure with `fingerprint` since `from` (fresh ones only, or all).
    fn affected(&self, fingerprint: &str, from: Timestamp, fresh_only: bool) -> u32 {
        let n = self
            .input
            .agents
            .iter()
            .filter(|a| {
                a.failures.iter().any(|f| {
                    f.fingerprint == fingerprint && f.at >= from && (f.fresh || !fresh_only)
                })
            })
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    fn held_for<'b>(&'b self, fingerprint: &'b str) -> impl Iterator<Item = &'b AgentOutageView> {
        self.input
            .agents
            .iter()
            .filter(move |a| a.held.as_ref().is_some_and(|(f, _)| f == fingerprint))
    }

    fn ended(&mut self, o: &Outage, why: String) {
        let note = format!("Outage {} ended: {why}", o.fingerprint);
        self.event(OutageEventReason::OutageEnded, note);
    }

    fn event(&mut self, reason: OutageEventReason, note: String) {
        self.plan.events.push(OutageEvent {
            reason,
            note,
            agent: None,
        });
    }

    /// An Event about agent `agent`.
    fn event_on(&mut self, reason: OutageEventReason, note: String, agent: Option<&str>) {
        self.plan.events.push(OutageEvent {
            reason,
            note,
            agent: agent.map(str::to_string),
        });
    }

    fn requeue(&mut self, at: Timestamp) {
        if at > self.now {
            self.plan.requeue_at = Some(self.plan.requeue_at.map_or(at, |t| t.min(at)));
        }
    }
}

enum Probe {
    /// Not decided yet; look again at this time (or on the next change).
    Waiting(Option<Timestamp>),
    Survived(String),
    FailedAlike,
    /// It cannot tell: it is gone, cannot be restarted, or failed another way.
    Lost(&'static str),
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

/// What the outage decision reads of an Agent besides its status: plain facts the shell gathers
/// (`controller::facts::agent_traits`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentTraits {
    pub name: String,
    pub suspended: bool,
    /// It renews a heartbeat Lease.
    pub heartbeat: bool,
    /// Its own container has a readiness probe.
    pub readiness_probe: bool,
}

impl AgentOutageView {
    /// What the outage decision needs of `agent`, with its current pod and heartbeat Lease.
    ///
    /// Its failures are those that count: a failure restarted with backoff, or one held for an
    /// outage (restarts the agent asked to wait for, disruptions and stops are not outages).
    /// Failures of attempts up to its latest restart out of an outage are left out: an outage
    /// that ended is not declared again from the failures it held.
    pub fn of(
        agent: &AgentTraits,
        s: &AgentStatus,
        pod: Option<&PodFacts>,
        lease: Option<&LeaseFacts>,
    ) -> AgentOutageView {
        // By attempt, not by time: a probe may fail within the second it was started.
        let released = s
            .restart_history
            .iter()
            .find(|r| r.trigger == Trigger::Outage && r.restarted_at.is_some())
            .map(|r| r.attempt);
        let failures = s
            .restart_history
            .iter()
            .filter(|r| {
                r.class == Some(FailureClass::Transient)
                    && matches!(
                        r.trigger,
                        Trigger::Failure | Trigger::HeartbeatLost | Trigger::Outage
                    )
            })
            .filter_map(|r| {
                let at = r.failed_at.as_ref()?.0;
                Some(FailureSeen {
                    fingerprint: r.fingerprint.clone()?,
                    at,
                    attempt: r.attempt,
                    reason: r.reason?,
                    message: r.message.clone(),
                    fresh: r.trigger != Trigger::Outage,
                })
            })
            .filter(|f| released.is_none_or(|r| f.attempt > r))
            .collect();
        let pending = s
            .restart_history
            .first()
            .filter(|r| r.restarted_at.is_none() && r.trigger == Trigger::Outage);
        let held = pending
            .filter(|_| s.phase == Some(Phase::CircuitOpen) && s.shutdown.is_none())
            .and_then(|r| Some((r.fingerprint.clone()?, r.failed_at.as_ref()?.0)));
        let pod = pod.filter(|p| p.attempt == s.attempt && p.phase == PodPhase::Running);
        let (readiness, heartbeat) = (agent.readiness_probe, agent.heartbeat);
        let running_since = pod.map(|p| p.started_at().unwrap_or(p.created_at));
        let renewed = pod.zip(lease).is_some_and(|(p, l)| {
            l.holder.as_deref() == Some(p.name.as_str())
                && l.renew_time
                    .zip(running_since)
                    .is_some_and(|(renewed, since)| renewed >= since)
        });
        let ready = pod.is_some_and(|p| p.ready);
        AgentOutageView {
            name: agent.name.clone(),
            attempt: s.attempt,
            failures,
            available: held.is_some() && !agent.suspended,
            held,
            running_since,
            proven: (readiness || heartbeat) && (!readiness || ready) && (!heartbeat || renewed),
            provable: readiness || heartbeat,
        }
    }
}

fn sub(t: Timestamp, d: std::time::Duration) -> Timestamp {
    let d = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    t.checked_sub(d).unwrap_or(Timestamp::MIN)
}

/// `s` cut to at most `limit` bytes on a character boundary.
fn cut(s: &str, limit: usize) -> String {
    super::classify::truncate_to(s.to_string(), limit)
}
