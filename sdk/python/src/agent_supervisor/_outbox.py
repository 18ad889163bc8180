"""What the background sender writes next, and when: a pure state machine (no I/O, no clock reads;
the twins pass the time in), shared by the sync and the async supervisor.

Reports are coalesced: each annotation holds only its newest value until a write carries it. One
sender writes, one request at a time, and every write is built afresh when it is sent: the
renewal with the time it is sent at and the newest value of every annotation not yet taken, so
no older state is ever sent after a newer one and `renewTime` never goes back. Until a write of
the attempt is taken, each also takes away the spend of the attempt before (spend is per attempt).

With manual renewal (`manual`) nothing renews on a timer: a write renews the Lease only when it
is the attempt's first or carries an `alive()` not yet taken; a report otherwise writes its
annotations alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import _core


@dataclass
class Outbox:
    """The annotations waiting to be written, and when the next write is due (monotonic seconds).

    `renew_at`: when the next renewal is due, `None` while nothing renews (before `start()`, or a
    report made without it, or with manual renewal); `retry_at`: no write before it (after a
    failure).
    """

    #: Reported and not yet taken by the API server: the newest value of each annotation.
    pending: dict[str, str] = field(default_factory=dict)
    #: Whether no write of this attempt was taken yet: the next one is the attempt's first.
    first: bool = True
    renew_at: float | None = None
    retry_at: float = 0.0
    #: Failures in a row, and whether the last one is not to be tried again soon (a 403 or 404:
    #: not before a renewal interval).
    failures: int = 0
    waiting_long: bool = False
    #: How many reports were recorded, and how many of them a taken write carried.
    recorded: int = 0
    written: int = 0
    #: Manual renewal: a write renews only for an `alive()` (or as the attempt's first).
    manual: bool = False
    #: How many `alive()`s were marked, and how many of them a taken renewal carried.
    beats: int = 0
    beats_taken: int = 0
    #: The `beats` the write on its way carries (set by `body`).
    beats_sent: int = 0

    def alive(self) -> None:
        """Marks the agent alive: the next write renews the Lease (manual renewal)."""
        self.beats += 1
        if self.waiting_long:  # as for a report: a refusal is tried again on news
            self.retry_at = 0.0

    def record(self, annotations: dict[str, str]) -> int:
        """Records a report's annotations (the newest value wins); the report's number, which
        `written` reaches once a write carried it."""
        self.pending.update(annotations)
        self.recorded += 1
        if self.waiting_long:  # refused (a 403, a 404), not overloaded: a new report tries again
            self.retry_at = 0.0
        return self.recorded

    def due(self, now: float) -> float | None:
        """When the next write is due (maybe already, `<= now`); `None`: none is."""
        wanted = [] if self.renew_at is None else [self.renew_at]
        if self.pending or self.beats > self.beats_taken:
            wanted.append(now)
        if not wanted:
            return None
        return max(min(wanted), self.retry_at)

    def body(self, holder: str, now: datetime) -> tuple[dict[str, Any], int]:
        """The write to send now, and the number of the newest report it carries."""
        body: dict[str, Any] = {}
        if self.first or not self.manual or self.beats > self.beats_taken:
            body = _core.renewal(holder, now, first=self.first)
            self.beats_sent = self.beats
        if self.pending:
            annotations = body.setdefault("metadata", {}).setdefault("annotations", {})
            annotations.update(self.pending)
        return body, self.recorded

    def taken(self, body: dict[str, Any], carried: int, now: float, interval: float) -> None:
        """The API server took `body`: what it carried is no longer pending (unless reported
        again since), the next renewal is an interval away."""
        sent = body.get("metadata", {}).get("annotations", {})
        for key, value in sent.items():
            if key in self.pending and self.pending[key] == value:
                del self.pending[key]
        if "spec" in body:  # a renewal: the alive()s it carried are taken
            self.beats_taken = max(self.beats_taken, self.beats_sent)
        self.first = False
        self.failures = 0
        self.waiting_long = False
        self.retry_at = 0.0
        # A report made since with the values just written is on the Lease too.
        self.written = self.recorded if not self.pending else max(self.written, carried)
        if self.renew_at is not None:
            self.renew_at = now + interval

    def failed(self, wait: float | None, now: float, interval: float) -> None:
        """A write failed: try again after `wait` seconds (`None`: not soon, an interval away);
        never later than an interval."""
        self.failures += 1
        self.waiting_long = wait is None
        self.retry_at = now + (interval if wait is None else min(wait, interval))
        if self.renew_at is not None:
            self.renew_at = self.retry_at

    def found(self, spend: str, handed: int | None) -> None:
        """A Sandbox pod's identity was found (`_sandbox`): what was recorded before it is for
        it, the spend as `spend` (named after its holder), a progress below the one it hands
        (`handed`) dropped, since the operator would ignore it."""
        if _core.SPEND_ANNOTATION in self.pending:
            self.pending[_core.SPEND_ANNOTATION] = spend
        progress = self.pending.get(_core.PROGRESS_ANNOTATION)
        if progress is not None and handed is not None and int(progress) < handed:
            del self.pending[_core.PROGRESS_ANNOTATION]
