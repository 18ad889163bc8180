//! The typed termination message: what an agent says as it ends — that it shuts down for a
//! reason of its own, or asks to be restarted later — read from untrusted text into what may
//! be used.

use jiff::Timestamp;

use super::classify::{MESSAGE_LIMIT, REASON_LIMIT, truncate_to};
use crate::api::ShutdownType;

/// A termination message longer than this is not read for a shutdown request. The kubelet itself
/// keeps at most 4 KiB.
const SHUTDOWN_MESSAGE_LIMIT: usize = 4096;

/// `{"retryAfter": "15m"}` or `{"retryAfter": "2026-11-22T10:00:00Z"}` from a termination
/// message: restart no earlier than this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfter {
    /// This long after the attempt ended.
    After(std::time::Duration),
    /// At this time.
    At(Timestamp),
}

/// `{"shutdown":"economic"|"voluntary","reason":"...","message":"..."}` from a termination message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShutdownRequest {
    pub kind: ShutdownType,
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// The JSON object a typed termination message is, if it is one.
pub(crate) fn typed_message(message: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    if message.len() > SHUTDOWN_MESSAGE_LIMIT {
        return None;
    }
    match serde_json::from_str(message.trim()).ok()? {
        serde_json::Value::Object(object) => Some(object),
        _ => None,
    }
}

/// Reads a retry-after request from a termination message: `retryAfter` as a duration (`15m`),
/// a number of seconds (`120`, as HTTP's `Retry-After` says it), an RFC 3339 time or an
/// RFC 2822 date. Anything else is not one.
pub fn retry_after(message: &str) -> Option<RetryAfter> {
    let object = typed_message(message)?;
    match object.get("retryAfter")? {
        serde_json::Value::Number(n) => seconds(n.as_f64()?),
        serde_json::Value::String(s) => {
            let s = s.trim();
            if s.len() > 64 {
                return None;
            }
            if let Ok(d) = s.parse::<crate::api::Duration>() {
                return Some(RetryAfter::After(d.as_std()));
            }
            if s.bytes().all(|b| b.is_ascii_digit()) {
                return seconds(s.parse::<f64>().ok()?);
            }
            if let Ok(t) = s.parse::<Timestamp>() {
                return Some(RetryAfter::At(t));
            }
            jiff::fmt::rfc2822::parse(s)
                .ok()
                .map(|z| RetryAfter::At(z.timestamp()))
        }
        _ => None,
    }
}

/// A number of seconds, when it is one: finite, not negative, and within a year.
fn seconds(n: f64) -> Option<RetryAfter> {
    const YEAR: f64 = 365.0 * 24.0 * 3600.0;
    (n.is_finite() && (0.0..=YEAR).contains(&n))
        .then(|| RetryAfter::After(std::time::Duration::from_secs_f64(n)))
}

/// Reads `{"permanent": true, "reason": "..."}` (with no `shutdown`) from a termination
/// message: the agent says its failure is permanent, whatever its exit code. `Some(reason)`
/// when it is one (the reason, if given, at most `REASON_LIMIT` bytes).
pub fn permanent(message: &str) -> Option<Option<String>> {
    let object = typed_message(message)?;
    if object.contains_key("shutdown") || object.get("permanent")? != &serde_json::Value::Bool(true)
    {
        return None;
    }
    Some(
        object
            .get("reason")
            .and_then(|v| v.as_str())
            .map(|s| truncate_to(s.to_string(), REASON_LIMIT)),
    )
}

/// The `reason` a typed termination message gives, whatever else it says (a crash's exception,
/// a `fail`): what the record shows of the failure, in place of the JSON around it.
pub fn reason(message: &str) -> Option<String> {
    let object = typed_message(message)?;
    let reason = object.get("reason")?.as_str()?.trim();
    (!reason.is_empty()).then(|| truncate_to(reason.to_string(), REASON_LIMIT))
}

/// Reads a shutdown request from a termination message; anything else is not one.
pub fn shutdown_request(message: &str) -> Option<ShutdownRequest> {
    let object = typed_message(message)?;
    let kind = match object
        .get("shutdown")?
        .as_str()?
        .to_ascii_lowercase()
        .as_str()
    {
        "economic" => ShutdownType::Economic,
        "voluntary" => ShutdownType::Voluntary,
        _ => return None,
    };
    let text = |key: &str, limit: usize| {
        object
            .get(key)
            .and_then(|v| v.as_str())
            .map(|s| truncate_to(s.to_string(), limit))
    };
    Some(ShutdownRequest {
        kind,
        reason: text("reason", REASON_LIMIT),
        message: text("message", MESSAGE_LIMIT),
    })
}
