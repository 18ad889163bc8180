//! What an agent reports of its own progress: how far it has got (`progress`, a whole number
//! that only grows) and where it could resume from (`checkpoint`, an opaque reference). It
//! reports on its heartbeat Lease (annotations) or in its typed termination message; either way
//! the values are untrusted text, read here into what may be used and what is set aside, with
//! the reason, so that a person is told once.

use serde_json::Value;

use super::classify::truncate_to;
use crate::api::Checkpoint;

/// A checkpoint reference is at most this many bytes.
pub const CHECKPOINT_LIMIT: usize = 1024;

/// The largest progress taken: what the API server stores as an integer (int64).
pub const PROGRESS_LIMIT: u64 = i64::MAX as u64;

/// A set-aside value is quoted in its reason cut to this many bytes.
const QUOTE_LIMIT: usize = 64;

/// What an agent wrote, as it wrote it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reported {
    pub progress: Option<String>,
    pub checkpoint: Option<String>,
    /// The attempt's spend so far, as JSON (see `spend`).
    pub spend: Option<String>,
}

/// A report, read: the values that may be used, and those set aside.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub progress: Option<u64>,
    pub checkpoint: Option<String>,
    pub ignored: Vec<Ignored>,
}

/// Why a reported value was set aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// The progress is not a whole number from 0 to `PROGRESS_LIMIT` (the value, cut).
    NotAProgress(String),
    /// The progress is lower than what was reported before.
    Backwards { reported: u64, before: u64 },
    /// The checkpoint is longer than `CHECKPOINT_LIMIT` bytes (its length).
    CheckpointTooLong(usize),
    /// The checkpoint holds control characters (a line break, an escape).
    CheckpointNotPrintable,
}

impl Ignored {
    /// The reason in words, for a person.
    pub fn describe(&self) -> String {
        match self {
            Ignored::NotAProgress(value) => format!(
                "progress {value:?} is not a whole number from 0 to {PROGRESS_LIMIT}: ignored"
            ),
            Ignored::Backwards { reported, before } => format!(
                "progress {reported} is lower than the {before} reported before (progress only grows): ignored"
            ),
            Ignored::CheckpointTooLong(len) => format!(
                "checkpoint of {len} bytes is longer than {CHECKPOINT_LIMIT}: ignored (report a reference to the state, not the state)"
            ),
            Ignored::CheckpointNotPrintable => {
                "checkpoint holds control characters: ignored".to_string()
            }
        }
    }
}

/// Reads `reported`, given the progress already recorded (`before`).
pub fn read(reported: &Reported, before: Option<u64>) -> Report {
    let mut report = Report::default();
    if let Some(raw) = reported.progress.as_deref() {
        match parse_progress(raw) {
            Some(value) => match before {
                Some(before) if value < before => report.ignored.push(Ignored::Backwards {
                    reported: value,
                    before,
                }),
                _ => report.progress = Some(value),
            },
            None => report.ignored.push(Ignored::NotAProgress(truncate_to(
                raw.to_string(),
                QUOTE_LIMIT,
            ))),
        }
    }
    if let Some(raw) = reported.checkpoint.as_deref().map(str::trim) {
        if raw.len() > CHECKPOINT_LIMIT {
            report.ignored.push(Ignored::CheckpointTooLong(raw.len()));
        } else if raw.chars().any(char::is_control) {
            report.ignored.push(Ignored::CheckpointNotPrintable);
        } else if !raw.is_empty() {
            report.checkpoint = Some(raw.to_string());
        }
    }
    report
}

/// The `progress` and `checkpoint` of a typed termination message (a JSON object), as written:
/// a progress may be a JSON number or a string of digits. Anything else reports nothing.
pub fn from_message(message: &str) -> Reported {
    let Some(object) = super::last_words::typed_message(message) else {
        return Reported::default();
    };
    let text = |key: &str| match object.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    };
    Reported {
        progress: text("progress"),
        checkpoint: text("checkpoint"),
        spend: object
            .get("spend")
            .filter(|v| !v.is_null())
            .map(Value::to_string),
    }
}

