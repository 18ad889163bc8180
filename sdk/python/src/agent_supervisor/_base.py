"""What the sync and async supervisors share: the identity, the checks, the no-op mode and the
typed termination message. Their I/O (a thread or a task, a client or an async client) is theirs.
"""

from __future__ import annotations

import logging
import socket
from datetime import datetime, timezone
from typing import Any, NoReturn

from . import _core
from ._env import Identity

log = logging.getLogger("agent_supervisor")

#: Renew this often when the Lease does not say its duration and the caller did not say.
DEFAULT_RENEW_EVERY = 5.0


class SupervisorBase:
    """The state and the rules both twins follow."""

    #: The twin's Lease client (sync or async); `None` off Kubernetes.
    _api: Any

    def __init__(self, identity: Identity, renew_every: float | None = None) -> None:
        if renew_every is not None and not renew_every > 0:
            raise ValueError(f"renew_every must be a number of seconds above 0, not {renew_every}")
        self._identity = identity
        self._renew_every = renew_every
        self._reports = _core.Reports(handed=identity.progress)
        self._stopping = False
        self._noop_said = False
        self._behind_said = False
        self._failing = False
        #: Annotations reported and not yet taken by the API server: sent with the next.
        self._unsent: dict[str, str] = {}

    # What the operator handed this attempt.

    @property
    def checkpoint(self) -> str | None:
        """The checkpoint this attempt resumes from (`AGENT_CHECKPOINT`); `None`: from scratch."""
        return self._identity.checkpoint

    @property
    def progress(self) -> int | None:
        """The progress recorded before this attempt (`AGENT_PROGRESS`), or `None` if none."""
        return self._identity.progress

    @property
    def restart_count(self) -> int:
        """How many times the operator restarted this agent before this attempt."""
        return self._identity.restart_count

    @property
    def last_failure_reason(self) -> str | None:
        """Why the attempt before ended (`Error`, `OOMKilled`, `HeartbeatLost`, ...), or `None`."""
        return self._identity.last_failure_reason

    @property
    def spend(self) -> dict[str, Any]:
        """This attempt's spend so far, as reported: `{"cost": Decimal(...), "tokens": ...}`
        (a key only once reported; `{}` before any)."""
        return dict(self._reports.spend)

    @property
    def supervised(self) -> bool:
        """Whether heartbeats and reports go to a Lease (`AGENT_HEARTBEAT_LEASE` is set)."""
        return self._identity.lease is not None

    # Shared rules.

    @property
    def _holder(self) -> str:
        return self._identity.pod_name or socket.gethostname()

    def _noop(self) -> None:
        if not self._noop_said:
            self._noop_said = True
            log.info(
                "AGENT_HEARTBEAT_LEASE is not set: no heartbeat, and reports go nowhere "
                "(nothing supervises this process; the same code works under the operator)"
            )

    def _interval(self, lease_duration: int | None) -> float:
        """How often to renew: as asked, else a third of the Lease's duration (the heartbeat
        timeout), else every `DEFAULT_RENEW_EVERY` seconds."""
        if self._renew_every is not None:
            return self._renew_every
        if lease_duration:
            return lease_duration / 3
        return DEFAULT_RENEW_EVERY

    def _renewed(self, error: BaseException | None) -> None:
        """Says, once per streak, that renewals fail, and when they work again."""
        from ._kube import explain

        if error is None:
            if self._failing:
                log.info("renewing the heartbeat Lease works again")
            self._failing = False
            return
        if not self._failing:
            lease, namespace = self._identity.lease or "", self._identity.namespace
            log.warning("cannot renew the heartbeat: %s", explain(error, lease, namespace))
        self._failing = True

    def _report_body(self, annotations: dict[str, str]) -> dict[str, Any] | None:
        """The renewal that carries `annotations` and what earlier reports could not; `None`
        when nothing is to be sent (no Lease, or the agent decided to stop)."""
        if self._api is None:
            self._noop()
            return None
        if self._stopping:
            log.debug("report after the agent decided to stop: only in the termination message")
            return None
        self._unsent.update(annotations)
        body = _core.renewal(self._holder, datetime.now(timezone.utc))
        body["metadata"] = {"annotations": dict(self._unsent)}
        return body

    def _take(self, progress: object, checkpoint: object, spend: object) -> dict[str, str]:
        """Checks and remembers a report; the Lease annotations it sets."""
        annotations = self._reports.take(progress, checkpoint, spend)
        behind = progress is not None and _core.PROGRESS_ANNOTATION not in annotations
        if behind and not self._behind_said:
            self._behind_said = True
            log.info(
                "progress %s is below the %s recorded before this attempt (it resumed from an "
                "older checkpoint): not sent until it passes it",
                progress,
                self._reports.handed,
            )
        return annotations

    def _growing(self, progress: int) -> bool:
        """Whether `progress` is more than anything reported or handed before."""
        floor = self._reports.floor()
        return floor is None or progress > floor

    def _crashed(self, error: BaseException | None) -> None:
        """Leaving the block by an exception (not by `retry_after` or `shutdown`, which wrote
        their own): writes the attempt's spend as its termination message, so the operator counts
        all of it however the process ends."""
        path = self._identity.termination_log
        message = self._reports.crash_words()
        if not isinstance(error, Exception) or self._stopping or path is None or message is None:
            return
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(message)
        except OSError as failure:
            log.warning("cannot write the spend to %s: %s", path, failure)

    def _last_words(self, typed: dict[str, Any], code: int) -> NoReturn:
        """Writes the typed termination message and ends the process with `code`."""
        message = self._reports.last_words(typed)
        path = self._identity.termination_log
        if path is None:
            log.info("not in a supervised pod: termination message not written: %s", message)
        else:
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(message)
            except OSError as error:
                log.warning("cannot write the termination message to %s: %s", path, error)
        raise SystemExit(code)

    @staticmethod
    def _retry_after_message(when: object, reason: object) -> dict[str, Any]:
        return {"retryAfter": _core.check_retry_after(when), "reason": _core.check_reason(reason)}

    @staticmethod
    def _shutdown_message(kind: object, reason: object) -> dict[str, Any]:
        return {"shutdown": _core.check_kind(kind), "reason": _core.check_reason(reason)}
