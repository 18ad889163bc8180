//! A group's spend budget: what its members report they spent (a member group with all of its
//! own), counted as it grows, against `spec.budget`. When it is used up — or a group above it
//! orders so — every member is told to shut down (`StopReason::Budget`), and each records an
//! `Economic` shutdown whose source is `GroupBudget`; when it no longer is (the budget raised, or
//! its window moved on), the order goes and the members lift those shutdowns themselves.
//!
//! The count is kept in the group's status with each member's total as last counted, so a look
//! adds only what a member grew by since the one before: a decision made again (a lost write, an
//! operator killed) adds nothing, a member that leaves takes nothing of what was counted with
//! it, and a member whose own window begins again (another `since`) counts its new total whole.

use super::GroupDecider;
use super::GroupEventReason;
use crate::api::{GroupSpend, MemberSpend, ShutdownType, StopOrder, StopReason, Time};
use crate::supervise::classify::add;
use crate::supervise::group::view::{MemberState, SpendSeen};
use crate::supervise::spend::Cost;

/// A total: cost and tokens, each `None` until something of it is counted.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    cost: Option<Cost>,
    tokens: Option<u64>,
}

impl Totals {
    fn of(cost: Option<&str>, tokens: Option<u64>) -> Totals {
        Totals {
            cost: cost.and_then(Cost::parse),
            tokens,
        }
    }

    /// What `now` grew by since `before` (all of it without one), never below zero.
    fn grown(now: Totals, before: Option<Totals>) -> Totals {
        let before = before.unwrap_or_default();
        Totals {
            cost: now.cost.map(|c| c.minus(before.cost.unwrap_or_default())),
            tokens: now
                .tokens
                .map(|t| t.saturating_sub(before.tokens.unwrap_or_default())),
        }
    }

    fn plus(self, other: Totals) -> Totals {
        let sum = |a: Option<Cost>, b: Option<Cost>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or_default().plus(b.unwrap_or_default())),
        };
        let tokens = match (self.tokens, other.tokens) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or_default().saturating_add(b.unwrap_or_default())),
        };
        Totals {
            cost: sum(self.cost, other.cost),
            tokens,
        }
    }

    /// Zero, keeping which of the two are counted.
    fn zeroed(self) -> Totals {
        Totals {
            cost: self.cost.map(|_| Cost::default()),
            tokens: self.tokens.map(|_| 0),
        }
    }

    fn any(self) -> bool {
        self.cost.is_some() || self.tokens.is_some()
    }
}

impl GroupDecider<'_> {
    /// Counts what the members spent since the last look into `status.spend` (beginning it again
    /// when the budget's window has run); the totals counted.
    fn count_spend(&mut self) -> Totals {
        let previous = self.s.spend.take();
        // A status written before members' totals were kept (or none): the count starts from
        // what the members have.
        let (mut total, mut since, seen) = match previous {
            Some(p) if p.since.is_some() => {
                (Totals::of(p.cost.as_deref(), p.tokens), p.since, p.members)
            }
            _ => (Totals::default(), None, Vec::new()),
        };
        let mut members = Vec::new();
        for member in &self.input.members {
            let spend: Option<&SpendSeen> = match &member.state {
                MemberState::Agent(a) => a.spend.as_ref(),
                MemberState::Group(g) => g.spend.as_ref(),
                _ => None,
            };
            let Some(spend) = spend else {
                continue;
            };
            let key = &member.key;
            let now = Totals::of(spend.cost.as_deref(), spend.tokens);
            let before = seen
                .iter()
                .find(|m| m.kind == key.kind && m.name == key.name && m.since == spend.since)
                .map(|m| Totals::of(m.cost.as_deref(), m.tokens));
            total = total.plus(Totals::grown(now, before));
            members.push(MemberSpend {
                kind: key.kind,
                name: key.name.clone(),
                since: spend.since.clone(),
                cost: now.cost.map(|c| c.to_string()),
                tokens: now.tokens,
            });
        }
        if since.is_none() && total.any() {
            since = Some(Time(self.now));
        }
        let window = self.input.group.spec.budget.as_ref().and_then(|b| b.window);
        if let (Some(window), Some(start)) = (window, since.as_mut()) {
            // What grew until now belongs to the window that ends: counted above, then begun
            // again from the members' totals as they are now.
            if add(start.0, window.as_std()) <= self.now {
                total = total.zeroed();
                *start = Time(self.now);
            }
            // Decide again when this window ends, whatever changes before.
            self.wake_at = Some(add(start.0, window.as_std()));
        }
        self.s.spend = (total.any() || !members.is_empty()).then(|| GroupSpend {
            cost: total.cost.map(|c| c.to_string()),
            tokens: total.tokens,
            since,
            members,
        });
        total
    }

    /// Counts the members' spend; true when the budget stops every member.
    pub(super) fn budget_stop(&mut self) -> bool {
        let total = self.count_spend();
        let budget = self.input.group.spec.budget.as_ref();
        let over_cost = budget
            .and_then(|b| b.max_cost.as_deref())
            .and_then(Cost::parse)
            .zip(total.cost)
            .filter(|(max, cost)| cost >= max)
            .map(|(max, cost)| format!("{cost} of {max}"));
        let over_tokens = budget
            .and_then(|b| b.max_tokens)
            .zip(total.tokens)
            .filter(|(max, tokens)| tokens >= max)
            .map(|(max, tokens)| format!("{tokens} of {max} tokens"));
        let from_parent = self.input.parent.as_ref().and_then(|p| {
            p.stop
                .as_ref()
                .filter(|s| s.reason == StopReason::Budget)
                .map(|s| s.message.clone().unwrap_or_default())
        });
        let name = &self.input.group.name;
        let own = over_cost.or(over_tokens);
        let message = match (&own, from_parent) {
            (Some(words), _) => format!("group {name}'s spend budget is used up: {words}"),
            (None, Some(above)) => above,
            (None, None) => return false,
        };
        if !self.budget_ordered {
            let until = match self.wake_at {
                Some(at) if own.is_some() => {
                    format!("until it is raised or its window begins again at {at}")
                }
                _ => "until it is raised".to_string(),
            };
            let note = format!("{message}: shutting down its members {until}");
            self.event(GroupEventReason::BudgetExhausted, note, true);
        }
        for entry in &mut self.entries {
            entry.stop = Some(StopOrder {
                reason: StopReason::Budget,
                kind: Some(ShutdownType::Economic),
                message: Some(message.clone()),
            });
        }
        true
    }
}
