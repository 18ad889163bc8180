"""The pure core: the words the operator reads."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from agent_supervisor import _core


@pytest.mark.parametrize(
    ("when", "written"),
    [
        ("15m", "15m"),
        (" 1h30m ", "1h30m"),
        ("250ms", "250ms"),
        ("0", "0"),
        ("120", "120"),
        (90, "1m30s"),
        (0.25, "250ms"),
        (1.5, "1.5s"),
        (0, "0s"),
        (Decimal("5400"), "1h30m"),
        (timedelta(minutes=15), "15m"),
        (timedelta(hours=2, seconds=3), "2h3s"),
        ("2026-11-22T10:00:00Z", "2026-11-22T10:00:00Z"),
        ("2026-11-22T10:00:00.5+01:00", "2026-11-22T10:00:00.5+01:00"),
        ("Sun, 22 Nov 2026 10:00:00 GMT", "Sun, 22 Nov 2026 10:00:00 GMT"),
        ("22 Nov 2026 10:00 +0100", "22 Nov 2026 10:00 +0100"),
        (
            datetime(2026, 11, 22, 11, 0, tzinfo=timezone(timedelta(hours=1))),
            "2026-11-22T10:00:00Z",
        ),
        (datetime(2026, 11, 22, 10, 0, 0, 250000, tzinfo=timezone.utc), "2026-11-22T10:00:00.25Z"),
    ],
)
def test_retry_after_is_written_as_the_operator_reads_it(when: object, written: str) -> None:
    assert _core.check_retry_after(when) == written


@pytest.mark.parametrize(
    "when",
    [
        "soon",
        "",
        "1.5",
        "-1s",
        "1d",
        "1234567h",
        "15 m",
        "2026-11-22",
        "2026-11-22T10:00:00",
        "2026-11-22T25:00:00Z",
        "2026-02-30T10:00:00Z",
        "2026-11-22T10:00:00+24:00",
        "Mon, 22 Nov 2026 10:00:00 GMT",
        "Sun, 31 Nov 2026 10:00:00 GMT",
        "Sun, 22 Nov 2026 10:00:00",
        "9" * 65,
        -1,
        float("nan"),
        float("inf"),
        400 * 24 * 3600,
        timedelta(seconds=-1),
        datetime(2026, 11, 22, 10, 0),
        True,
        None,
        [15],
    ],
)
def test_bad_retry_after_is_refused(when: object) -> None:
    with pytest.raises(ValueError, match="retry after"):
        _core.check_retry_after(when)


def test_progress_is_bounded_as_the_api_server_stores_it() -> None:
    assert _core.check_progress(2**63 - 1, None) == 2**63 - 1
    assert _core.check_progress(0, None) == 0
    assert _core.check_progress(7, 7) == 7


def test_checkpoints_are_checked_as_the_operator_checks_them() -> None:
    assert _core.check_checkpoint("  s3://b/k  ") == "s3://b/k"
    assert _core.check_checkpoint("x" * 1024) == "x" * 1024
    assert _core.check_checkpoint("<b>ünïcode</b>\u200b") == "<b>ünïcode</b>\u200b"
    for bad in ("a\tb", "a\x1b[31m", "a\x7f"):
        with pytest.raises(ValueError, match="control"):
            _core.check_checkpoint(bad)


def test_spend_is_written_with_cost_a_decimal_string() -> None:
    reports = _core.Reports()
    annotations = reports.take(spend={"cost": Decimal("0.420"), "tokens": 18000})
    assert json.loads(annotations[_core.SPEND_ANNOTATION]) == {"cost": "0.420", "tokens": 18000}
    assert json.loads(reports.take(spend={"cost": 0.5})[_core.SPEND_ANNOTATION])["cost"] == "0.5"
    assert json.loads(reports.take(spend={"cost": "1e2"})[_core.SPEND_ANNOTATION])["cost"] == "100"


def test_reasons_are_cut_on_a_character_boundary() -> None:
    reason = _core.check_reason("é" * 200)
    assert len(reason.encode()) <= _core.REASON_LIMIT
    assert reason == "é" * 128


def test_the_longest_message_is_within_what_the_operator_reads() -> None:
    reports = _core.Reports()
    reports.take(
        progress=2**63 - 1,
        checkpoint='"\\' * 512,
        spend={"cost": _core.COST_LIMIT, "tokens": 2**63 - 1},
    )
    typed = {
        "retryAfter": "2026-11-22T10:00:00.123456789+01:00",
        "reason": _core.check_reason('"' * 999),
    }
    message = reports.last_words(typed)
    assert len(message.encode()) <= _core.MESSAGE_LIMIT
    assert json.loads(message)["checkpoint"] == '"\\' * 512


def test_the_renewal_is_a_merge_patch_of_the_holder_and_the_time() -> None:
    now = datetime(2026, 11, 22, 10, 0, 0, 5, tzinfo=timezone.utc)
    assert _core.renewal("pod-1", now) == {
        "spec": {"holderIdentity": "pod-1", "renewTime": "2026-11-22T10:00:00.000005Z"}
    }
    first = _core.renewal("pod-1", now, first=True)
    assert first["spec"]["acquireTime"] == "2026-11-22T10:00:00.000005Z"
    assert first["metadata"] == {
        "annotations": {
            _core.SPEND_ANNOTATION: None,
            _core.EXPECT_SLOW_UNTIL_ANNOTATION: None,
            _core.EXPECT_SLOW_REASON_ANNOTATION: None,
        }
    }, "what the attempt before said of itself is taken away"


def test_a_progress_below_the_handed_one_is_remembered_not_told() -> None:
    reports = _core.Reports(handed=120)
    assert reports.take(progress=80, checkpoint="step-80") == {
        _core.CHECKPOINT_ANNOTATION: "step-80"
    }
    assert json.loads(reports.last_words({"shutdown": "voluntary"})) == {
        "shutdown": "voluntary",
        "checkpoint": "step-80",
    }
    assert reports.floor() == 120
    with pytest.raises(ValueError, match="lower than the 80"):
        reports.take(progress=79)
    assert reports.take(progress=120) == {_core.PROGRESS_ANNOTATION: "120"}
    assert json.loads(reports.last_words({}))["progress"] == 120


@pytest.mark.parametrize(
    ("duration", "seconds"),
    [
        ("2h", 7200),
        (" 90m ", 5400),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("250ms", Decimal("0.25")),
        ("5400", 5400),
        (5400, 5400),
        (0.5, Decimal("0.5")),
        (Decimal("60"), 60),
        (timedelta(hours=2), 7200),
    ],
)
def test_a_duration_is_read_as_retry_after_reads_it(duration: object, seconds: object) -> None:
    assert _core.check_duration(duration, "expect_slow") == seconds


@pytest.mark.parametrize(
    "duration",
    [
        "0",
        "0s",
        0,
        -5,
        "-2h",
        "2 hours",
        "",
        "2026-11-22T10:00:00Z",
        True,
        None,
        float("inf"),
        float("nan"),
        "9000h",
        366 * 24 * 3600,
        timedelta(0),
        [1],
    ],
)
def test_a_bad_duration_raises(duration: object) -> None:
    with pytest.raises(ValueError, match="give a duration above 0"):
        _core.check_duration(duration, "expect_slow")


def test_expect_slow_says_until_when_in_utc_to_the_second_rounded_up() -> None:
    now = datetime(2026, 11, 22, 10, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=1)))
    assert _core.expect_slow("2h", " fine-tuning run ", now) == {
        _core.EXPECT_SLOW_UNTIL_ANNOTATION: "2026-11-22T11:00:01Z",
        _core.EXPECT_SLOW_REASON_ANNOTATION: "fine-tuning run",
    }
    exact = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)
    assert _core.expect_slow(0.2, "x", exact)[_core.EXPECT_SLOW_UNTIL_ANNOTATION] == (
        "2026-11-22T10:00:01Z"
    ), "never sooner than asked"
    long = _core.expect_slow("1h", "é" * 200, exact)[_core.EXPECT_SLOW_REASON_ANNOTATION]
    assert long == "é" * 128, "the reason is cut as a reason is"
    with pytest.raises(ValueError, match="reason must be a str"):
        _core.expect_slow("1h", None, exact)


def test_permanent_is_a_bool() -> None:
    assert _core.check_permanent(True) is True
    for bad in (1, "yes", None):
        with pytest.raises(ValueError, match="permanent must be True or False"):
            _core.check_permanent(bad)


def test_a_crash_reason_is_the_exceptions_last_line_cut_to_the_limit() -> None:
    assert _core.crash_reason(RuntimeError("the tool timed out")) == (
        "RuntimeError: the tool timed out"
    )
    assert _core.crash_reason(KeyError("api_key")) == "KeyError: 'api_key'"
    assert _core.crash_reason(TimeoutError()) == "TimeoutError"
    long = _core.crash_reason(ValueError("é" * 400))
    assert len(long.encode()) <= _core.REASON_LIMIT
    assert long.startswith("ValueError: éé")
