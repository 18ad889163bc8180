//! The agent asked to be restarted later (`retryAfter` in its termination message): a restart at
//! that time, counted toward no limit and not toward the breaker.

use jiff::Timestamp;

use super::{Decider, ceil_second, quoted, span};
use crate::api::{Phase, RestartRecord, Time, Trigger};
use crate::supervise::classify::{Ending, add};
use crate::supervise::last_words::RetryAfter;
use crate::supervise::plan::EventReason;

impl Decider<'_> {
    /// The agent asked to be restarted no earlier than `retry` (cut to the policy's
    /// `maxRetryAfter`): a restart counted toward no limit and not toward the breaker.
    pub(super) fn retry_later(
        &mut self,
        ending: &Ending,
        mut record: RestartRecord,
        retry: RetryAfter,
        ended_at: Timestamp,
    ) {
        let cap = self.policy.max_retry_after.as_std();
        let latest = add(ended_at, cap);
        let at = match retry {
            RetryAfter::After(d) => add(ended_at, d.min(cap)),
            RetryAfter::At(t) => t.min(latest),
        };
        let at = ceil_second(at.max(self.now));
        let pod = self.s.pod_name.clone().unwrap_or_default();
        let code = ending
            .exit_code
            .map(|c| format!(", exit code {c}"))
            .unwrap_or_default();
        let message = quoted(ending.message.as_deref());
        let note = format!(
            "Pod {pod} ended ({}{code}) asking to be restarted later{message}; restarting at {at} (not counted as a failure)",
            ending.reason
        );
        self.event(EventReason::RestartScheduled, note);
        record.trigger = Trigger::RetryAfter;
        record.backoff = Some(span(self.now, at));
        self.push_history(record);
        self.s.phase = Some(Phase::BackingOff);
        self.s.next_restart_at = Some(Time(at));
        self.requeue(at);
    }
}
