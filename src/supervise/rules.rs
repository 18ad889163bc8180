//! The policy's rules: which action a failure gets. The first matching rule wins; a failure no
//! rule matches (and every failure, when there are no rules) gets the default action of SPEC.md.

use crate::api::{ExitCodeOperator, FailureReason, Rule, RuleAction};

/// The action for a failure with this reason and exit code.
pub fn action_for(rules: &[Rule], reason: FailureReason, exit_code: Option<i32>) -> RuleAction {
    rules
        .iter()
        .find(|rule| matches(rule, reason, exit_code))
        .map_or_else(|| default_action(reason, exit_code), |rule| rule.action)
}

/// Exit code 0 is a voluntary shutdown; disruptions are ignored; everything else restarts.
pub fn default_action(reason: FailureReason, exit_code: Option<i32>) -> RuleAction {
    if exit_code == Some(0) {
        RuleAction::VoluntaryShutdown
    } else if reason.is_disruption() {
        RuleAction::Ignore
    } else {
        RuleAction::Restart
    }
}

fn matches(rule: &Rule, reason: FailureReason, exit_code: Option<i32>) -> bool {
    let codes_match = match (&rule.exit_codes, exit_code) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(sel), Some(code)) => match sel.operator {
            ExitCodeOperator::In => sel.values.contains(&code),
            ExitCodeOperator::NotIn => !sel.values.contains(&code),
        },
    };
    let reasons_match = rule.reasons.is_empty() || rule.reasons.contains(&reason);
    codes_match && reasons_match
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ExitCodeSelector;
    use FailureReason::*;
    use RuleAction::*;

    fn rule(
        codes: Option<(ExitCodeOperator, &[i32])>,
        reasons: &[FailureReason],
        action: RuleAction,
    ) -> Rule {
        Rule {
            exit_codes: codes.map(|(operator, values)| ExitCodeSelector {
                operator,
                values: values.to_vec(),
            }),
            reasons: reasons.to_vec(),
            action,
        }
    }

    #[test]
    fn default_rules() {
        let table = [
            (Completed, Some(0), VoluntaryShutdown),
            (Error, Some(1), Restart),
            (OomKilled, Some(137), Restart),
            (Signal, Some(143), Restart),
            (HeartbeatLost, None, Restart),
            (StartupTimeout, None, Restart),
            (NoProgress, None, Restart),
            (Evicted, None, Ignore),
            (Preempted, None, Ignore),
            (NodeLost, None, Ignore),
            (Unknown, None, Restart),
        ];
        for (reason, code, want) in table {
            assert_eq!(action_for(&[], reason, code), want, "{reason} {code:?}");
        }
    }

    #[test]
    fn first_match_wins_for_every_action() {
        let rules = [
            rule(Some((ExitCodeOperator::In, &[42])), &[], EconomicShutdown),
            rule(Some((ExitCodeOperator::In, &[3, 4])), &[], Stop),
            rule(None, &[OomKilled], Ignore),
            rule(Some((ExitCodeOperator::In, &[0])), &[], VoluntaryShutdown),
            rule(Some((ExitCodeOperator::NotIn, &[0, 42])), &[Error], Restart),
        ];
        let table = [
            (Error, Some(42), EconomicShutdown),
            (Error, Some(3), Stop),
            (Error, Some(4), Stop),
            (OomKilled, Some(137), Ignore),
            (Completed, Some(0), VoluntaryShutdown),
            (Error, Some(1), Restart),
            // Nothing matches: the defaults decide.
            (Signal, Some(143), Restart),
            (NodeLost, None, Ignore),
            // An exit-code selector never matches a failure without an exit code.
            (HeartbeatLost, None, Restart),
        ];
        for (reason, code, want) in table {
            assert_eq!(action_for(&rules, reason, code), want, "{reason} {code:?}");
        }
    }

    #[test]
    fn a_rule_needs_every_selector_to_match() {
        let rules = [rule(Some((ExitCodeOperator::In, &[1])), &[OomKilled], Stop)];
        assert_eq!(action_for(&rules, OomKilled, Some(1)), Stop);
        assert_eq!(action_for(&rules, Error, Some(1)), Restart);
        assert_eq!(action_for(&rules, OomKilled, Some(137)), Restart);
        // Exit 0 still falls through to the default voluntary shutdown.
        assert_eq!(action_for(&rules, Completed, Some(0)), VoluntaryShutdown);
    }

    #[test]
    fn a_rule_without_selectors_matches_everything() {
        let rules = [rule(None, &[], Stop)];
        assert_eq!(action_for(&rules, NodeLost, None), Stop);
        assert_eq!(action_for(&rules, Completed, Some(0)), Stop);
    }
}
