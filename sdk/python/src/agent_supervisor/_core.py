"""The pure core: what an agent reports and says as it ends, checked and written in the words the
operator reads. Nothing here does I/O; every check raises `ValueError` before anything is sent.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import ROUND_CEILING, Context, Decimal, InvalidOperation
from typing import Any

# Re-exported: the checks of times live in _time.
from ._time import check_duration as check_duration
from ._time import check_retry_after as check_retry_after
from ._time import format_duration as format_duration

PROGRESS_ANNOTATION = "supervisor.dev/progress"
CHECKPOINT_ANNOTATION = "supervisor.dev/checkpoint"
SPEND_ANNOTATION = "supervisor.dev/spend"
#: Until when no progress is expected (RFC 3339): the stall timeout waits until then.
EXPECT_SLOW_UNTIL_ANNOTATION = "supervisor.dev/expect-slow-until"
#: Why no progress is expected until then, for a person.
EXPECT_SLOW_REASON_ANNOTATION = "supervisor.dev/expect-slow-reason"
#: What the attempt before said of itself, taken off the Lease by an attempt's first write.
PER_ATTEMPT_ANNOTATIONS = (
    SPEND_ANNOTATION,
    EXPECT_SLOW_UNTIL_ANNOTATION,
    EXPECT_SLOW_REASON_ANNOTATION,
)

#: A checkpoint reference is at most this many bytes (UTF-8).
CHECKPOINT_LIMIT = 1024
#: The largest progress the operator takes: what the API server stores as an int64.
PROGRESS_LIMIT = 2**63 - 1
#: The operator keeps at most this many bytes of a reason; longer ones are cut here.
REASON_LIMIT = 256
#: The operator does not read a termination message longer than this.
MESSAGE_LIMIT = 4096
#: The operator reads a cost to this many decimal places: a finer one is rounded up to them.
COST_PLACES = 9
#: The largest cost the operator reads (a 64-bit count of billionths).
COST_LIMIT = Decimal(2**64 - 1).scaleb(-COST_PLACES)
#: The largest tokens the operator reads (an int64).
TOKENS_LIMIT = 2**63 - 1
SHUTDOWN_KINDS = ("economic", "voluntary")
#: Exit codes: a retry-after is a failure to restart later, a shutdown is not a failure.
RETRY_AFTER_EXIT_CODE = 1
#: A failure (`fail`), permanent or not, exits as a failed process does.
FAIL_EXIT_CODE = 1
SHUTDOWN_EXIT_CODE = 0
#: A process ended by SIGTERM exits 128 + 15, as the shell and the kubelet say it.
SIGTERM_EXIT_CODE = 143


def check_progress(progress: object, floor: int | None) -> int:
    """A progress to report: a whole number from 0 that is not below `floor`."""
    if isinstance(progress, bool) or not isinstance(progress, int):
        raise ValueError(f"progress must be a whole number (an int), not {progress!r}")
    if not 0 <= progress <= PROGRESS_LIMIT:
        raise ValueError(f"progress {progress} is not a whole number from 0 to {PROGRESS_LIMIT}")
    if floor is not None and progress < floor:
        raise ValueError(
            f"progress {progress} is lower than the {floor} this attempt reported before: "
            "progress only grows"
        )
    return progress


def check_checkpoint(checkpoint: object) -> str:
    """A checkpoint to report: a short, printable, non-empty reference to saved state."""
    if not isinstance(checkpoint, str):
        raise ValueError(f"checkpoint must be a str, not {type(checkpoint).__name__}")
    reference = checkpoint.strip()
    if not reference:
        raise ValueError("checkpoint is empty: report a reference to state, or no checkpoint")
    size = len(reference.encode())
    if size > CHECKPOINT_LIMIT:
        raise ValueError(
            f"checkpoint of {size} bytes is longer than {CHECKPOINT_LIMIT}: report a reference "
            "to the state (an object-store key, a step id), not the state"
        )
    if any(unicodedata.category(ch) == "Cc" for ch in reference):
        raise ValueError("checkpoint holds control characters (a line break, an escape)")
    return reference


# Sums and products of costs, exact for any amount the operator reads (20 digits) at any
# precision a price is given in.
_EXACT = Context(prec=100)


def _cost(value: object, name: str = 'spend "cost"') -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)):
        raise ValueError(f'{name} must be a decimal string such as "0.42", not {value!r}')
    try:
        # A float is read as the shortest text that gives it back: 0.1 is 0.1.
        cost = value if isinstance(value, Decimal) else Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f'{name} {value!r} is not a decimal number such as "0.42"') from None
    if not cost.is_finite() or cost < 0:
        raise ValueError(f"{name} {value!r} must be a finite number from 0")
    if cost > COST_LIMIT:
        raise ValueError(f"{name} {value!r} is more than the {COST_LIMIT} the operator reads")
    return cost.copy_abs()  # (-0 is 0)


def _tokens(value: object, name: str = 'spend "tokens"') -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= TOKENS_LIMIT:
        raise ValueError(f"{name} must be a whole number from 0 to {TOKENS_LIMIT}, not {value!r}")
    return value


def check_spend(spend: object, before: Mapping[str, Decimal | int]) -> dict[str, Decimal | int]:
    """This attempt's spend so far, merged over `before`: neither may go back within an attempt."""
    if not isinstance(spend, Mapping) or not spend:
        raise ValueError('spend must be a dict such as {"cost": "0.42", "tokens": 18000}')
    unknown = sorted(str(k) for k in spend if k not in ("cost", "tokens"))
    if unknown:
        raise ValueError(f'spend knows "cost" and "tokens", not {", ".join(unknown)}')
    merged = dict(before)
    if "cost" in spend:
        merged["cost"] = _cost(spend["cost"])
    if "tokens" in spend:
        merged["tokens"] = _tokens(spend["tokens"])
    for key, value in merged.items():
        if key in before and value < before[key]:
            raise ValueError(
                f"spend {key} {value} is lower than the {before[key]} reported before: report "
                "this attempt's spend so far, which only grows"
            )
    return merged


