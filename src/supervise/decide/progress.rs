//! What the agent reports of its progress and checkpoints: taken in from its Lease while it
//! runs and from its termination message when it ends, the checkpoint each attempt resumes
//! from, and poisoning one that attempts keep failing from.

use jiff::Timestamp;

use super::Decider;
use crate::api::{Checkpoint, FailureReason, Progress, Time};
use crate::supervise::classify::{Ending, add};
use crate::supervise::input::PodFacts;
use crate::supervise::plan::EventReason;
use crate::supervise::progress::{self, Reported};
use crate::supervise::spend;

impl<'a> Decider<'a> {
    /// The pod of the attempt the status records (also when a newer one was adopted).
    fn attempt_pod(&self) -> Option<&PodFacts> {
        let attempt = self.s.attempt;
        [self.input.pod.as_ref(), self.input.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|p| p.attempt == attempt && attempt > 0)
    }

    /// What the attempt's pod reported on the heartbeat Lease, if the Lease is held by it (a
    /// report left there by an earlier attempt is not this one's) and its end is not recorded
    /// yet (then its last words were taken, and the Lease says less than they did).
    fn lease_reports(&self) -> Option<&'a Reported> {
        let ended = self.s.shutdown.is_some()
            || self
                .s
                .restart_history
                .first()
                .is_some_and(|r| r.attempt == self.s.attempt);
        if ended {
            return None;
        }
        let lease = self.input.lease.as_ref()?;
        let holder = lease.holder.as_deref();
        self.attempt_pod()
            .is_some_and(|p| Some(p.name.as_str()) == holder)
            .then_some(&lease.reported)
    }

    /// Takes in what the attempt's pod reported on the heartbeat Lease. (An agent may report on
    /// every renewal: the status writer merges what comes within an Agent's interval.)
    pub(super) fn take_lease_reports(&mut self) {
        if let Some(reported) = self.lease_reports() {
            self.take_reports(reported);
        }
    }

    /// Records what the attempt reported: a progress that grew, a checkpoint not seen before
    /// (newest first, at most `checkpoints.keep`); what is set aside is said once.
    pub(super) fn take_reports(&mut self, reported: &Reported) {
        let before = self.s.progress.as_ref().map(|p| p.value);
        let report = progress::read(reported, before);
        if let Some(ignored) = report.ignored.first() {
            let note = ignored.describe();
            if self.s.ignored_report.as_deref() != Some(note.as_str()) {
                self.s.ignored_report = Some(note.clone());
                self.event(EventReason::ReportIgnored, note);
            }
        }
        self.take_spend(reported.spend.as_deref());
        let checkpoint = report
            .checkpoint
            .filter(|r| !self.s.checkpoints.iter().any(|c| &c.reference == r));
        if let Some(value) = report.progress
            && before.is_none_or(|b| value > b)
        {
            self.s.progress = Some(Progress {
                value,
                at: Time(self.now),
            });
        }
        if let Some(reference) = checkpoint {
            let checkpoint = Checkpoint {
                reference,
                at: Time(self.now),
                attempt: self.s.attempt,
                progress: self.s.progress.as_ref().map(|p| p.value),
                failures: 0,
                poisoned: false,
            };
            self.s.checkpoints.insert(0, checkpoint);
            let keep = self.policy.checkpoints.keep.clamp(1, 20) as usize;
            self.s.checkpoints.truncate(keep);
        }
    }

    /// Counts what the attempt reported it spent (`spend`): what is set aside is said once.
    fn take_spend(&mut self, reported: Option<&str>) {
        let Some(raw) = reported.filter(|r| !r.trim().is_empty()) else {
            return;
        };
        // Made by an earlier attempt's pod (it named itself) and left behind: counted at that
        // attempt's end, not this one's to count.
        let attempt_pod = self.attempt_pod().map(|p| p.name.as_str());
        if let (Some(maker), Some(pod)) = (spend::reporter(raw), attempt_pod)
            && maker != pod
        {
            return;
        }
        let counted = spend::parse(raw)
            .map_err(|why| format!("spend {}: ignored", why))
            .and_then(|spent| {
                spend::count(&mut self.s.spend, self.s.attempt, spent, self.now)
                    .map_err(|why| format!("{why}: ignored"))
            });
        if let Err(note) = counted
            && self.s.ignored_report.as_deref() != Some(note.as_str())
        {
            self.s.ignored_report = Some(note.clone());
            self.event(EventReason::ReportIgnored, note);
        }
    }

    /// Whether the attempt's progress grew since `since`: as recorded, or on its Lease and not
    /// recorded yet.
    pub(super) fn grew_since(&self, since: Timestamp) -> bool {
        self.last_grew(since).is_some() || self.unrecorded_growth()
    }

    /// When the recorded progress last grew, if that was since `since`.
    fn last_grew(&self, since: Timestamp) -> Option<Timestamp> {
        let at = self.s.progress.as_ref()?.at.0;
        (at >= since).then_some(at)
    }

    /// The Lease reports a progress beyond the recorded one.
    fn unrecorded_growth(&self) -> bool {
        let before = self.s.progress.as_ref().map(|p| p.value);
        let reported = self
            .lease_reports()
            .and_then(|r| progress::read(r, before).progress);
        reported.is_some_and(|value| before.is_none_or(|b| value > b))
    }

    /// Whether `resetAfter` of running since `since` makes the agent healthy again: with
    /// `progress.requiredForReset`, only if its progress grew meanwhile.
    pub(super) fn reset_earned(&self, since: Timestamp) -> bool {
        let required = self
            .policy
            .progress
            .as_ref()
            .is_some_and(|p| p.required_for_reset);
        !required || self.grew_since(since)
    }

    /// A Running attempt (since `since`) whose progress has not grown for the policy's
    /// `progress.stallTimeout` is stuck: its ending, to be failed with. The clock starts at the
    /// end of the heartbeat's grace period, and again whenever the progress grows; without a
    /// heartbeat there is no Lease to report on, and no stall. Otherwise it looks again when
    /// the time is up.
    pub(super) fn stalled(&mut self, pod: &PodFacts, since: Timestamp) -> Option<Ending> {
        let policy = self.policy.progress.as_ref()?;
        let (stall, cap) = (policy.stall_timeout?, policy.max_extension());
        let grace = self.input.agent.heartbeat.as_ref()?.grace();
        let from = self
            .last_grew(since)
            .unwrap_or_else(|| add(since, grace.as_std()));
        let mut deadline = add(from, stall.as_std());
        // A step this pod said would be slow: not judged stuck before it is due, and at most
        // `maxExtension` past where the stall clock started.
        let slow_until = (self.input.lease.as_ref())
            .filter(|l| l.holder.as_deref() == Some(pod.name.as_str()))
            .and_then(|l| l.expect_slow_until);
        if let Some(until) = slow_until {
            deadline = deadline.max(until.min(add(from, cap.as_std())));
        }
        if self.now >= deadline && self.unrecorded_growth() {
            // It grew since the last write: recorded now, and the clock starts again.
            self.take_lease_reports();
            deadline = add(self.now, stall.as_std());
        }
        if self.now < deadline {
            self.requeue(deadline);
            return None;
        }
        let value = self.s.progress.as_ref().map(|p| p.value);
        let message = match (self.last_grew(since), value) {
            (Some(at), Some(value)) => format!(
                "progress stayed at {value} for {}s (stallTimeout {stall})",
                (self.now - at).get_seconds()
            ),
            (None, Some(value)) => format!(
                "progress did not grow past {value} within {grace} + {stall} of starting (heartbeat grace period + stallTimeout)"
            ),
            (_, None) => format!(
                "no progress reported within {grace} + {stall} of starting (heartbeat grace period + stallTimeout)"
            ),
        };
        let mut ending = Ending::bare(FailureReason::NoProgress, message);
        ending.started_at = Some(since);
        ending.container = pod.agent().map(|c| c.name.clone());
        Some(ending)
    }

    /// The current attempt resumed from `resumed` and failed (`healthy`: after running for
    /// `resetAfter`, which proves the checkpoint good). Unless it reported a newer checkpoint,
    /// that is one more failed resume of it; at `checkpoints.maxFailures` in a row it is
    /// poisoned, and the next attempt resumes from the one before it.
    pub(super) fn failed_resume(&mut self, resumed: Option<&str>, healthy: bool) {
        let Some(resumed) = resumed else {
            return;
        };
        let attempt = self.s.attempt;
        let got_past = healthy
            || self
                .s
                .checkpoints
                .iter()
                .any(|c| c.attempt == attempt && c.reference != resumed);
        let max = self.policy.checkpoints.max_failures.max(1);
        let Some(checkpoint) = self
            .s
            .checkpoints
            .iter_mut()
            .find(|c| c.reference == resumed && !c.poisoned)
        else {
            return;
        };
        if got_past {
            checkpoint.failures = 0;
            return;
        }
        checkpoint.failures = checkpoint.failures.saturating_add(1);
        if checkpoint.failures < max {
            return;
        }
        checkpoint.poisoned = true;
        let failures = checkpoint.failures;
        let next = progress::resume_point(&self.s.checkpoints)
            .map_or("from scratch".to_string(), |c| {
                format!("from {}", c.reference)
            });
        let note = format!(
            "Checkpoint {} poisoned: {failures} attempts in a row resumed from it and failed before reporting a newer one; the next attempt resumes {next}",
            crate::supervise::classify::truncate_to(resumed.to_string(), 200)
        );
        self.event(EventReason::CheckpointPoisoned, note);
    }

    /// A failure counted as a failed resume of `resumed` no longer counts (an outage holds its
    /// restart): its mark is taken back, and a poisoning it caused with it. The checkpoint was
    /// good when the attempt resumed from it, so a poisoned one was poisoned by this failure.
    pub(super) fn undo_failed_resume(&mut self, resumed: Option<&str>) {
        let Some(resumed) = resumed else {
            return;
        };
        let max = self.policy.checkpoints.max_failures.max(1);
        if let Some(checkpoint) = self
            .s
            .checkpoints
            .iter_mut()
            .find(|c| c.reference == resumed && c.failures > 0)
        {
            checkpoint.failures -= 1;
            checkpoint.poisoned = checkpoint.poisoned && checkpoint.failures >= max;
        }
    }

    /// A reset gives every checkpoint another chance.
    pub(super) fn clear_poison(&mut self) {
        for checkpoint in &mut self.s.checkpoints {
            checkpoint.failures = 0;
            checkpoint.poisoned = false;
        }
    }
}
