//! A group's spend budget: what its members report they spent, summed (a member group with all
//! of its own), against `spec.budget`. When it is used up — or a group above it orders so —
//! every member is told to shut down (`StopReason::Budget`), and each records an `Economic`
//! shutdown whose source is `GroupBudget`; when it no longer is (the budget raised), the order
//! goes and the members lift those shutdowns themselves.

use super::{GroupDecider, GroupEventReason};
use crate::api::{ShutdownType, Spend, StopOrder, StopReason};
use crate::supervise::group::view::MemberState;
use crate::supervise::spend::Cost;

impl GroupDecider<'_> {
    /// Sums the members' spend into the status; true when the budget stops every member.
    pub(super) fn budget_stop(&mut self) -> bool {
        let (mut cost, mut tokens, mut costed, mut counted) = (Cost::default(), 0u64, false, false);
        for member in &self.input.members {
            let spend = match &member.state {
                MemberState::Agent(a) => a.spend.as_ref(),
                MemberState::Group(g) => g.spend.as_ref(),
                _ => None,
            };
            if let Some(c) = spend.and_then(|s| s.cost.as_deref()).and_then(Cost::parse) {
                (cost, costed) = (cost.plus(c), true);
            }
            if let Some(t) = spend.and_then(|s| s.tokens) {
                (tokens, counted) = (tokens.saturating_add(t), true);
            }
        }
        self.s.spend = (costed || counted).then(|| Spend {
            cost: costed.then(|| cost.to_string()),
            tokens: counted.then_some(tokens),
        });
        let budget = self.input.group.spec.budget.as_ref();
        let over_cost = budget
            .and_then(|b| b.max_cost.as_deref())
            .and_then(Cost::parse)
            .filter(|max| costed && cost >= *max)
            .map(|max| format!("{cost} of {max}"));
        let over_tokens = budget
            .and_then(|b| b.max_tokens)
            .filter(|max| counted && tokens >= *max)
            .map(|max| format!("{tokens} of {max} tokens"));
        let from_parent = self.input.parent.as_ref().and_then(|p| {
            p.stop
                .as_ref()
                .filter(|s| s.reason == StopReason::Budget)
                .map(|s| s.message.clone().unwrap_or_default())
        });
        let name = &self.input.group.name;
        let message = match (over_cost.or(over_tokens), from_parent) {
            (Some(words), _) => format!("group {name}'s spend budget is used up: {words}"),
            (None, Some(above)) => above,
            (None, None) => return false,
        };
        if !self.budget_ordered {
            let note = format!("{message}: shutting down its members until it is raised");
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
