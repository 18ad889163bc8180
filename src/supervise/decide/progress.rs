//! What the agent reports of its progress and checkpoints: taken in from its Lease while it
//! runs and from its termination message when it ends, the checkpoint each attempt resumes
//! from, and poisoning one that attempts keep failing from.

use super::Decider;
use crate::api::{Checkpoint, Progress, Time};
use crate::supervise::classify::add;
use crate::supervise::input::PodFacts;
use crate::supervise::plan::EventReason;
use crate::supervise::progress::{self, Reported};

/// A progress that grows is written to the status at most this often (unless a checkpoint comes
/// with it, or the attempt ends): an agent may report on every renewal of its Lease, and each
/// write is a request to the API server.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl Decider<'_> {
    /// The pod of the attempt the status records (also when a newer one was adopted).
    fn attempt_pod(&self) -> Option<&PodFacts> {
        let attempt = self.s.attempt;
        [self.input.pod.as_ref(), self.input.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|p| p.attempt == attempt && attempt > 0)
    }

    /// Takes in what the attempt's pod reported on the heartbeat Lease, if the Lease is held by
    /// it (a report left there by an earlier attempt is not this one's). `ended`: the attempt is
    /// over, and whatever it reported is recorded now.
    pub(super) fn take_lease_reports(&mut self, ended: bool) {
        let Some(lease) = self.input.lease.as_ref() else {
            return;
        };
        let holder = lease.holder.as_deref();
        let held = self
            .attempt_pod()
            .is_some_and(|p| Some(p.name.as_str()) == holder);
        if held {
            self.take_reports(&lease.reported, ended);
        }
    }

    /// Records what the attempt reported: a progress that grew (at most every
    /// `PROGRESS_EVERY`, unless `ended` or with a new checkpoint), a checkpoint not seen before
    /// (newest first, at most `checkpoints.keep`); what is set aside is said once.
    pub(super) fn take_reports(&mut self, reported: &Reported, ended: bool) {
        let before = self.s.progress.as_ref().map(|p| p.value);
        let report = progress::read(reported, before);
        if let Some(ignored) = report.ignored.first() {
            let note = ignored.describe();
            if self.s.ignored_report.as_deref() != Some(note.as_str()) {
                self.s.ignored_report = Some(note.clone());
                self.event(EventReason::ReportIgnored, note);
            }
        }
        let checkpoint = report
            .checkpoint
            .filter(|r| !self.s.checkpoints.iter().any(|c| &c.reference == r));
        let due = self
            .s
            .progress
            .as_ref()
            .is_none_or(|p| add(p.at.0, PROGRESS_EVERY) <= self.now);
        if let Some(value) = report.progress
            && before.is_none_or(|b| value > b)
            && (ended || due || checkpoint.is_some())
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

    /// A reset gives every checkpoint another chance.
    pub(super) fn clear_poison(&mut self) {
        for checkpoint in &mut self.s.checkpoints {
            checkpoint.failures = 0;
            checkpoint.poisoned = false;
        }
    }
}
