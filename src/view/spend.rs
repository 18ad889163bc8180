//! Spend as people read it: what an agent reported spending (`status.spend`, and each attempt's
//! `restartHistory[].spend`), against its RestartPolicy's budget when it has one.
//!
//! Pure: the budget is looked up in policies already fetched (the plugin lists them, the status
//! page has them cached).

use serde::Serialize;

use super::text::Paint;
use crate::api::{Agent, Budget, RestartPolicy, Spend};
use crate::supervise::spend::Cost;

/// What a budget allows, as `list -o json` and the status page print it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limit {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// The share of a maximum at which the budget runs low.
    pub warn_at: f64,
}

impl From<&Budget> for Limit {
    fn from(b: &Budget) -> Limit {
        Limit {
            max_cost: b.max_cost.clone(),
            max_tokens: b.max_tokens,
            warn_at: b.warn_at,
        }
    }
}

/// What the agent spent in all (within its budget's window), as its status says.
pub fn total(agent: &Agent) -> Option<Spend> {
    let spend = agent.status.as_ref()?.spend.as_ref()?;
    Some(Spend {
        cost: spend.cost.clone(),
        tokens: spend.tokens,
    })
}

/// The budget of the agent's policy, as the operator resolves it: the RestartPolicy its
/// `restartPolicyRef` names, else its namespace's `default`; none when that policy is missing
/// or has no budget.
pub fn budget_of(agent: &Agent, policies: &[RestartPolicy]) -> Option<Limit> {
    let namespace = agent.metadata.namespace.as_deref();
    let name = (agent.spec.restart_policy_ref.as_ref())
        .map(|r| r.name.as_str())
        .unwrap_or("default");
    policies
        .iter()
        .find(|p| {
            p.metadata.namespace.as_deref() == namespace && p.metadata.name.as_deref() == Some(name)
        })
        .and_then(|p| p.spec.budget.as_ref())
        .map(Limit::from)
}

/// A cost as the operator writes it (`1.2` → `1.20`); text that is no decimal, as it is.
pub fn cost(raw: &str) -> String {
    Cost::parse(raw).map_or_else(|| raw.to_string(), |c| c.to_string())
}

/// A count of tokens, short: `950`, `18k`, `1.5k`, `2.3M`.
pub fn tokens(n: u64) -> String {
    let short = |n: u64, unit: u64, suffix: &str| {
        let tenths = n * 10 / unit;
        if tenths >= 100 || tenths.is_multiple_of(10) {
            format!("{}{suffix}", tenths / 10)
        } else {
            format!("{}.{}{suffix}", tenths / 10, tenths % 10)
        }
    };
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => short(n, 1_000, "k"),
        _ => short(n, 1_000_000, "M"),
    }
}

/// Spend in a few words: against the budget's maximums when there is one (only what it
/// limits), `1.20/2.00`, `18k/20k tokens`; else all that was reported, `0.35`, `1.20, 52k
/// tokens`; `-` when there is nothing to say.
pub fn words(spend: Option<&Spend>, limit: Option<&Limit>) -> String {
    let spent_cost = spend.and_then(|s| s.cost.as_deref());
    let spent_tokens = spend.and_then(|s| s.tokens);
    let mut parts = Vec::new();
    match limit.map(|l| l.max_cost.as_deref()) {
        Some(Some(max)) => parts.push(format!("{}/{}", cost(spent_cost.unwrap_or("0")), cost(max))),
        Some(None) => {}
        None => parts.extend(spent_cost.map(cost)),
    }
    match limit.map(|l| l.max_tokens) {
        Some(Some(max)) => parts.push(format!(
            "{}/{} tokens",
            tokens(spent_tokens.unwrap_or(0)),
            tokens(max)
        )),
        Some(None) => {}
        None => parts.extend(spent_tokens.map(|t| format!("{} tokens", tokens(t)))),
    }
    if parts.is_empty() {
        "-".to_string()
    } else {
        parts.join(", ")
    }
}

/// The share used of the budget's maximum most used (1 or more: spent).
pub fn share(spend: Option<&Spend>, limit: &Limit) -> Option<f64> {
    let spend = spend?;
    let cost = (limit.max_cost.as_deref().and_then(Cost::parse))
        .zip(spend.cost.as_deref().and_then(Cost::parse))
        .map(|(max, c)| c.ratio(max));
    let tokens = limit.max_tokens.zip(spend.tokens).map(|(max, t)| {
        if max == 0 {
            f64::INFINITY
        } else {
            t as f64 / max as f64
        }
    });
    [cost, tokens].into_iter().flatten().reduce(f64::max)
}

/// How far into its budget the spend is: `spent`, `low` (past `warnAt`), or none.
pub fn standing(spend: Option<&Spend>, limit: Option<&Limit>) -> Option<&'static str> {
    let limit = limit?;
    match share(spend, limit)? {
        s if s >= 1.0 => Some("spent"),
        s if s >= limit.warn_at => Some("low"),
        _ => None,
    }
}

/// `words`, red when the budget is spent and yellow when it runs low.
pub fn painted(spend: Option<&Spend>, limit: Option<&Limit>, paint: Paint) -> String {
    let text = words(spend, limit);
    match standing(spend, limit) {
        Some("spent") => paint.red(&text),
        Some(_) => paint.yellow(&text),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend(cost: Option<&str>, tokens: Option<u64>) -> Spend {
        Spend {
            cost: cost.map(str::to_string),
            tokens,
        }
    }

    fn limit(max_cost: Option<&str>, max_tokens: Option<u64>) -> Limit {
        Limit {
            max_cost: max_cost.map(str::to_string),
            max_tokens,
            warn_at: 0.8,
        }
    }

    #[test]
    fn spend_reads_against_the_budget_or_alone() {
        let cases = [
            (None, None, "-"),
            (Some(spend(Some("1.2"), None)), None, "1.20"),
            (Some(spend(None, Some(18_000))), None, "18k tokens"),
            (
                Some(spend(Some("0.35"), Some(1_500))),
                None,
                "0.35, 1.5k tokens",
            ),
            (
                Some(spend(Some("1.2"), Some(9))),
                Some(limit(Some("2"), None)),
                "1.20/2.00",
            ),
            (None, Some(limit(Some("2.00"), None)), "0.00/2.00"),
            (
                Some(spend(Some("1.2"), Some(18_000))),
                Some(limit(None, Some(20_000))),
                "18k/20k tokens",
            ),
            (
                Some(spend(None, Some(2_340_000))),
                Some(limit(Some("5"), Some(3_000_000))),
                "0.00/5.00, 2.3M/3M tokens",
            ),
        ];
        for (spend, limit, want) in cases {
            assert_eq!(words(spend.as_ref(), limit.as_ref()), want);
        }
    }

    #[test]
    fn the_maximum_most_used_says_how_the_budget_stands() {
        let l = limit(Some("2.00"), Some(1_000));
        let standing_of = |s: Spend| standing(Some(&s), Some(&l));
        assert_eq!(standing_of(spend(Some("1.00"), Some(100))), None);
        assert_eq!(standing_of(spend(Some("1.60"), Some(100))), Some("low"));
        assert_eq!(standing_of(spend(Some("0.10"), Some(1_000))), Some("spent"));
        assert_eq!(standing(Some(&spend(Some("9"), None)), None), None);
        assert_eq!(tokens(999), "999");
        assert_eq!(tokens(20_000), "20k");
        assert_eq!(cost("abc"), "abc");
    }
}
