//! `Duration`: a span of time written the way Kubernetes users write it (`30s`, `5m`, `1h30m`).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What admission accepts: Go's `time.ParseDuration` format without a sign, so that CEL's
/// `duration()` and this type read the same strings.
/// Each number has at most 6 digits (and 9 decimals): no duration overflows, whatever its units.
pub const DURATION_PATTERN: &str = r"^(0|([0-9]{1,6}([.][0-9]{1,9})?(ns|us|µs|ms|s|m|h))+)$";

/// A non-negative span of time, such as `30s`, `5m` or `1h30m`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(std::time::Duration);

impl Duration {
    pub const ZERO: Duration = Duration(std::time::Duration::ZERO);

    pub const fn from_secs(secs: u64) -> Self {
        Duration(std::time::Duration::from_secs(secs))
    }

    pub const fn from_millis(millis: u64) -> Self {
        Duration(std::time::Duration::from_millis(millis))
    }

    pub const fn as_std(self) -> std::time::Duration {
        self.0
    }

    pub fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        // Whole milliseconds are what the text form can say.
        Duration(std::time::Duration::from_millis(
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
        ))
    }
}

/// Why a string is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: write a number with a unit, such as 30s, 5m or 1h30m")]
pub struct ParseDurationError {
    input: String,
}

impl FromStr for Duration {
    type Err = ParseDurationError;

    /// Parses Go's duration format (as `metav1.Duration` does) within [`DURATION_PATTERN`]:
    /// no sign, and numbers small enough that no sum of them can overflow.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parsed = if matches_pattern(s) {
            s.parse::<kube::core::Duration>().ok()
        } else {
            None
        };
        match parsed {
            Some(d) if !d.is_negative() => Ok(std::time::Duration::from(d).into()),
            _ => Err(ParseDurationError {
                input: s.chars().take(64).collect(),
            }),
        }
    }
}

/// Whether `s` matches [`DURATION_PATTERN`] (checked here by hand, to need no regex engine).
fn matches_pattern(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    if s.is_empty() || s.len() > 64 {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if !(1..=6).contains(&digits) {
            return false;
        }
        rest = &rest[digits..];
        if let Some(fraction) = rest.strip_prefix('.') {
            let decimals = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if !(1..=9).contains(&decimals) {
                return false;
            }
            rest = &fraction[decimals..];
        }
        // Two-letter units first: "ms" is not "m" followed by "s".
        let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

impl fmt::Display for Duration {
    /// Go's style, which reads back the same: `0s`, `250ms`, `1.932s`, `1m30s`, `1h30m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.as_millis();
        let (h, m, s, ms) = (
            total / 3_600_000,
            total / 60_000 % 60,
            total / 1_000 % 60,
            total % 1_000,
        );
        if total < 1_000 {
            return if total == 0 {
                f.write_str("0s")
            } else {
                write!(f, "{ms}ms")
            };
        }
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        match (s, ms) {
            (0, 0) => Ok(()),
            (s, 0) => write!(f, "{s}s"),
            (s, ms) => write!(f, "{s}.{}s", format!("{ms:03}").trim_end_matches('0')),
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A CEL expression: `field` (on `self`) is absent or is not a duration. Rules that compare
/// durations start with it, so a malformed duration gets only the clear "must be a duration"
/// message of its own field, not a type-conversion error as well.
fn unparsed(field: &str) -> String {
    format!("!has(self.{field}) || !self.{field}.matches('{DURATION_PATTERN}')")
}

/// Adds an `x-kubernetes-validations` rule to a schema.
pub(crate) fn add_rule(schema: &mut schemars::Schema, rule: serde_json::Value) {
    let rules = schema
        .ensure_object()
        .entry("x-kubernetes-validations")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let serde_json::Value::Array(rules) = rules {
        rules.push(rule);
    }
}

/// A rule on an object: duration field `smaller` must not be longer than duration field `larger`.
pub(crate) fn not_longer_than(schema: &mut schemars::Schema, smaller: &str, larger: &str) {
    add_rule(
        schema,
        serde_json::json!({
            "rule": format!(
                "{} || {} || duration(self.{smaller}) <= duration(self.{larger})",
                unparsed(smaller),
                unparsed(larger)
            ),
            "messageExpression": format!(
                "'{smaller} (' + self.{smaller} + ') must not be longer than {larger} (' + self.{larger} + ')'"
            ),
            "fieldPath": format!(".{smaller}"),
            "reason": "FieldValueInvalid",
        }),
    );
}

/// A rule on an object: duration field `field` must be longer than 0s when `condition` holds.
pub(crate) fn positive_when(
    schema: &mut schemars::Schema,
    field: &str,
    condition: &str,
    message: &str,
) {
    add_rule(
        schema,
        serde_json::json!({
            "rule": format!("!({condition}) || (has(self.{field}) && ({} || duration(self.{field}) > duration('0s')))", unparsed_present(field)),
            "message": message,
            "fieldPath": format!(".{field}"),
            "reason": "FieldValueInvalid",
        }),
    );
}

fn unparsed_present(field: &str) -> String {
    format!("!self.{field}.matches('{DURATION_PATTERN}')")
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "maxLength": 64,
            "x-kubernetes-validations": [{
                "rule": format!("self.matches('{DURATION_PATTERN}')"),
                "message": "must be a duration such as 30s, 5m or 1h30m",
            }],
        })
    }

    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_users_write() {
        for (text, millis) in [
            ("0s", 0),
            ("250ms", 250),
            ("10s", 10_000),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("1h30m", 5_400_000),
            ("2m3s4ms", 123_004),
            ("90s", 90_000),
            ("1.5s", 1_500),
            ("999999h", 999_999 * 3_600_000),
            ("0", 0),
            ("1m0s", 60_000),
        ] {
            assert_eq!(
                text.parse::<Duration>(),
                Ok(Duration::from_millis(millis)),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_what_admission_rejects() {
        for text in [
            "",
            "10s5",
            "s",
            "-1s",
            "1d",
            "5 m",
            "1h-",
            "ms",
            "1hh",
            "abc",
            // Too many digits: would overflow (and used to panic the parser).
            "9999999999999999h",
            "1000000h",
            "1.1234567890s",
            "1.s",
            ".5s",
        ] {
            assert!(
                text.parse::<Duration>().is_err(),
                "{text:?} should not parse"
            );
        }
        let message = "abc".parse::<Duration>().unwrap_err().to_string();
        assert!(message.contains("such as 30s"), "{message}");
    }

    #[test]
    fn displays_the_shortest_form_and_reads_it_back() {
        for (millis, text) in [
            (0, "0s"),
            (250, "250ms"),
            (1_001, "1.001s"),
            (1_932, "1.932s"),
            (4_500, "4.5s"),
            (90_000, "1m30s"),
            (5_400_000, "1h30m"),
            (3_600_001, "1h0.001s"),
        ] {
            let d = Duration::from_millis(millis);
            assert_eq!(d.to_string(), text);
            assert_eq!(text.parse::<Duration>(), Ok(d));
        }
    }
}
