"""`Supervisor`: the agent's side of agent-supervisor, for code that does not use asyncio."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, NoReturn

from . import _core, _sandbox
from ._base import CLOSE_TIMEOUT, START_TIMEOUT, Renew, SupervisorBase
from ._env import Identity
from ._kube import REQUEST_TIMEOUT, LeaseApi, explain, retry_wait

log = logging.getLogger("agent_supervisor")


class Supervisor(SupervisorBase):
    """Speaks to the operator that runs this agent: heartbeats, reports and last words.

    Make one with `Supervisor.from_env()` and use it in a `with` block: while the block runs, a
    background thread renews the heartbeat Lease and writes the reports, which return at once.
    Without `AGENT_HEARTBEAT_LEASE` every call is a no-op (logged once), so the same code runs on
    a laptop and in a unit test. All methods may be called from any thread.
    """

    def __init__(
        self,
        identity: Identity,
        api: LeaseApi | None = None,
        renew_every: float | None = None,
        renew: Renew = "background",
    ) -> None:
        super().__init__(identity, renew_every, renew)
        self._api = api
        self._lock = threading.Lock()  # the reports and the outbox
        self._changed = threading.Condition(self._lock)  # a write was taken or failed
        self._wake = threading.Event()  # something for the sender to look at
        self._thread: threading.Thread | None = None

    @classmethod
    def from_env(
        cls, *, renew_every: float | None = None, renew: Renew = "background"
    ) -> Supervisor:
        """A supervisor for this process, from the `AGENT_*` variables the operator sets.

        `renew_every`: seconds between renewals of the heartbeat Lease. By default a third of the
        Lease's `spec.leaseDurationSeconds`, which the operator sets to the Agent's
        `heartbeat.timeout` (5 seconds if the Lease does not say).

        `renew`: `"background"` (the default: the sender renews every interval) or `"manual"`:
        the Lease is renewed on entering and then only when the agent calls `alive()` (systemd's
        `WATCHDOG=1`), so a loop that hangs loses its heartbeat even while the process lives.
        Anything else raises `ValueError`, as does `renew_every` with `"manual"`.

        In a pod the client uses the in-cluster config, elsewhere the standard kubeconfig
        (`$KUBECONFIG` or `~/.kube/config`); without `AGENT_HEARTBEAT_LEASE` it makes no client.

        In a pod without `AGENT_NAME` but with an API token (an agent-sandbox Sandbox's), it
        sends nothing yet: entering the block reads the identity from the Lease named after the
        pod (see `start`).
        """
        identity = Identity.from_env()
        api = None
        if identity.lease is not None:
            api = LeaseApi(identity.lease, identity.namespace or None)
        supervisor = cls(identity, api, renew_every, renew)
        supervisor._look_in_pod()
        return supervisor

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._crashed(error)
        self.close()

    def start(self) -> None:
        """Starts renewing the Lease in a background thread (`with` calls this): the first
        renewal now, then one every interval. Waits for the first to be taken, at most
        `START_TIMEOUT` seconds; a failed renewal is logged, not raised, and tried again.

        In an agent-sandbox Sandbox's pod the thread first reads the identity from the pod's
        Lease, within the same wait. Not there yet (refused, absent, not written): the block
        runs unsupervised, and the thread reads again every second, at most `LOOKUP_TIMEOUT`
        seconds; found, it takes it (the properties too) and renews. Not found in time, or no
        token: every call is a no-op, said once."""
        if self._api is None and self._lookup is None:
            self._noop()
            if self._identity.termination_log is not None and not self._closed:
                self._install_sigterm()  # the last words need no heartbeat
            return
        with self._lock:
            if not self._begin():
                return
            self._sender()
        self._install_sigterm()
        self._wake.set()
        with self._lock:
            self._changed.wait_for(self._entered, START_TIMEOUT)

    def close(self) -> None:
        """Waits at most `CLOSE_TIMEOUT` seconds for what was reported to be written, stops
        renewing and closes the client (leaving the `with` block calls this). A report after it
        raises `RuntimeError`."""
        if self._closed:
            return
        deadline = time.monotonic() + CLOSE_TIMEOUT
        if not self._stopping:
            self._drain(CLOSE_TIMEOUT)
        self._halt(max(0.0, deadline - time.monotonic()))
        self._closing()
        if self._api is not None:
            self._api.close()

    def flush(self, timeout: float | None = None) -> bool:
        """Waits until everything reported so far is on the Lease, at most `timeout` seconds
        (`None`: as long as it takes); whether it is. Never needed for the operator to have it:
        only to wait for it. (In a Sandbox's pod still looking for its identity, what was
        reported goes once it is found: this waits for that too.)"""
        with self._lock:
            target = self._outbox.recorded
            self._changed.wait_for(lambda: self._flushed(target) or self._thread is None, timeout)
            return self._flushed(target)

    def _drain(self, timeout: float) -> None:
        """`flush`, unless the API server refused the last write (a 403, a 404): no wait for
        what would not be taken."""
        if self._api is None:
            return
        with self._lock:
            target = self._outbox.recorded
            self._changed.wait_for(
                lambda: (
                    self._outbox.written >= target
                    or self._thread is None
                    or self._outbox.waiting_long
                ),
                timeout,
            )

    def report(
        self,
        *,
        progress: int | None = None,
        checkpoint: str | None = None,
        spend: dict[str, Any] | None = None,
    ) -> None:
        """Reports on the heartbeat Lease (a write that also renews it), and returns at once: a
        background thread writes the newest state (`flush()` waits for it).

        `progress`: steps done over all attempts, a whole number that only grows. One below
        `self.progress` (after resuming from an older checkpoint) is not sent until it passes it:
        the operator would ignore it. `checkpoint`: a reference to state a later attempt can
        resume from (at most 1 KiB). `spend`: this attempt's spend so far, `{"cost": "0.42",
        "tokens": 18000}` (`cost` a decimal string, either key may be left out).

        Raises `ValueError`, before anything is recorded, for a bad argument, and `RuntimeError`
        after the `with` block ended. A report the API server does not take is logged and
        sent again, with what was reported since.
        """
        self._check_open("report")
        with self._lock:
            wake = self._queue(self._take(progress, checkpoint, spend))
            if wake:
                self._sender()
        if wake:
            self._wake.set()

    def add_spend(self, *, cost: Any = None, tokens: int | None = None) -> None:
        """Adds to this attempt's spend and reports the new total, as `report(spend=...)`: it
        returns at once, a background thread writes it.

        `cost`: what a call cost, a decimal (`"0.002"`, a `Decimal`; a float is read as it
        prints); `tokens`: how many it used. Sums are exact (`Decimal`); `self.spend` is the
        total. Call it after each model call; reports made while a write is on its way go
        together in the next. Safe from any thread.

        Raises `ValueError`, before anything is recorded, for a negative, unparsable or missing
        amount, and `RuntimeError` after the `with` block ended.
        """
        self._check_open("add_spend")
        with self._lock:
            spend = _core.add_spend(self._reports.spend, cost, tokens)
            wake = self._queue(self._take(None, None, spend))
            if wake:
                self._sender()
        if wake:
            self._wake.set()

    def alive(self) -> None:
        """Says the agent is alive, with `renew="manual"`: the next write renews the Lease's
        `renewTime` (calls made while one is on its way go together in the next), and it
        returns at once. Call it from the agent's own loop, well within the heartbeat timeout.
        With the default background renewal it does nothing; it never raises.
        """
        with self._lock:
            wake = self._beat()
            if wake:
                self._sender()
        if wake:
            self._wake.set()

    def expect_slow(self, duration: Any, why: str) -> None:
        """Says no progress is expected for `duration` from now (a long step: a fine-tuning run,
        a big download), so the operator's stall timeout waits until then (capped by the
        policy's `progress.maxExtension`).

        `duration`: a Go duration (`"2h"`, `"90m"`, `"1h30m"`), a number of seconds or a
        `timedelta`, above 0 and at most a year; `why`: for a person (cut to 256 bytes). Sets the
        Lease annotations `supervisor.dev/expect-slow-until` (now + `duration`, RFC 3339 in UTC)
        and `supervisor.dev/expect-slow-reason` with the next write, and returns at once, as
        `report` does; a later call replaces both. Raises `ValueError`, before anything is
        recorded, for a bad argument, and `RuntimeError` after the `with` block ended.
        """
        self._check_open("expect_slow")
        annotations = self._expect_slow_annotations(duration, why)
        with self._lock:
            wake = self._queue(annotations)
            if wake:
                self._sender()
        if wake:
            self._wake.set()

    def fail(self, reason: str, *, permanent: bool = False) -> NoReturn:
        """Ends this attempt as failed, saying why. With `permanent=True` the failure is one no
        restart would mend (a missing API key, a bad configuration): the operator does not
        restart the agent (class `Permanent`, phase `Stopped`) until someone resets it. Without,
        it is an ordinary failure, restarted as the policy says.

        Stops renewing, writes the typed termination message (`{"permanent": true, "reason":
        ...}`, or `{"reason": ...}`, with the progress, checkpoint and spend reported so far)
        and raises `SystemExit(1)`: let it end the process.
        """
        typed = _core.fail_message(reason, permanent)
        self._drain(CLOSE_TIMEOUT)  # the last reports to the Lease too, if it takes them soon
        self._halt()
        self._last_words(typed, _core.FAIL_EXIT_CODE)

    def retry_after(self, when: Any, reason: str) -> NoReturn:
        """Ends this attempt, asking to be restarted no earlier than `when`: the world is not ready.

        `when`: a duration (`"15m"`, a number of seconds, a `timedelta`) or a time (RFC 3339, or
        an aware `datetime`). Stops renewing, writes the typed termination message
        (`{"retryAfter": ..., "reason": ...}` with the progress, checkpoint and spend reported so
        far) and raises `SystemExit(1)`: let it end the process.
        """
        typed = _core.retry_after_message(when, reason)
        self._drain(CLOSE_TIMEOUT)  # the last reports to the Lease too, if it takes them soon
        self._halt()
        self._last_words(typed, _core.RETRY_AFTER_EXIT_CODE)

    def shutdown(self, kind: str, reason: str) -> NoReturn:
        """Ends this agent for good: `kind` is `"economic"` (out of money) or `"voluntary"` (done).

        Stops renewing, writes the typed termination message (`{"shutdown": ..., "reason": ...}`
        with what was reported so far) and raises `SystemExit(0)`: the operator never restarts it.
        """
        typed = _core.shutdown_message(kind, reason)
        self._drain(CLOSE_TIMEOUT)  # the last reports to the Lease too, if it takes them soon
        self._halt()
        self._last_words(typed, _core.SHUTDOWN_EXIT_CODE)

    # The sender: one thread writes the renewals and the reports, one request at a time.

    def _sender(self) -> None:
        """Starts the sending thread if it is not running (with the lock held)."""
        if self._thread is None and not self._stopping:
            self._thread = threading.Thread(
                target=self._run, name="agent-supervisor-heartbeat", daemon=True
            )
            self._thread.start()

    def _halt(self, wait: float = REQUEST_TIMEOUT) -> None:
        """Stops the sender; a write on its way is waited for at most `wait` seconds (past that
        the thread, a daemon, is left to it: it writes for this same pod, which is ending)."""
        self._stopping = True
        self._wake.set()
        with self._lock:
            thread, self._thread = self._thread, None
            lookup = self._stop_looking()
            self._changed.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=wait)
        if lookup is not None and lookup.client is not None:
            lookup.client.close()  # still looking: that client is no Lease's

    def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()  # before looking: a report from now on wakes it again
            with self._lock:
                now = time.monotonic()
                lookup = self._lookup
                if lookup is None and self._api is None:
                    return  # given up: nothing to write
                due = lookup.next_at if lookup is not None else self._outbox.due(now)
            if due is None or due > now:
                self._wake.wait(None if due is None else due - now)
                continue
            if lookup is not None:
                self._look(lookup)
                continue
            self._write()
            if not self._duration_read and self._outbox.renew_at is not None:
                self._read_duration()

    def _look(self, lookup: _sandbox.Lookup) -> None:
        """One read of a Sandbox pod's Lease for its identity; takes it when found."""
        found = _sandbox.read(lookup)
        with self._lock:
            if self._stopping or self._lookup is not lookup:
                return
            if isinstance(found, Identity):
                api = None
                if found.lease is not None:
                    namespace = found.namespace or lookup.target.namespace
                    api = LeaseApi(found.lease, namespace, lookup.client)
                self._found(found, api)
            elif found is not None:
                self._given_up(found)
            self._changed.notify_all()
        if isinstance(found, Identity) and found.lease is None:
            lookup.client.close()  # an Agent without a heartbeat: nothing to renew

    def _write(self) -> None:
        assert self._api is not None
        with self._lock:
            body, carried = self._outbox.body(self._holder, datetime.now(timezone.utc))
            reporting = bool(self._outbox.pending)
        if self._stopping:
            return
        try:
            self._api.patch(body)
        except Exception as error:
            with self._lock:
                wait = retry_wait(error, self._outbox.failures + 1)
                self._outbox.failed(wait, time.monotonic(), self._every)
                self._changed.notify_all()
            self._said(error, reporting)
        else:
            with self._lock:
                self._outbox.taken(body, carried, time.monotonic(), self._every)
                self._changed.notify_all()
            self._said(None, reporting)

    def _read_duration(self) -> None:
        """Reads the Lease's duration once, after the first renewal, to renew at a third of it."""
        assert self._api is not None
        self._duration_read = True
        try:
            duration = self._api.duration()
        except Exception as error:
            log.warning(
                "cannot read the heartbeat Lease's duration (renewing every %ss): %s",
                self._every,
                self._explain(error),
            )
            return
        with self._lock:
            self._every = self._interval(duration)
            if self._outbox.renew_at is not None:
                self._outbox.renew_at = min(self._outbox.renew_at, time.monotonic() + self._every)

    def _explain(self, error: BaseException) -> str:
        return explain(error, self._identity.lease or "", self._identity.namespace)
