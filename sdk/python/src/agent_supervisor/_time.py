"""Times and spans of time, checked as the operator reads them: a retry's time or delay, a slow
step's duration. Pure, like `_core`, which re-exports what it uses.
"""

from __future__ import annotations

import email.utils
import math
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal

__all__ = ["check_duration", "check_retry_after", "format_duration"]

# Go's time.ParseDuration without a sign, as the operator's API admits it.
_DURATION = re.compile(r"^(0|([0-9]{1,6}(\.[0-9]{1,9})?(ns|us|µs|ms|s|m|h))+)$")
_DURATION_PART = re.compile(r"([0-9]{1,6}(?:\.[0-9]{1,9})?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
)
# RFC 2822 (HTTP's Retry-After date): what the operator also reads (jiff's rfc2822 parser).
_RFC2822 = re.compile(
    r"^((Mon|Tue|Wed|Thu|Fri|Sat|Sun), )?\d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d{2}:\d{2}(:\d{2})? ([+-]\d{4}|GMT|UT)$"
)
_YEAR = 365 * 24 * 3600


def format_duration(seconds: float | Decimal) -> str:
    """`seconds` in Go's duration format (`15m`, `1h30m`, `2.5s`), to the millisecond."""
    total = round(Decimal(str(seconds)) * 1000)
    hours, rest = divmod(total, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, millis = divmod(rest, 1000)
    if total < 1000:
        return f"{millis}ms" if total else "0s"
    if hours > 999_999:
        raise ValueError(f"retry after {seconds}s is too far away")
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    if millis:
        text += f"{secs}.{millis:03d}".rstrip("0") + "s"
    elif secs:
        text += f"{secs}s"
    return text


def _rfc3339(text: str) -> str | None:
    match = _RFC3339.match(text)
    if not match:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    try:
        datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:
        return None
    offset = match.group(8)
    if offset not in ("Z", "z") and (int(offset[1:3]) > 23 or int(offset[4:6]) > 59):
        return None
    return text


def _rfc2822(text: str) -> str | None:
    if not _RFC2822.match(text):
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    weekday = text[:3] if text[3:4] == "," else None
    if weekday is not None and parsed.strftime("%a") != weekday:
        return None  # the operator refuses a weekday that is not the date's
    return text


def check_retry_after(when: object) -> str:
    """When to be restarted, as the operator reads it: a duration (`"15m"`), a number of seconds,
    a `timedelta`, an RFC 3339 time, an RFC 2822 date (HTTP's `Retry-After`) or a timezone-aware
    `datetime`."""
    if isinstance(when, bool):
        raise ValueError(f"retry after {when!r}: give a duration such as '15m' or a time")
    if isinstance(when, timedelta):
        when = when.total_seconds()
    if isinstance(when, (int, float, Decimal)):
        if not math.isfinite(when) or not 0 <= when <= _YEAR:
            raise ValueError(f"retry after {when} seconds: give a number from 0 to a year")
        return format_duration(when)
    if isinstance(when, datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError("retry after a datetime without a timezone: give an aware one")
        utc = when.astimezone(timezone.utc)
        return utc.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"
    if isinstance(when, str):
        text = when.strip()
        if 0 < len(text) <= 64:
            if _DURATION.match(text):
                return text
            if text.isascii() and text.isdigit() and int(text) <= _YEAR:
                return text
            if _rfc3339(text) or _rfc2822(text):
                return text
        raise ValueError(
            f"retry after {when!r}: write a duration such as '30s', '15m' or '1h30m', or an "
            "RFC 3339 time such as '2026-11-22T10:00:00Z'"
        )
    raise ValueError(f"retry after {when!r}: give a duration such as '15m' or a time")


def check_duration(duration: object, what: str) -> Decimal:
    """A span of time above 0 and at most a year, in seconds: a Go duration (`"2h"`, `"1h30m"`,
    as `retry_after` takes them), a number of seconds (`5400`, `"5400"`) or a `timedelta`."""
    seconds: Decimal | None = None
    if isinstance(duration, timedelta):
        seconds = Decimal(str(duration.total_seconds()))
    elif isinstance(duration, (int, float, Decimal)) and not isinstance(duration, bool):
        seconds = Decimal(str(duration)) if math.isfinite(duration) else None
    elif isinstance(duration, str):
        text = duration.strip()
        if text.isascii() and text.isdigit() and len(text) <= 12:
            seconds = Decimal(text)
        elif len(text) <= 64 and _DURATION.match(text):
            seconds = sum(
                (Decimal(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text)),
                Decimal(0),
            )
    if seconds is None or not 0 < seconds <= _YEAR:
        raise ValueError(
            f"{what} {duration!r}: give a duration above 0 and up to a year, such as '90m', "
            "'2h' or a number of seconds"
        )
    return seconds
