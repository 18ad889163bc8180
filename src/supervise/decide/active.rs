//! An attempt in progress: its pod pending or running, healthy long enough, replaced by a rollout.

use jiff::Timestamp;

use super::{Decider, SETTLE};
use crate::api::{BreakerState, CircuitBreakerStatus, FailureReason, Phase, Trigger};
use crate::supervise::classify::{self, Ending, Liveness, Verdict, add};
use crate::supervise::input::PodFacts;
use crate::supervise::plan::EventReason;

impl<'a> Decider<'a> {
    pub(super) fn active(&mut self, pod: Option<&'a PodFacts>, manual: bool) {
        let Some(pod) = pod else {
            let name = self.s.pod_name.clone().unwrap_or_default();
            let ending = Ending::bare(FailureReason::NodeLost, format!("pod {name} vanished"));
            return self.fail(ending, None);
        };
        if pod.is_live() && manual {
            self.manual_event(true);
            return self.restart_now(self.record(Trigger::Manual));
        }
        if pod.is_live() && !self.current_template(pod) {
            self.rollout_event();
            return self.restart_now(self.record(Trigger::Rollout));
        }
        let liveness = Liveness {
            heartbeat: self.input.agent.heartbeat.as_ref(),
            lease: self.input.lease.as_ref(),
        };
        match classify::classify(
            pod,
            self.policy.startup_timeout.as_std(),
            liveness,
            self.now,
        ) {
            Verdict::Starting { deadline } => {
                self.s.phase = Some(Phase::Pending);
                self.requeue(deadline);
            }
            Verdict::Running {
                since,
                ready: _,
                heartbeat_deadline,
            } => {
                // After a failure, the replacement is recorded Running once it has stayed up
                // a while: one that crashes sooner was never up, and a crash loop costs one
                // status write per attempt instead of two.
                let settled = add(since, SETTLE);
                if self.s.consecutive_failures > 0
                    && self.s.phase == Some(Phase::Pending)
                    && self.now < settled
                {
                    return self.requeue(settled);
                }
                if let Some(ending) = self.stalled(pod, since) {
                    return self.fail(ending, Some(pod));
                }
                self.s.phase = Some(Phase::Running);
                self.healthy_since(since);
                if let Some(deadline) = heartbeat_deadline {
                    self.requeue(deadline);
                }
            }
            Verdict::Ended { ending, kill } => self.fail(ending, kill.then_some(pod)),
        }
    }

    pub(super) fn current_template(&self, pod: &PodFacts) -> bool {
        pod.template_hash.as_deref() == Some(self.input.agent.template_hash.as_str())
    }

    /// Running since `since`: after `resetAfter` the agent counts as healthy again (with
    /// `progress.requiredForReset`, once its progress has grown too).
    pub(super) fn healthy_since(&mut self, since: Timestamp) {
        let half_open = self.breaker().state == BreakerState::HalfOpen;
        if self.s.consecutive_failures == 0 && !half_open {
            return;
        }
        let healthy_at = add(since, self.policy.reset_after.as_std());
        if self.now < healthy_at {
            return self.requeue(healthy_at);
        }
        if !self.reset_earned(since) {
            // Its progress growing is a change of its Lease, which wakes the next decision.
            return;
        }
        self.s.consecutive_failures = 0;
        if half_open {
            self.close_breaker();
        }
    }

    /// The probe ran for `resetAfter`: the breaker closes.
    pub(super) fn close_breaker(&mut self) {
        *self.breaker() = CircuitBreakerStatus::default();
        let note = format!(
            "Probe ran {} without failing: circuit breaker closed",
            self.policy.reset_after
        );
        self.event(EventReason::CircuitClosed, note);
    }
}
