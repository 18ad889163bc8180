//! Spend budgets: money is a reason to stop, crashes are not a reason to spend. When what the
//! agent reports spending reaches its policy's `budget`, its pod is stopped and it shuts down
//! (`Economic`, source `Budget`), whatever its restart limits say; raising the budget, or its
//! window moving on, lifts that shutdown and supervision resumes. A shutdown anyone else wrote is
//! never touched.

use super::Decider;
use crate::api::{Budget, Phase, Shutdown, ShutdownType, Time};
use crate::supervise::PolicyResolution;
use crate::supervise::classify::add;
use crate::supervise::conditions::{BUDGET_LOW, Desired};
use crate::supervise::plan::EventReason;
use crate::supervise::spend::Cost;

/// The `source` of the shutdown the operator writes when a budget is spent.
pub const BUDGET_SOURCE: &str = "Budget";
/// The `source` of a member's shutdown when its group's budget is spent.
pub const GROUP_BUDGET_SOURCE: &str = "GroupBudget";

/// How the spend stands against a budget.
struct Standing {
    /// The share used of the maximum most used (cost or tokens).
    share: f64,
    /// In words: `2.00 of 2.00` or `18000 of 20000 tokens`.
    words: String,
}

impl Decider<'_> {
    /// The budget of the agent's policy (read from the input: it may be asked before the policy
    /// is resolved).
    fn budget(&self) -> Option<&Budget> {
        match &self.input.policy {
            PolicyResolution::Named(_, spec) | PolicyResolution::NamespaceDefault(spec) => {
                spec.budget.as_ref()
            }
            _ => None,
        }
    }

    /// How the spend stands against the budget: the maximum most used.
    fn standing(&self) -> Option<Standing> {
        let (budget, spend) = (self.budget()?, self.s.spend.as_ref()?);
        let cost = budget
            .max_cost
            .as_deref()
            .and_then(Cost::parse)
            .zip(spend.cost.as_deref().and_then(Cost::parse))
            .map(|(max, cost)| Standing {
                share: cost.ratio(max),
                words: format!("{cost} of {max}"),
            });
        let tokens = budget
            .max_tokens
            .zip(spend.tokens)
            .map(|(max, t)| Standing {
                share: if max == 0 {
                    f64::INFINITY
                } else {
                    t as f64 / max as f64
                },
                words: format!("{t} of {max} tokens"),
            });
        [cost, tokens]
            .into_iter()
            .flatten()
            .max_by(|a, b| a.share.total_cmp(&b.share))
    }

    /// Whether the budget is spent and no shutdown holds yet: no pod may start.
    pub(super) fn budget_spent(&self) -> bool {
        self.s.shutdown.is_none() && self.standing().is_some_and(|s| s.share >= 1.0)
    }

    /// A budget window that has run its length begins anew: what is counted starts from zero
    /// (the attempt running goes on counting only what it spends from now).
    pub(super) fn roll_budget_window(&mut self) {
        let Some(window) = self.budget().and_then(|b| b.window) else {
            return;
        };
        let now = self.now;
        let Some(spend) = self.s.spend.as_mut() else {
            return;
        };
        if add(spend.since.0, window.as_std()) <= now {
            spend.cost = spend.cost.as_ref().map(|_| Cost::default().to_string());
            spend.tokens = spend.tokens.map(|_| 0);
            spend.since = Time(now);
        }
    }

    /// The operator's own budget shutdown, lifted once the budget is no longer spent (raised,
    /// removed, or a new window): true when it was, and supervision resumes. While it holds,
    /// it looks again when the window ends.
    pub(super) fn lift_budget_shutdown(&mut self) -> bool {
        let source = self.s.shutdown.as_ref().and_then(|s| s.source.as_deref());
        if source == Some(GROUP_BUDGET_SOURCE) {
            // Its group's budget: lifted once the group no longer orders it (raised, a new
            // window, or it left the group).
            let ordered = self.input.group.as_ref().and_then(|d| d.stop.as_ref());
            if ordered.is_some_and(|s| s.reason == crate::api::StopReason::Budget) {
                return false;
            }
            self.s.shutdown = None;
            self.plan.clear_shutdown = true;
            return true;
        }
        if source != Some(BUDGET_SOURCE) {
            return false;
        }
        if self.standing().is_some_and(|s| s.share >= 1.0) {
            let window = self.budget().and_then(|b| b.window);
            if let (Some(window), Some(spend)) = (window, &self.s.spend) {
                self.requeue(add(spend.since.0, window.as_std()));
            }
            return false;
        }
        self.s.shutdown = None;
        self.plan.clear_shutdown = true;
        true
    }

    /// After the spend is counted: `BudgetLow` when it crosses `warnAt`, and when it reaches a
    /// maximum the pod is stopped and the agent shuts down. True when it did.
    pub(super) fn enforce_budget(&mut self) -> bool {
        let Some(budget) = self.budget() else {
            self.s.conditions.retain(|c| c.type_ != BUDGET_LOW);
            return false;
        };
        let warn_at = budget.warn_at;
        let window = budget.window;
        let standing = self.standing();
        let share = standing.as_ref().map_or(0.0, |s| s.share);
        let words = standing.map(|s| s.words).unwrap_or_default();
        let low = share >= warn_at;
        let message = if low {
            format!("spent {words}, past {:.0}% of the budget", warn_at * 100.0)
        } else {
            "within budget".to_string()
        };
        let desired = Desired {
            type_: BUDGET_LOW,
            status: low,
            reason: if low { "BudgetLow" } else { "WithinBudget" },
            message: &message,
        };
        let flipped = self.set_condition(desired);
        if low && flipped && share < 1.0 {
            self.event(
                EventReason::BudgetLow,
                format!("Spend budget low: {message}"),
            );
        }
        if share < 1.0 || self.s.shutdown.is_some() {
            return false;
        }
        let reason = format!("spend budget exhausted: {words}");
        if let Some(live) = self.current_pod().filter(|p| p.is_live()) {
            self.plan.delete_pod = Some(live.name.clone());
        }
        let resume = match window {
            Some(w) => format!("raise the budget, or wait for its {w} window to move on"),
            None => "raise the budget".to_string(),
        };
        self.event(
            EventReason::BudgetExhausted,
            format!("{reason}: the pod is stopped and not restarted; {resume} to resume"),
        );
        let shutdown = Shutdown {
            kind: ShutdownType::Economic,
            reason: Some(reason),
            message: None,
            at: Some(Time(self.now)),
            source: Some(BUDGET_SOURCE.to_string()),
        };
        self.s.shutdown = Some(shutdown.clone());
        self.plan.record_shutdown = Some(shutdown);
        self.s.phase = Some(Phase::Shutdown);
        self.s.next_restart_at = None;
        if let (Some(window), Some(spend)) = (window, &self.s.spend) {
            self.requeue(add(spend.since.0, window.as_std()));
        }
        true
    }
}