/// The checkpoint a new attempt resumes from: the newest that is not poisoned (`None`: from
/// scratch).
pub fn resume_point(checkpoints: &[Checkpoint]) -> Option<&Checkpoint> {
    checkpoints.iter().find(|c| !c.poisoned)
}

/// A whole number from 0 to `PROGRESS_LIMIT`, written in decimal digits (surrounding spaces
/// allowed).
fn parse_progress(raw: &str) -> Option<u64> {
    let digits = raw.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok().filter(|v| *v <= PROGRESS_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(progress: Option<&str>, checkpoint: Option<&str>) -> Reported {
        Reported {
            progress: progress.map(str::to_string),
            checkpoint: checkpoint.map(str::to_string),
            spend: None,
        }
    }

    #[test]
    fn whole_numbers_that_grow_are_progress_and_anything_else_is_set_aside() {
        let progress = |raw: &str, before| read(&reported(Some(raw), None), before);
        assert_eq!(progress("42", None).progress, Some(42));
        assert_eq!(
            progress(" 42 ", Some(42)).progress,
            Some(42),
            "the same again"
        );
        assert_eq!(
            progress("9223372036854775807", None).progress,
            Some(PROGRESS_LIMIT)
        );
        for bad in [
            "-1",
            "1.5",
            "1e3",
            "",
            "forty",
            "0x10",
            "9223372036854775808",
            "<b>1</b>",
        ] {
            let report = progress(bad, None);
            assert_eq!(report.progress, None, "{bad:?}");
            assert_eq!(report.ignored, vec![Ignored::NotAProgress(bad.to_string())]);
        }
        let back = progress("7", Some(9));
        assert_eq!(back.progress, None);
        assert_eq!(
            back.ignored,
            vec![Ignored::Backwards {
                reported: 7,
                before: 9
            }]
        );
    }

    #[test]
    fn a_checkpoint_is_a_short_printable_reference() {
        let checkpoint = |raw: &str| read(&reported(None, Some(raw)), None);
        assert_eq!(
            checkpoint("s3://runs/42/step-7").checkpoint.as_deref(),
            Some("s3://runs/42/step-7")
        );
        assert_eq!(
            checkpoint("  ").checkpoint,
            None,
            "an empty one is no report"
        );
        assert!(checkpoint("  ").ignored.is_empty());
        let huge = "x".repeat(1 << 20);
        assert_eq!(
            checkpoint(&huge).ignored,
            vec![Ignored::CheckpointTooLong(1 << 20)]
        );
        assert_eq!(checkpoint(&"x".repeat(CHECKPOINT_LIMIT)).ignored, vec![]);
        assert_eq!(
            checkpoint("step-1\n\u{1b}[31mred").ignored,
            vec![Ignored::CheckpointNotPrintable]
        );
        // Markup is only text: it is stored as written and escaped wherever it is shown.
        assert_eq!(
            checkpoint("<script>x</script>").checkpoint.as_deref(),
            Some("<script>x</script>")
        );
    }

    #[test]
    fn a_set_aside_value_is_quoted_short() {
        let long = "é".repeat(100);
        let report = read(&reported(Some(&long), None), None);
        let [Ignored::NotAProgress(quoted)] = report.ignored.as_slice() else {
            panic!("{report:?}");
        };
        assert!(quoted.len() <= QUOTE_LIMIT && long.starts_with(quoted.as_str()));
    }

    #[test]
    fn a_typed_termination_message_reports_progress_and_checkpoint() {
        assert_eq!(
            from_message(r#"{"progress": 120, "checkpoint": "step-12"}"#),
            reported(Some("120"), Some("step-12"))
        );
        assert_eq!(
            from_message(r#"{"progress": "120"}"#),
            reported(Some("120"), None)
        );
        assert_eq!(
            from_message(r#"{"progress": -3, "checkpoint": 7}"#),
            reported(Some("-3"), Some("7"))
        );
        assert_eq!(
            from_message(r#"{"shutdown": "economic", "spend": {"cost": "2.50"}}"#).spend,
            Some(r#"{"cost":"2.50"}"#.to_string())
        );
        assert_eq!(from_message("panic: out of memory"), Reported::default());
        assert_eq!(from_message(r#"{"retryAfter": "5m"}"#), Reported::default());
    }
}
