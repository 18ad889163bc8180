//! What an agent reports it spent: its current attempt's cost and tokens so far, as JSON
//! (`{"cost": "0.42", "tokens": 18000}`), on its Lease or in its termination message. Untrusted
//! text, read here into amounts; and the totals kept in the status, each attempt's last report
//! counted once however often it is read again (a decision is made again after a lost write or
//! an operator killed).

use jiff::Timestamp;
use serde_json::Value;

use crate::api::{AttemptSpend, SpendStatus, Time};

/// Decimal places a cost may have (nano-units: a billionth of whatever unit the budget uses).
const PLACES: u32 = 9;
const SCALE: u64 = 10u64.pow(PLACES);

/// A cost: a non-negative decimal with at most `PLACES` places, exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost(u64);

impl Cost {
    /// Reads a decimal such as `0.42`, `25`, or `1.000000001`; `None` for anything else (a
    /// sign, an exponent, more places, too large).
    pub fn parse(raw: &str) -> Option<Cost> {
        let raw = raw.trim();
        let (whole, fraction) = raw.split_once('.').unwrap_or((raw, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || !digits(whole) || !digits(fraction) {
            return None;
        }
        if fraction.len() > PLACES as usize || (raw.contains('.') && fraction.is_empty()) {
            return None;
        }
        let whole: u64 = whole.parse().ok()?;
        let padded = format!("{fraction:0<width$}", width = PLACES as usize);
        let fraction: u64 = padded.parse().ok()?;
        whole.checked_mul(SCALE)?.checked_add(fraction).map(Cost)
    }

    /// `self + other`, saturating.
    pub fn plus(self, other: Cost) -> Cost {
        Cost(self.0.saturating_add(other.0))
    }

    /// `self / max` (infinite for a maximum of zero).
    pub fn ratio(self, max: Cost) -> f64 {
        if max.0 == 0 {
            return f64::INFINITY;
        }
        self.0 as f64 / max.0 as f64
    }

    /// `self - other`, never below zero.
    pub fn minus(self, other: Cost) -> Cost {
        Cost(self.0.saturating_sub(other.0))
    }
}

impl std::fmt::Display for Cost {
    /// At least two places, more only when they are not zero: `0.40`, `25.00`, `1.234`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, fraction) = (self.0 / SCALE, self.0 % SCALE);
        let places = format!("{fraction:0width$}", width = PLACES as usize);
        let trimmed = places.trim_end_matches('0');
        let shown = if trimmed.len() < 2 {
            &places[..2]
        } else {
            trimmed
        };
        write!(f, "{whole}.{shown}")
    }
}

/// One report: the attempt's spend so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub cost: Option<Cost>,
    pub tokens: Option<u64>,
}

/// Reads a report, `{"cost": "0.42", "tokens": 18000}`; the reason it cannot be used, if not.
/// A cost may be a string or a JSON number; tokens a whole number (or a string of digits).
pub fn parse(raw: &str) -> Result<Spent, String> {
    let object = match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(object)) => object,
        _ => {
            return Err(
                "is not a JSON object such as {\"cost\": \"0.42\", \"tokens\": 18000}".into(),
            );
        }
    };
    let text = |key: &str| match object.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    let cost = match text("cost") {
        None => None,
        Some(c) => Some(Cost::parse(&c).ok_or_else(|| {
            format!("cost {c:?} is not a decimal of at least 0 with at most {PLACES} places")
        })?),
    };
    let tokens = match text("tokens") {
        None => None,
        Some(t) => Some(
            t.trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n <= i64::MAX as u64)
                .ok_or_else(|| format!("tokens {t:?} is not a whole number of at least 0"))?,
        ),
    };
    if cost.is_none() && tokens.is_none() {
        return Err("names neither cost nor tokens".into());
    }
    Ok(Spent { cost, tokens })
}

/// The pod a report names as its maker (`"pod"`, which the SDK writes), if it names one: a
/// report on a Lease that names another pod is an earlier attempt's, left behind.
pub fn reporter(raw: &str) -> Option<String> {
    match serde_json::from_str::<Value>(raw).ok()?.get("pod")? {
        Value::String(pod) if !pod.is_empty() => Some(pod.clone()),
        _ => None,
    }
}

/// The spend of `spend.current`, as amounts.
fn counted(current: &AttemptSpend) -> Spent {
    Spent {
        cost: current.cost.as_deref().and_then(Cost::parse),
        tokens: current.tokens,
    }
}

/// Counts `report`, `attempt`'s spend so far, at `now` into `status`: a report of the attempt
/// counted adds what it grew by; of a later attempt, all of it; of an earlier one, nothing (its
/// last report was counted). Returns whether the totals changed, or why the report is set aside
/// (it went backwards within its attempt).
pub fn count(
    status: &mut Option<SpendStatus>,
    attempt: u32,
    report: Spent,
    now: Timestamp,
) -> Result<bool, String> {
    let s = status.get_or_insert_with(|| SpendStatus {
        cost: None,
        tokens: None,
        since: Time(now),
        current: AttemptSpend::default(),
    });
    let before = if s.current.attempt == attempt {
        counted(&s.current)
    } else if s.current.attempt < attempt {
        Spent::default()
    } else {
        return Ok(false);
    };
    let back = |new: Option<u64>, old: Option<u64>| new.zip(old).is_some_and(|(n, o)| n < o);
    if back(report.cost.map(|c| c.0), before.cost.map(|c| c.0))
        || back(report.tokens, before.tokens)
    {
        return Err(format!(
            "spend {} is less than the {} attempt {attempt} reported before (an attempt's spend only grows)",
            describe(report),
            describe(before)
        ));
    }
    let cost = report.cost.or(before.cost);
    let tokens = report.tokens.or(before.tokens);
    if s.current.attempt == attempt && (cost, tokens) == (before.cost, before.tokens) {
        return Ok(false);
    }
    if let Some(c) = cost {
        let total = s.cost.as_deref().and_then(Cost::parse).unwrap_or_default();
        let grown = c.minus(before.cost.unwrap_or_default());
        s.cost = Some(total.plus(grown).to_string());
    }
    if let Some(t) = tokens {
        let grown = t.saturating_sub(before.tokens.unwrap_or_default());
        s.tokens = Some(s.tokens.unwrap_or_default().saturating_add(grown));
    }
    s.current = AttemptSpend {
        attempt,
        cost: cost.map(|c| c.to_string()),
        tokens,
    };
    Ok(true)
}

/// A report in words: `cost 0.42, 18000 tokens`.
fn describe(spent: Spent) -> String {
    match (spent.cost, spent.tokens) {
        (Some(c), Some(t)) => format!("cost {c}, {t} tokens"),
        (Some(c), None) => format!("cost {c}"),
        (None, Some(t)) => format!("{t} tokens"),
        (None, None) => "nothing".into(),
    }
}

#[cfg(test)]
mod tests;
