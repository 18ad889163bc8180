//! Failure fingerprints: the same failure gets the same 16 hex characters on every agent and
//! every attempt, so agents failing together for one outside reason can be told apart from
//! agents failing each for its own.
//!
//! A fingerprint hashes a failure's reason, its exit code and its message with what varies
//! between occurrences of one failure taken out: timestamps, UUIDs, IP addresses, hex ids,
//! path segments and tokens that carry ids, numbers, and the agent's own names (as whole words
//! only: a short name also occurs inside ids and other words).

use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::backoff::stable_hash;
use crate::api::FailureReason;

/// The fingerprint of a failure: 16 lowercase hex characters. `names` are the agent's own names
/// (its pod's, its own), taken out of the message so that agents failing alike match.
pub fn fingerprint(
    reason: FailureReason,
    exit_code: Option<i32>,
    message: Option<&str>,
    names: &[&str],
) -> String {
    let normalized = message.map(|m| normalize(m, names)).unwrap_or_default();
    let code = exit_code.map(|c| c.to_string()).unwrap_or_default();
    let bytes = reason
        .to_string()
        .into_bytes()
        .into_iter()
        .chain([0])
        .chain(code.into_bytes())
        .chain([0])
        .chain(normalized.into_bytes());
    format!("{:016x}", stable_hash(bytes))
}

/// `message` with what varies between occurrences of one failure replaced by placeholders, and
/// runs of white space made one space.
pub fn normalize(message: &str, names: &[&str]) -> String {
    let mut text = message.to_string();
    let substitute_all = |text: String, patterns: &[(Regex, Sub)]| {
        patterns.iter().fold(text, |text, (pattern, sub)| {
            pattern
                .replace_all(&text, |c: &Captures<'_>| substitute(*sub, &c[0]))
                .into_owned()
        })
    };
    // Times, UUIDs and addresses first: a short name may occur inside them.
    let (before_names, after_names) = PATTERNS.split_at(NAMES_AFTER);
    text = substitute_all(text, before_names);
    // Longest first: a pod's name contains its agent's.
    let mut names: Vec<&str> = names.iter().copied().filter(|n| n.len() >= 2).collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for name in names {
        text = take_out(&text, name);
    }
    // The rest after: a pod's name (`researcher-7`) would otherwise lose its number first.
    text = substitute_all(text, after_names);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` with `name` replaced by `<name>` where it is a whole word: not inside a longer one
/// (`ed` in `failed`, `f1` in `8f14e45f`), nor the word of a placeholder (`<ip>`).
fn take_out(text: &str, name: &str) -> String {
    let in_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let step = name.chars().next().map_or(1, char::len_utf8);
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut from) = (0, 0);
    while let Some(found) = text[from..].find(name) {
        let at = from + found;
        let end = at + name.len();
        let before = text[..at].chars().next_back();
        let after = text[end..].chars().next();
        let placeholder = before == Some('<') && after == Some('>');
        if in_word(before) || in_word(after) || placeholder {
            from = at + step;
            continue;
        }
        out.push_str(&text[copied..at]);
        out.push_str("<name>");
        (copied, from) = (end, end);
    }
    out.push_str(&text[copied..]);
    out
}

/// What a pattern's match becomes.
#[derive(Clone, Copy)]
enum Sub {
    /// Always this placeholder.
    Fixed(&'static str),
    /// `<ip>` when the match has a digit: `Bad::` is a path, `fe80::1` an address.
    Ipv6,
    /// See [`token`].
    Token,
}

/// How many of [`PATTERNS`] (times, UUIDs and addresses) come before the agent's names are
/// taken out.
const NAMES_AFTER: usize = 7;

/// The substitutions, in order: each later one sees the placeholders of the earlier ones.
static PATTERNS: LazyLock<Vec<(Regex, Sub)>> = LazyLock::new(|| {
    let table: [(&str, Sub); 11] = [
        // RFC 3339 / ISO 8601 dates and date-times, with or without fractions and offsets.
        (
            r"(?i)\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b",
            Sub::Fixed("<time>"),
        ),
        // RFC 2822 dates ("Tue, 01 Jul 2025"; the time follows) and times of day.
        (
            r"(?i)\b(?:(?:mon|tue|wed|thu|fri|sat|sun), )?\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]* \d{4}\b",
            Sub::Fixed("<time>"),
        ),
        (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", Sub::Fixed("<time>")),
        (
            r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
            Sub::Fixed("<uuid>"),
        ),
        // IPv4 with an optional port; IPv6 bracketed (with a port) or bare.
        (
            r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b",
            Sub::Fixed("<ip>"),
        ),
        (
            r"(?i)\[[0-9a-f:.]*:[0-9a-f:.]*\](?::\d{1,5})?",
            Sub::Fixed("<ip>"),
        ),
        (r"(?i)\b[0-9a-f]{1,4}(?::[0-9a-f]{0,4}){2,7}\b", Sub::Ipv6),
        (r"(?i)\b0x[0-9a-f]+\b", Sub::Fixed("<hex>")),
        (r"\d+\.\d+", Sub::Fixed("<n>")),
        // Path segments that carry an id: any with a digit.
        (
            r#"/[^/\s<>:,;)\]"']*\d[^/\s:,;)\]"']*"#,
            Sub::Fixed("/<id>"),
        ),
        // Tokens with a digit: ids, or words with a number in them.
        (r"[0-9A-Za-z_-]*\d[0-9A-Za-z_-]*", Sub::Token),
    ];
    table
        .into_iter()
        .map(|(p, sub)| (Regex::new(p).expect("a valid pattern"), sub))
        .collect()
});

static DIGITS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").expect("a valid pattern"));

fn substitute(sub: Sub, text: &str) -> String {
    match sub {
        Sub::Fixed(placeholder) => placeholder.to_string(),
        Sub::Ipv6 if text.bytes().any(|b| b.is_ascii_digit()) => "<ip>".to_string(),
        Sub::Ipv6 => text.to_string(),
        Sub::Token => token(text),
    }
}

/// A token with a digit is an id when it is long, or all hex and as long as a short commit;
/// otherwise only its numbers are taken out (`worker-3` keeps `worker-`).
fn token(token: &str) -> String {
    let letters = token.bytes().any(|b| b.is_ascii_alphabetic());
    let hex = token.bytes().all(|b| b.is_ascii_hexdigit());
    if letters && ((hex && token.len() >= 7) || token.len() >= 12) {
        return "<id>".to_string();
    }
    DIGITS.replace_all(token, "<n>").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_sixteen_lowercase_hex_characters() {
        let f = fingerprint(FailureReason::Error, Some(1), Some("boom"), &[]);
        assert_eq!(f.len(), 16);
        assert!(
            f.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
        );
    }
}
