//! Costs read exactly, reports read or set aside, and each attempt's last report counted once.

use super::*;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn spent(cost: Option<&str>, tokens: Option<u64>) -> Spent {
    Spent {
        cost: cost.map(|c| Cost::parse(c).unwrap()),
        tokens,
    }
}

#[test]
fn a_cost_is_an_exact_decimal_shown_with_at_least_two_places() {
    for (raw, shown) in [
        ("0.42", "0.42"),
        ("25", "25.00"),
        (" 0.4 ", "0.40"),
        ("1.234", "1.234"),
        ("0.000000001", "0.000000001"),
        ("18446744073", "18446744073.00"),
    ] {
        assert_eq!(
            Cost::parse(raw).map(|c| c.to_string()).as_deref(),
            Some(shown),
            "{raw:?}"
        );
    }
    for bad in [
        "-1",
        "1e3",
        "",
        ".5",
        "1.",
        "0.0000000001",
        "1,5",
        "NaN",
        "18446744074",
        "0x10",
    ] {
        assert_eq!(Cost::parse(bad), None, "{bad:?}");
    }
    let a = Cost::parse("0.1").unwrap();
    assert_eq!(
        a.plus(Cost::parse("0.2").unwrap()).to_string(),
        "0.30",
        "no binary rounding"
    );
}

#[test]
fn a_report_names_a_cost_or_tokens_and_nothing_else_is_read() {
    assert_eq!(
        parse(r#"{"cost": "0.42", "tokens": 18000}"#),
        Ok(spent(Some("0.42"), Some(18000)))
    );
    assert_eq!(parse(r#"{"cost": 0.5}"#), Ok(spent(Some("0.5"), None)));
    assert_eq!(parse(r#"{"tokens": "7"}"#), Ok(spent(None, Some(7))));
    for bad in [
        "0.42",
        "[1]",
        "{}",
        r#"{"cost": "-0.1"}"#,
        r#"{"cost": "lots"}"#,
        r#"{"tokens": -5}"#,
        r#"{"tokens": 1.5}"#,
        "{not json",
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
    assert!(parse(r#"{"cost": "-0.1"}"#).unwrap_err().contains("-0.1"));
}

#[test]
fn each_attempts_last_report_is_counted_once() {
    let mut status = None;
    assert_eq!(
        count(&mut status, 1, spent(Some("0.10"), Some(100)), t(0)),
        Ok(true)
    );
    // Read again (a decision made again): nothing more.
    assert_eq!(
        count(&mut status, 1, spent(Some("0.10"), Some(100)), t(5)),
        Ok(false)
    );
    // It grew: only what it grew by.
    assert_eq!(
        count(&mut status, 1, spent(Some("0.40"), Some(400)), t(9)),
        Ok(true)
    );
    // The next attempt: all of it; a late report of the one before: nothing.
    assert_eq!(
        count(&mut status, 2, spent(Some("0.25"), None), t(20)),
        Ok(true)
    );
    assert_eq!(
        count(&mut status, 1, spent(Some("0.90"), Some(900)), t(21)),
        Ok(false)
    );
    let s = status.clone().unwrap();
    assert_eq!((s.cost.as_deref(), s.tokens), (Some("0.65"), Some(400)));
    assert_eq!(s.since, Time(t(0)));
    assert_eq!(s.current.attempt, 2);
    // Tokens first reported later in attempt 2: all of them.
    assert_eq!(
        count(&mut status, 2, spent(None, Some(50)), t(22)),
        Ok(true)
    );
    let s = status.unwrap();
    assert_eq!((s.cost.as_deref(), s.tokens), (Some("0.65"), Some(450)));
    assert_eq!(
        s.current.cost.as_deref(),
        Some("0.25"),
        "a report without cost keeps it"
    );
}

#[test]
fn a_report_going_backwards_in_its_attempt_is_set_aside() {
    let mut status = None;
    count(&mut status, 3, spent(Some("1.00"), Some(10)), t(0)).unwrap();
    let before = status.clone();
    let error = count(&mut status, 3, spent(Some("0.50"), Some(20)), t(1)).unwrap_err();
    assert!(error.contains("0.50") && error.contains("1.00"), "{error}");
    assert!(count(&mut status, 3, spent(None, Some(5)), t(1)).is_err());
    assert_eq!(status, before, "nothing counted");
}