def add_spend(before: Mapping[str, Decimal | int], cost: object, tokens: object) -> dict[str, Any]:
    """`before` with `cost` and `tokens` added, exactly: the spend to report."""
    if cost is None and tokens is None:
        raise ValueError("add_spend() needs cost= or tokens=")
    total: dict[str, Any] = {}
    if cost is not None:
        added = _cost(cost, "add_spend cost")
        total["cost"] = _EXACT.add(Decimal(before.get("cost", 0)), added)
        if total["cost"] > COST_LIMIT:
            raise ValueError(f"spend cost {total['cost']} would pass the {COST_LIMIT} it may be")
    if tokens is not None:
        total["tokens"] = int(before.get("tokens", 0)) + _tokens(tokens, "add_spend tokens")
        if total["tokens"] > TOKENS_LIMIT:
            raise ValueError(f"spend tokens {total['tokens']} would pass {TOKENS_LIMIT}")
    return total


def price(tokens: int, per_1k: Decimal) -> Decimal:
    """What `tokens` cost at `per_1k` a thousand, exactly."""
    cost = _EXACT.divide(_EXACT.multiply(Decimal(tokens), per_1k), Decimal(1000))
    return cost.normalize(_EXACT)  # 0.006, not 0.006000


def check_price(value: object, name: str) -> Decimal:
    """A price (a cost per 1,000 tokens): a decimal from 0."""
    return _cost(value, name)


def cost_text(cost: Decimal) -> str:
    """A cost as the operator reads it: plain digits (never an exponent) and at most
    `COST_PLACES` places, a finer cost rounded up (a budget is never told less than was spent;
    rounding up keeps a growing cost growing)."""
    if cost.as_tuple().exponent < -COST_PLACES:  # type: ignore[operator]
        cost = cost.quantize(Decimal(1).scaleb(-COST_PLACES), ROUND_CEILING, _EXACT)
    return format(cost.copy_abs(), "f")


def spend_value(spend: Mapping[str, Decimal | int]) -> dict[str, str | int]:
    """Spend as the operator reads it: `cost` a decimal string, `tokens` an integer."""
    out: dict[str, str | int] = {}
    if "cost" in spend:
        out["cost"] = cost_text(Decimal(spend["cost"]))
    if "tokens" in spend:
        out["tokens"] = int(spend["tokens"])
    return out


def spend_annotation(spend: Mapping[str, Decimal | int], pod: str | None) -> str:
    """The Lease's spend annotation: the spend as the operator reads it, named after `pod`."""
    on_lease: dict[str, str | int] = spend_value(spend)
    if pod:
        on_lease["pod"] = pod
    return json.dumps(on_lease, separators=(",", ":"))


def expect_slow(duration: object, why: object, now: datetime) -> dict[str, str]:
    """The Lease annotations that say no progress is expected for `duration` from `now`: until
    when (RFC 3339 in UTC, to the second, rounded up) and why (cut as a reason is)."""
    seconds = check_duration(duration, "expect_slow")
    reason = check_reason(why)
    until = now.astimezone(timezone.utc) + timedelta(seconds=math.ceil(seconds))
    if until.microsecond:
        until += timedelta(microseconds=1_000_000 - until.microsecond)
    return {
        EXPECT_SLOW_UNTIL_ANNOTATION: until.strftime("%Y-%m-%dT%H:%M:%SZ"),
        EXPECT_SLOW_REASON_ANNOTATION: reason,
    }


def check_permanent(permanent: object) -> bool:
    """`fail`'s `permanent`: a bool."""
    if not isinstance(permanent, bool):
        raise ValueError(f"permanent must be True or False, not {permanent!r}")
    return permanent


def check_kind(kind: object) -> str:
    """A shutdown's kind: `economic` or `voluntary`."""
    if isinstance(kind, str) and kind.strip().lower() in SHUTDOWN_KINDS:
        return kind.strip().lower()
    raise ValueError(f"shutdown kind {kind!r} is not one of: {', '.join(SHUTDOWN_KINDS)}")


