"""What the sync and async supervisors share: the identity, the checks, the no-op mode, the
sender's state (`Outbox`), the SIGTERM handler and the typed termination message. Their I/O (a
thread or a task, a client or an async client) is theirs.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from datetime import datetime, timezone
from types import FrameType
from typing import Any, Literal, NoReturn

from . import _core, _sandbox
from ._env import Identity, Outcome
from ._outbox import Outbox

log = logging.getLogger("agent_supervisor")

#: Renew this often when the Lease does not say its duration and the caller did not say.
DEFAULT_RENEW_EVERY = 5.0
#: Entering the `with` block waits at most this many seconds for the first renewal to be taken
#: (it goes on trying in the background after). With the Lease's duration read after it, one
#: request each, against an API server that never answers entering costs this and no more; a
#: longer wait would only delay an agent whose API server is down.
START_TIMEOUT = 5.0
#: Leaving the `with` block waits at most this many seconds for what was reported to be written
#: (`flush`), then stops the sender: the last reports of an agent that ends have a chance to
#: reach the Lease, and an API server that never answers costs the exit this much.
CLOSE_TIMEOUT = 5.0

#: How the Lease is renewed: by the sender every interval, or when the agent says `alive()`.
Renew = Literal["background", "manual"]
RENEW_MODES = ("background", "manual")


class SupervisorBase:
    """The state and the rules both twins follow."""

    #: The twin's Lease client (sync or async); `None` off Kubernetes.
    _api: Any

    def __init__(
        self, identity: Identity, renew_every: float | None = None, renew: Renew = "background"
    ) -> None:
        if renew_every is not None and not renew_every > 0:
            raise ValueError(f"renew_every must be a number of seconds above 0, not {renew_every}")
        if not isinstance(renew, str) or renew not in RENEW_MODES:
            raise ValueError(f"renew must be 'background' or 'manual', not {renew!r}")
        if renew == "manual" and renew_every is not None:
            raise ValueError(
                "renew_every has no use with renew='manual': the Lease is renewed when the "
                "agent calls alive()"
            )
        self._identity = identity
        self._renew_every = renew_every
        self._reports = _core.Reports(handed=identity.progress)
        #: What the background sender writes next, and when.
        self._outbox = Outbox(manual=renew == "manual")
        #: Seconds between renewals: as asked, else the default until the Lease's duration is read.
        self._every = renew_every or DEFAULT_RENEW_EVERY
        self._duration_read = renew_every is not None
        #: `start()` ran: the sender renews (every interval, or on `alive()`).
        self._started = False
        #: The agent decided to stop (retry_after, shutdown, a SIGTERM): nothing more is written.
        self._stopping = False
        #: The `with` block ended (close()): a report now is a mistake, and raises.
        self._closed = False
        #: A SIGTERM came: the termination message holds the last words, rewritten on close.
        self._terminated = False
        self._previous_sigterm: Any = None
        self._noop_said = False
        #: Why nothing supervises this process, when there is more to say than the usual line.
        self._noop_why: str | None = None
        #: In an agent-sandbox Sandbox's pod, until its identity is found or given up on: the
        #: sender's search for it on its Lease, from `start()` on.
        self._lookup: _sandbox.Lookup | None = None
        self._behind_said = False
        self._stopped_said = False
        self._failing = False

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
    def previous(self) -> Outcome | None:
        """How the attempt before ended (`AGENT_LAST_FAILURE`): its attempt, reason, exit code,
        message and class (`klass`); `None` on a first start, or if the variable does not
        parse (logged)."""
        return self._identity.previous

    @property
    def spend(self) -> dict[str, Any]:
        """This attempt's spend so far, as reported: `{"cost": Decimal(...), "tokens": ...}`
        (a key only once reported; `{}` before any)."""
        return dict(self._reports.spend)

    @property
    def supervised(self) -> bool:
        """Whether heartbeats and reports go to a Lease (`AGENT_HEARTBEAT_LEASE` is set; in an
        agent-sandbox Sandbox's pod, once its identity is found: on entering the block, or in
        the background a moment later)."""
        return self._identity.lease is not None

    # Shared rules.

    @property
    def _holder(self) -> str:
        """Who renews the Lease and reports spend: `AGENT_HOLDER`, else the pod's name."""
        return self._identity.holder or self._identity.pod_name or socket.gethostname()

    def _noop(self) -> None:
        if not self._noop_said:
            self._noop_said = True
            if self._noop_why is not None:
                log.warning("%s", self._noop_why)
                return
            log.info(
                "AGENT_HEARTBEAT_LEASE is not set: no heartbeat, and reports go nowhere "
                "(nothing supervises this process; the same code works under the operator)"
            )

    def _look_in_pod(self) -> None:
        """From `from_env`: in an agent-sandbox Sandbox's pod (no `AGENT_NAME`, an API token),
        the identity is to be read from its Lease once the block is entered."""
        found = _sandbox.target(self._identity)
        if isinstance(found, str):
            self._noop_why = found
        elif found is not None:
            self._lookup = _sandbox.Lookup(found)

    def _found(self, identity: Identity, api: Any) -> None:
        """The sender found this Sandbox pod's identity (with the lock held): takes it, and the
        Lease client `api` (`None`: an Agent without a heartbeat). The first write, due since
        the block was entered (`_begin`), goes now with what was reported meanwhile, which now
        names this attempt's holder."""
        self._identity = identity
        self._api = api
        self._lookup = None
        self._reports.handed = identity.progress
        spend = _core.spend_annotation(self._reports.spend, self._holder)
        self._outbox.found(spend, identity.progress)
        if api is None:
            self._noop()

    def _given_up(self, why: str) -> None:
        """The sender gave up looking for this Sandbox pod's identity: no-op mode, said once."""
        self._lookup = None
        self._noop_why = why
        self._noop()

    def _stop_looking(self) -> _sandbox.Lookup | None:
        """The block ends (`_halt`): no more looking for a Sandbox pod's identity, and if it was
        looked for in vain, that is said (once). Returns the search, to close its client."""
        lookup = self._lookup
        if lookup is not None and lookup.tried:
            self._given_up(lookup.unfound())
        self._lookup = None
        return lookup

    def _entered(self) -> bool:
        """Whether entering the block has waited enough (at most `START_TIMEOUT`): the first
        renewal taken or refused; in a Sandbox's pod, first the first read of its Lease."""
        if self._stopping:
            return True
        if self._lookup is not None:
            return self._lookup.tried
        return self._api is None or not self._outbox.first or self._outbox.waiting_long

    def _flushed(self, target: int) -> bool:
        """Whether the reports up to `target` are on the Lease (or never will be: no-op mode)."""
        if self._lookup is not None:
            return False
        return self._api is None or self._outbox.written >= target

    def _interval(self, lease_duration: int | None) -> float:
        """How often to renew: as asked, else a third of the Lease's duration (the heartbeat
        timeout), else every `DEFAULT_RENEW_EVERY` seconds."""
        if self._renew_every is not None:
            return self._renew_every
        if lease_duration:
            return lease_duration / 3
        return DEFAULT_RENEW_EVERY

    def _said(self, error: BaseException | None, reporting: bool) -> None:
        """Says, once per streak, that writes fail, and when they work again."""
        from ._kube import explain

        if error is None:
            if self._failing:
                log.info("renewing the heartbeat Lease works again")
            self._failing = False
            return
        if not self._failing:
            lease, namespace = self._identity.lease or "", self._identity.namespace
            if reporting:
                what = "report not taken, sent again with the next write"
            else:
                what = "cannot renew the heartbeat"
            log.warning("%s: %s", what, explain(error, lease, namespace))
        self._failing = True

    def _check_open(self, verb: str) -> None:
        """Raises for a report after the `with` block ended: nothing would send it."""
        if self._closed:
            raise RuntimeError(
                f"{verb}() after the supervisor was closed (its `with` block ended): nothing "
                "sends it any more. Report inside the block, or flush() before leaving it"
            )

    def _queue(self, annotations: dict[str, str]) -> bool:
        """Records a checked report for the sender; whether it has something to write."""
        if self._api is None and self._lookup is None:
            self._noop()
            return False
        if self._stopping:
            if not self._stopped_said:
                self._stopped_said = True
                log.warning(
                    "report after the agent decided to stop (retry_after, shutdown or SIGTERM): "
                    "not sent to the Lease%s",
                    "; it goes in the termination message" if self._terminated else "",
                )
            return False
        if not annotations:
            return False
        self._outbox.record(annotations)
        return self._api is not None  # else sent once the identity is read, if it is

    def _beat(self) -> bool:
        """Marks the agent alive for manual renewal; whether the sender has something to write
        (in background renewal, a no-op)."""
        if self._api is None:
            if self._lookup is None:
                self._noop()
            return False
        if not self._outbox.manual or self._stopping:
            return False
        self._outbox.alive()
        return True

    def _begin(self) -> bool:
        """`start()`'s first renewal, due now (with the lock held); `False` if started already or
        stopping. In manual renewal it is the one renewal no `alive()` asked for: the agent is
        alive as it starts, and the first write of an attempt takes the Lease over."""
        if self._started or self._stopping:
            return False
        self._started = True
        if self._lookup is not None:
            self._lookup.begin(time.monotonic())
        if self._outbox.manual:
            self._outbox.alive()
        else:
            self._outbox.renew_at = time.monotonic()
        return True

    @staticmethod
    def _expect_slow_annotations(duration: object, why: object) -> dict[str, str]:
        return _core.expect_slow(duration, why, datetime.now(timezone.utc))

    def _take(self, progress: object, checkpoint: object, spend: object) -> dict[str, str]:
        """Checks and remembers a report; the Lease annotations it sets."""
        annotations = self._reports.take(progress, checkpoint, spend, self._holder)
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

    # A clean stop on SIGTERM (how Kubernetes stops a pod).

    def _install_sigterm(self) -> None:
        """Handles SIGTERM (`_on_sigterm`), where that is safe: from the main thread, and not
        over a handler that ignores it; one the author installed is chained to."""
        if self._previous_sigterm is not None:  # installed already
            return
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_IGN or previous is None:  # None: not installed from Python
            return
        self._previous_sigterm = previous
        signal.signal(signal.SIGTERM, self._on_sigterm)

    def _uninstall_sigterm(self) -> None:
        """Puts back the handler there was, if this one's is still the one installed."""
        if threading.current_thread() is not threading.main_thread():
            return
        if self._previous_sigterm is not None and signal.getsignal(signal.SIGTERM) == (
            self._on_sigterm
        ):
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        self._previous_sigterm = None

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """Stops renewing, writes the last words (progress, checkpoint, spend) to the termination
        log, then calls the handler the author installed, if any, or else raises
        `SystemExit(143)` so that `finally` blocks and `with` exits run. Takes no lock: it runs
        between two lines of the main thread, which may hold one.

        Installed on entering the block while a Sandbox pod's identity was looked for, and none
        found (yet): as if it were not, the author's handler or the default (the process ends)."""
        previous = self._previous_sigterm
        if self._api is None and self._identity.termination_log is None:
            if callable(previous):
                previous(signum, frame)
                return
            signal.signal(signum, previous)
            signal.raise_signal(signum)
            return
        self._terminated = True
        self._stopping = True
        self._write_log(self._reports.last_words({}))
        if callable(previous):
            previous(signum, frame)
            return
        raise SystemExit(_core.SIGTERM_EXIT_CODE)

    def _write_log(self, message: str) -> None:
        """Writes the termination message, where the kubelet reads it."""
        path = self._identity.termination_log
        if path is None:
            log.info("not in a supervised pod: termination message not written: %s", message)
            return
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(message)
        except OSError as error:
            log.warning("cannot write the termination message to %s: %s", path, error)

    def _closing(self) -> None:
        """After the sender stopped: marks the supervisor closed; after a SIGTERM, the last
        words again, with what the agent's cleanup reported since."""
        self._closed = True
        self._uninstall_sigterm()
        if self._terminated:
            self._write_log(self._reports.last_words({}))

    def _crashed(self, error: BaseException | None) -> None:
        """Leaving the block by an exception (not by `retry_after` or `shutdown`, which wrote
        their own): writes the exception as the failure's reason, with the progress, checkpoint
        and spend reported so far, as its termination message: the record says why it crashed,
        and the operator counts all of its spend however the process ends."""
        path = self._identity.termination_log
        if not isinstance(error, Exception) or self._stopping or path is None:
            return
        self._write_log(self._reports.last_words({"reason": _core.crash_reason(error)}))

    def _last_words(self, typed: dict[str, Any], code: int) -> NoReturn:
        """Writes the typed termination message and ends the process with `code`."""
        self._write_log(self._reports.last_words(typed))
        raise SystemExit(code)
