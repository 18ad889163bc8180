"""`AsyncSupervisor`: the twin of `Supervisor` for asyncio code, with the same names."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, NoReturn

from . import _core
from ._base import SupervisorBase
from ._env import Identity
from ._kube import AsyncLeaseApi, explain

log = logging.getLogger("agent_supervisor")


class AsyncSupervisor(SupervisorBase):
    """Speaks to the operator that runs this agent, from asyncio code.

    Make one with `AsyncSupervisor.from_env()` and use it in an `async with` block: while the
    block runs, a task renews the heartbeat Lease. `report`, `retry_after` and `shutdown` are
    awaited; the properties are those of `Supervisor`. Without `AGENT_HEARTBEAT_LEASE` every call
    is a no-op (logged once). Use it from the event loop it was entered on.
    """

    def __init__(
        self,
        identity: Identity,
        api: AsyncLeaseApi | None = None,
        renew_every: float | None = None,
    ) -> None:
        super().__init__(identity, renew_every)
        self._api = api
        self._lock: asyncio.Lock | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_env(cls, *, renew_every: float | None = None) -> AsyncSupervisor:
        """A supervisor for this process, from the `AGENT_*` variables the operator sets.

        `renew_every` as in `Supervisor.from_env`: by default a third of the heartbeat timeout
        (the Lease's `spec.leaseDurationSeconds`), 5 seconds if the Lease does not say.
        """
        identity = Identity.from_env()
        api = None
        if identity.lease is not None:
            api = AsyncLeaseApi(identity.lease, identity.namespace or None)
        return cls(identity, api, renew_every)

    async def __aenter__(self) -> AsyncSupervisor:
        await self.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._crashed(error)
        await self.close()

    async def start(self) -> None:
        """Renews the Lease once now, then every interval in a task (`async with` awaits this).
        A failed renewal is logged, not raised: the next one may work."""
        if self._api is None:
            self._noop()
            return
        if self._task is not None or self._stopping:
            return
        duration = None
        try:
            duration = await self._api.duration()
        except Exception as error:
            log.warning("cannot read the heartbeat Lease's duration: %s", self._explain(error))
        interval = self._interval(duration)
        await self._renew(first=True)
        self._task = asyncio.get_running_loop().create_task(
            self._run(interval), name="agent-supervisor-heartbeat"
        )

    async def close(self) -> None:
        """Stops renewing and closes the client (leaving the `async with` block awaits this)."""
        await self._halt()
        if self._api is not None:
            await self._api.close()

    async def report(
        self,
        *,
        progress: int | None = None,
        checkpoint: str | None = None,
        spend: dict[str, Any] | None = None,
    ) -> None:
        """Reports on the heartbeat Lease (which this also renews): see `Supervisor.report`.

        Raises `ValueError`, before anything is sent, for a bad argument.
        """
        async with self._locked():
            await self._send(self._take(progress, checkpoint, spend))

    async def add_spend(self, *, cost: Any = None, tokens: int | None = None) -> None:
        """Adds to this attempt's spend and reports the new total at once: see
        `Supervisor.add_spend`. Raises `ValueError`, before anything is sent, for a bad amount.
        """
        async with self._locked():
            spend = _core.add_spend(self._reports.spend, cost, tokens)
            await self._send(self._take(None, None, spend))

    def _locked(self) -> asyncio.Lock:
        """One report at a time, in the order they were checked."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _send(self, annotations: dict[str, str]) -> None:
        """Writes `annotations` (and what earlier reports could not) with a renewal."""
        body = self._report_body(annotations)
        if body is None:
            return
        try:
            await self._api.patch(body)
        except Exception as error:
            log.warning("report not taken, sent again with the next: %s", self._explain(error))
            return
        self._unsent.clear()

    async def retry_after(self, when: Any, reason: str) -> NoReturn:
        """Ends this attempt, asking to be restarted no earlier than `when`: see
        `Supervisor.retry_after`. Raises `SystemExit(1)`."""
        typed = self._retry_after_message(when, reason)
        await self._halt()
        self._last_words(typed, _core.RETRY_AFTER_EXIT_CODE)

    async def shutdown(self, kind: str, reason: str) -> NoReturn:
        """Ends this agent for good, `"economic"` or `"voluntary"`: see `Supervisor.shutdown`.
        Raises `SystemExit(0)`."""
        typed = self._shutdown_message(kind, reason)
        await self._halt()
        self._last_words(typed, _core.SHUTDOWN_EXIT_CODE)

    # The renewing task: it writes the holder and the time, never a report.

    async def _halt(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await self._renew()

    async def _renew(self, *, first: bool = False) -> None:
        assert self._api is not None
        try:
            await self._api.patch(
                _core.renewal(self._holder, datetime.now(timezone.utc), first=first)
            )
        except Exception as error:
            self._renewed(error)
        else:
            self._renewed(None)

    def _explain(self, error: BaseException) -> str:
        return explain(error, self._identity.lease or "", self._identity.namespace)
