"""`Supervisor`: the agent's side of agent-supervisor, for code that does not use asyncio."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, NoReturn

from . import _core
from ._base import SupervisorBase
from ._env import Identity
from ._kube import REQUEST_TIMEOUT, LeaseApi, explain

log = logging.getLogger("agent_supervisor")


class Supervisor(SupervisorBase):
    """Speaks to the operator that runs this agent: heartbeats, reports and last words.

    Make one with `Supervisor.from_env()` and use it in a `with` block: while the block runs, a
    background thread renews the heartbeat Lease. Without `AGENT_HEARTBEAT_LEASE` every call is a
    no-op (logged once), so the same code runs on a laptop and in a unit test. All methods may be
    called from any thread.
    """

    def __init__(
        self, identity: Identity, api: LeaseApi | None = None, renew_every: float | None = None
    ) -> None:
        super().__init__(identity, renew_every)
        self._api = api
        self._lock = threading.Lock()  # one report at a time, in the order they were checked
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_env(cls, *, renew_every: float | None = None) -> Supervisor:
        """A supervisor for this process, from the `AGENT_*` variables the operator sets.

        `renew_every`: seconds between renewals of the heartbeat Lease. By default a third of the
        Lease's `spec.leaseDurationSeconds`, which the operator sets to the Agent's
        `heartbeat.timeout` (5 seconds if the Lease does not say).

        In a pod the client uses the in-cluster config, elsewhere the standard kubeconfig
        (`$KUBECONFIG` or `~/.kube/config`); without `AGENT_HEARTBEAT_LEASE` it makes no client.
        """
        identity = Identity.from_env()
        api = None
        if identity.lease is not None:
            api = LeaseApi(identity.lease, identity.namespace or None)
        return cls(identity, api, renew_every)

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
        """Renews the Lease once now, then every interval in a background thread (`with` calls
        this). A failed renewal is logged, not raised: the next one may work."""
        if self._api is None:
            self._noop()
            return
        if self._thread is not None or self._stopping:
            return
        duration = None
        try:
            duration = self._api.duration()
        except Exception as error:
            log.warning("cannot read the heartbeat Lease's duration: %s", self._explain(error))
        interval = self._interval(duration)
        self._renew(first=True)
        self._thread = threading.Thread(
            target=self._run, args=(interval,), name="agent-supervisor-heartbeat", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stops renewing and closes the client (leaving the `with` block calls this)."""
        self._halt()
        if self._api is not None:
            self._api.close()

    def report(
        self,
        *,
        progress: int | None = None,
        checkpoint: str | None = None,
        spend: dict[str, Any] | None = None,
    ) -> None:
        """Reports on the heartbeat Lease (which this also renews).

        `progress`: steps done over all attempts, a whole number that only grows. One below
        `self.progress` (after resuming from an older checkpoint) is not sent until it passes it:
        the operator would ignore it. `checkpoint`: a reference to state a later attempt can
        resume from (at most 1 KiB). `spend`: this attempt's spend so far, `{"cost": "0.42",
        "tokens": 18000}` (`cost` a decimal string, either key may be left out).

        Raises `ValueError`, before anything is sent, for a bad argument. A report the API server
        does not take (after retries) is logged and sent again with the next one.
        """
        with self._lock:
            self._send(self._take(progress, checkpoint, spend))

    def add_spend(self, *, cost: Any = None, tokens: int | None = None) -> None:
        """Adds to this attempt's spend and reports the new total at once, as `report(spend=...)`.

        `cost`: what a call cost, a decimal (`"0.002"`, a `Decimal`; a float is read as it
        prints); `tokens`: how many it used. Sums are exact (`Decimal`); `self.spend` is the
        total. Call it after each model call: one Lease write each, so the operator has the
        spend however the process ends. Safe from any thread.

        Raises `ValueError`, before anything is sent, for a negative, unparsable or missing
        amount.
        """
        with self._lock:
            spend = _core.add_spend(self._reports.spend, cost, tokens)
            self._send(self._take(None, None, spend))

    def _send(self, annotations: dict[str, str]) -> None:
        """Writes `annotations` (and what earlier reports could not) with a renewal."""
        body = self._report_body(annotations)
        if body is None:
            return
        try:
            self._api.patch(body)
        except Exception as error:
            log.warning("report not taken, sent again with the next: %s", self._explain(error))
            return
        self._unsent.clear()

    def retry_after(self, when: Any, reason: str) -> NoReturn:
        """Ends this attempt, asking to be restarted no earlier than `when`: the world is not ready.

        `when`: a duration (`"15m"`, a number of seconds, a `timedelta`) or a time (RFC 3339, or
        an aware `datetime`). Stops renewing, writes the typed termination message
        (`{"retryAfter": ..., "reason": ...}` with the progress, checkpoint and spend reported so
        far) and raises `SystemExit(1)`: let it end the process.
        """
        typed = self._retry_after_message(when, reason)
        self._halt()
        self._last_words(typed, _core.RETRY_AFTER_EXIT_CODE)

    def shutdown(self, kind: str, reason: str) -> NoReturn:
        """Ends this agent for good: `kind` is `"economic"` (out of money) or `"voluntary"` (done).

        Stops renewing, writes the typed termination message (`{"shutdown": ..., "reason": ...}`
        with what was reported so far) and raises `SystemExit(0)`: the operator never restarts it.
        """
        typed = self._shutdown_message(kind, reason)
        self._halt()
        self._last_words(typed, _core.SHUTDOWN_EXIT_CODE)

    # The renewing thread: it writes the holder and the time, never a report.

    def _halt(self) -> None:
        self._stopping = True
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            # A renewal in flight ends within a request's timeout; past that, the thread (a
            # daemon) is left to it: it renews for this same pod, which is ending.
            thread.join(timeout=REQUEST_TIMEOUT)

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self._renew()

    def _renew(self, *, first: bool = False) -> None:
        assert self._api is not None
        try:
            self._api.patch(_core.renewal(self._holder, datetime.now(timezone.utc), first=first))
        except Exception as error:
            self._renewed(error)
        else:
            self._renewed(None)

    def _explain(self, error: BaseException) -> str:
        return explain(error, self._identity.lease or "", self._identity.namespace)
