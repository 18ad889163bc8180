//! `metav1.Condition` bookkeeping: one entry per type, `lastTransitionTime` kept unless the
//! status flips.

use jiff::Timestamp;

use crate::api::{Condition, Time};

pub const READY: &str = "Ready";
pub const CIRCUIT_BREAKER_OPEN: &str = "CircuitBreakerOpen";
pub const POLICY_RESOLVED: &str = "PolicyResolved";
pub const ACCEPTED: &str = "Accepted";
/// True once an Agent's spend crossed its budget's `warnAt` (present only under a budget).
pub const BUDGET_LOW: &str = "BudgetLow";
/// The condition types the operator writes on an Agent; any other is someone else's.
pub const OWNED: [&str; 4] = [READY, CIRCUIT_BREAKER_OPEN, POLICY_RESOLVED, BUDGET_LOW];

/// A condition's desired state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Desired<'a> {
    pub type_: &'a str,
    pub status: bool,
    pub reason: &'a str,
    pub message: &'a str,
}

/// Sets a condition in `conditions`. Returns true when its status flipped (or it is new).
pub fn set(
    conditions: &mut Vec<Condition>,
    desired: Desired<'_>,
    generation: i64,
    now: Timestamp,
) -> bool {
    let status = if desired.status { "True" } else { "False" };
    let existing = conditions.iter_mut().find(|c| c.type_ == desired.type_);
    let unchanged = existing.as_ref().is_some_and(|c| {
        c.status == status
            && c.reason == desired.reason
            && c.message == desired.message
            && c.observed_generation == Some(generation)
    });
    if unchanged {
        // The common case, every steady-state decision: nothing to build.
        return false;
    }
    let flipped = existing.as_ref().is_none_or(|c| c.status != status);
    let condition = Condition {
        type_: desired.type_.to_string(),
        status: status.to_string(),
        reason: desired.reason.to_string(),
        message: desired.message.to_string(),
        observed_generation: Some(generation),
        last_transition_time: match &existing {
            Some(c) if !flipped => c.last_transition_time.clone(),
            _ => Time(now),
        },
    };
    match existing {
        Some(c) => *c = condition,
        None => {
            conditions.push(condition);
            conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        }
    }
    flipped
}

/// The condition of this type, if set.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn transition_time_moves_only_when_status_flips() {
        let mut cs = Vec::new();
        let ready = |status, reason| Desired {
            type_: READY,
            status,
            reason,
            message: "",
        };
        assert!(set(&mut cs, ready(false, "PodPending"), 1, at(10)));
        assert!(!set(&mut cs, ready(false, "StillPending"), 2, at(20)));
        assert_eq!(cs[0].last_transition_time, Time(at(10)));
        assert_eq!(cs[0].reason, "StillPending");
        assert_eq!(cs[0].observed_generation, Some(2));
        assert!(set(&mut cs, ready(true, "PodReady"), 2, at(30)));
        assert_eq!(cs[0].last_transition_time, Time(at(30)));
        assert_eq!(cs.len(), 1);
    }

    #[test]
    fn conditions_are_kept_one_per_type_in_order() {
        let mut cs = Vec::new();
        for t in [READY, POLICY_RESOLVED, CIRCUIT_BREAKER_OPEN, READY] {
            set(
                &mut cs,
                Desired {
                    type_: t,
                    status: true,
                    reason: "R",
                    message: "",
                },
                1,
                at(1),
            );
        }
        let types: Vec<_> = cs.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [CIRCUIT_BREAKER_OPEN, POLICY_RESOLVED, READY]);
    }
}