def check_reason(reason: object) -> str:
    """A reason for a person, cut to `REASON_LIMIT` bytes on a character boundary."""
    if not isinstance(reason, str):
        raise ValueError(f"reason must be a str, not {type(reason).__name__}")
    data = reason.strip().encode()[:REASON_LIMIT]
    return data.decode(errors="ignore")


def crash_reason(error: BaseException) -> str:
    """What the record says of a crash: the exception's type and text, as a traceback's last
    line says it (`RuntimeError: the search tool timed out`), cut to `REASON_LIMIT` bytes."""
    text = str(error).strip()
    name = type(error).__name__
    return check_reason(f"{name}: {text}" if text else name)


def micro_time(now: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def renewal(holder: str, now: datetime, *, first: bool = False) -> dict[str, Any]:
    """The merge patch that renews the Lease: held by `holder`, renewed `now`.

    The first renewal of an attempt also says when it was acquired and takes away the spend of
    the attempt before (spend is per attempt; that one's is already told) and its expect-slow
    (a slow step of the attempt before is not this one's).
    """
    spec: dict[str, Any] = {"holderIdentity": holder, "renewTime": micro_time(now)}
    patch: dict[str, Any] = {"spec": spec}
    if first:
        spec["acquireTime"] = spec["renewTime"]
        patch["metadata"] = {"annotations": dict.fromkeys(PER_ATTEMPT_ANNOTATIONS)}
    return patch


@dataclass
class Reports:
    """What this attempt reported so far, to check the next report against."""

    #: The progress recorded before this attempt (`AGENT_PROGRESS`): a lower one is not sent (the
    #: operator would ignore it), as after resuming from a checkpoint older than the last report.
    handed: int | None = None
    progress: int | None = None
    checkpoint: str | None = None
    spend: dict[str, Decimal | int] = field(default_factory=dict)

    def floor(self) -> int | None:
        """The progress to pass for a report of progress to be news: handed or reported."""
        known = [p for p in (self.handed, self.progress) if p is not None]
        return max(known) if known else None

    def _sent(self, progress: int | None) -> bool:
        return progress is not None and (self.handed is None or progress >= self.handed)

    def take(
        self,
        progress: object = None,
        checkpoint: object = None,
        spend: object = None,
        pod: str | None = None,
    ) -> dict[str, str]:
        """Checks a report whole, then remembers it; returns the Lease annotations it sets.

        A progress lower than one this attempt reported raises `ValueError`; one lower than
        `handed` is remembered but not sent. The spend on the Lease names `pod`, its maker: the
        operator counts it for that pod's attempt only, should it outlast the attempt there.
        """
        if progress is None and checkpoint is None and spend is None:
            raise ValueError("report() needs progress=, checkpoint= or spend=")
        annotations: dict[str, str] = {}
        new_progress = None if progress is None else check_progress(progress, self.progress)
        new_checkpoint = None if checkpoint is None else check_checkpoint(checkpoint)
        new_spend = None if spend is None else check_spend(spend, self.spend)
        if new_progress is not None:
            self.progress = new_progress
            if self._sent(new_progress):
                annotations[PROGRESS_ANNOTATION] = str(new_progress)
        if new_checkpoint is not None:
            self.checkpoint = new_checkpoint
            annotations[CHECKPOINT_ANNOTATION] = new_checkpoint
        if new_spend is not None:
            self.spend = new_spend
            annotations[SPEND_ANNOTATION] = spend_annotation(new_spend, pod)
        return annotations

    def last_words(self, typed: Mapping[str, Any]) -> str:
        """The typed termination message: `typed` (shutdown, retryAfter or permanent, and a
        reason) with the progress, checkpoint and spend reported so far."""
        message: dict[str, Any] = dict(typed)
        if self._sent(self.progress):
            message["progress"] = self.progress
        if self.checkpoint is not None:
            message["checkpoint"] = self.checkpoint
        if self.spend:
            message["spend"] = spend_value(self.spend)
        # At most 2 KiB of escaped checkpoint and 512 bytes of escaped reason: always within
        # MESSAGE_LIMIT (checked by the tests).
        return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def retry_after_message(when: object, reason: object) -> dict[str, Any]:
    """`retry_after`'s typed termination message, checked (before the last reports)."""
    return {"retryAfter": check_retry_after(when), "reason": check_reason(reason)}


def fail_message(reason: object, permanent: object) -> dict[str, Any]:
    """`fail`'s typed termination message, checked."""
    reason = check_reason(reason)
    if check_permanent(permanent):
        return {"permanent": True, "reason": reason}
    return {"reason": reason}


def shutdown_message(kind: object, reason: object) -> dict[str, Any]:
    """`shutdown`'s typed termination message, checked."""
    return {"shutdown": check_kind(kind), "reason": check_reason(reason)}
