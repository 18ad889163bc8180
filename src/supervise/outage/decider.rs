//! The decider of one policy's outages: which open, which probe, which end.

use jiff::Timestamp;

use super::{
    AgentOutageView, FailureSeen, MAX_OUTAGES, MESSAGE_LIMIT, OutageEvent, OutageEventReason,
    OutageInput, OutagePlan, PROBE_POLL, cut, hold, holding, sub,
};
use crate::api::{Outage, OutagePolicy, OutageState, Time};
use crate::supervise::classify::add;

pub(super) struct Decider<'a> {
    pub(super) input: &'a OutageInput,
    pub(super) now: Timestamp,
    pub(super) plan: OutagePlan,
}

impl Decider<'_> {
    /// An open outage, one step on. `None`: it ended.
    pub(super) fn step(&mut self, config: &OutagePolicy, mut o: Outage) -> Option<Outage> {
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
    pub(super) fn probe_outcome(&self, o: &Outage) -> Probe {
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
            // Restarted, its pod not seen running yet: looked at again in a while, as nothing
            // else may tell (its status can say Running before the pod cache does, and a pod's
            // changes reconcile no policy).
            None => Probe::Waiting(Some(add(self.now, PROBE_POLL))),
        }
    }

    /// New outages: fingerprints with `agents` distinct agents failing freshly within `window`.
    pub(super) fn detect(&mut self, config: &OutagePolicy) {
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
    pub(super) fn affected(&self, fingerprint: &str, from: Timestamp, fresh_only: bool) -> u32 {
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

    pub(super) fn held_for<'b>(
        &'b self,
        fingerprint: &'b str,
    ) -> impl Iterator<Item = &'b AgentOutageView> {
        self.input
            .agents
            .iter()
            .filter(move |a| a.held.as_ref().is_some_and(|(f, _)| f == fingerprint))
    }

    pub(super) fn ended(&mut self, o: &Outage, why: String) {
        let note = format!("Outage {} ended: {why}", o.fingerprint);
        self.event(OutageEventReason::OutageEnded, note);
    }

    pub(super) fn event(&mut self, reason: OutageEventReason, note: String) {
        self.plan.events.push(OutageEvent {
            reason,
            note,
            agent: None,
        });
    }

    /// An Event about agent `agent`.
    pub(super) fn event_on(
        &mut self,
        reason: OutageEventReason,
        note: String,
        agent: Option<&str>,
    ) {
        self.plan.events.push(OutageEvent {
            reason,
            note,
            agent: agent.map(str::to_string),
        });
    }

    pub(super) fn requeue(&mut self, at: Timestamp) {
        if at > self.now {
            self.plan.requeue_at = Some(self.plan.requeue_at.map_or(at, |t| t.min(at)));
        }
    }
}

pub(super) enum Probe {
    /// Not decided yet; look again at this time (or on the next change).
    Waiting(Option<Timestamp>),
    Survived(String),
    FailedAlike,
    /// It cannot tell: it is gone, cannot be restarted, or failed another way.
    Lost(&'static str),
}
