"""`AsyncSupervisor`: the twin of `Supervisor` for asyncio code, with the same names."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, NoReturn

from . import _core, _sandbox
from ._base import CLOSE_TIMEOUT, START_TIMEOUT, Renew, SupervisorBase
from ._env import Identity
from ._kube import AsyncLeaseApi, explain, retry_wait

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
        renew: Renew = "background",
    ) -> None:
        super().__init__(identity, renew_every, renew)
        self._api = api
        # Made in the event loop, on first use.
        self._wake: asyncio.Event | None = None  # something for the sender to look at
        self._changed: asyncio.Condition | None = None  # a write was taken or failed
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_env(
        cls, *, renew_every: float | None = None, renew: Renew = "background"
    ) -> AsyncSupervisor:
        """A supervisor for this process, from the `AGENT_*` variables the operator sets.

        `renew_every` as in `Supervisor.from_env`: by default a third of the heartbeat timeout
        (the Lease's `spec.leaseDurationSeconds`), 5 seconds if the Lease does not say.
        `renew`: `"background"` (the default) or `"manual"` (renewed on `alive()`), as in
        `Supervisor.from_env`.

        In an agent-sandbox Sandbox's pod (no `AGENT_NAME`, an API token) the identity is read
        from the pod's Lease when the block is entered, with the async client (see `start`).
        """
        identity = Identity.from_env()
        api = None
        if identity.lease is not None:
            api = AsyncLeaseApi(identity.lease, identity.namespace or None)
        supervisor = cls(identity, api, renew_every, renew)
        supervisor._look_in_pod()
        return supervisor

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
        """Starts renewing the Lease in a task (`async with` awaits this): the first renewal
        now, then one every interval. Waits for the first to be taken, at most `START_TIMEOUT`
        seconds; a failed renewal is logged, not raised, and tried again.

        In an agent-sandbox Sandbox's pod the task first reads the identity from the pod's
        Lease, with the async client, within the same wait; not there yet, it looks on in the
        background, as `Supervisor.start` says. The event loop is never blocked."""
        if self._api is None and self._lookup is None:
            self._noop()
            if self._identity.termination_log is not None and not self._closed:
                self._install_sigterm()  # the last words need no heartbeat
            return
        if not self._begin():
            return
        wake, changed = self._sender()
        self._install_sigterm()
        wake.set()
        await self._wait(changed, self._entered, START_TIMEOUT)

    async def close(self) -> None:
        """Waits at most `CLOSE_TIMEOUT` seconds for what was reported to be written, stops
        renewing and closes the client (leaving the `async with` block awaits this). A report
        after it raises `RuntimeError`."""
        if self._closed:
            return
        if not self._stopping:
            await self._drain(CLOSE_TIMEOUT)
        await self._halt()
        self._closing()
        if self._api is not None:
            await self._api.close()

    async def flush(self, timeout: float | None = None) -> bool:
        """Waits until everything reported so far is on the Lease, at most `timeout` seconds
        (`None`: as long as it takes); whether it is. See `Supervisor.flush`."""
        target = self._outbox.recorded
        if self._changed is None:
            return self._flushed(target)
        return await self._wait(
            self._changed,
            lambda: self._flushed(target) or self._task is None,
            timeout,
            lambda: self._flushed(target),
        )

    async def _drain(self, timeout: float) -> None:
        """`flush`, unless the API server refused the last write (a 403, a 404): no wait for
        what would not be taken."""
        if self._api is None or self._changed is None:
            return
        target = self._outbox.recorded
        await self._wait(
            self._changed,
            lambda: (
                self._outbox.written >= target or self._task is None or self._outbox.waiting_long
            ),
            timeout,
        )

    async def report(
        self,
        *,
        progress: int | None = None,
        checkpoint: str | None = None,
        spend: dict[str, Any] | None = None,
    ) -> None:
        """Reports on the heartbeat Lease, and returns at once: a task writes the newest state
        (`flush()` waits for it). See `Supervisor.report`.

        Raises `ValueError`, before anything is recorded, for a bad argument, and `RuntimeError`
        after the `async with` block ended.
        """
        self._check_open("report")
        if self._queue(self._take(progress, checkpoint, spend)):
            self._sender()[0].set()

    async def add_spend(self, *, cost: Any = None, tokens: int | None = None) -> None:
        """Adds to this attempt's spend and reports the new total, returning at once: see
        `Supervisor.add_spend`. Raises `ValueError`, before anything is recorded, for a bad
        amount, and `RuntimeError` after the `async with` block ended.
        """
        self._check_open("add_spend")
        spend = _core.add_spend(self._reports.spend, cost, tokens)
        if self._queue(self._take(None, None, spend)):
            self._sender()[0].set()

    async def alive(self) -> None:
        """Says the agent is alive, with `renew="manual"`: the next write renews the Lease, and it
        returns at once. See `Supervisor.alive`; a no-op with background renewal."""
        if self._beat():
            self._sender()[0].set()

    async def expect_slow(self, duration: Any, why: str) -> None:
        """Says no progress is expected for `duration` from now, returning at once: see
        `Supervisor.expect_slow`. Raises `ValueError`, before anything is recorded, for a bad
        argument, and `RuntimeError` after the `async with` block ended."""
        self._check_open("expect_slow")
        if self._queue(self._expect_slow_annotations(duration, why)):
            self._sender()[0].set()

    async def fail(self, reason: str, *, permanent: bool = False) -> NoReturn:
        """Ends this attempt as failed, `permanent=True` for one no restart would mend: see
        `Supervisor.fail`. Raises `SystemExit(1)`."""
        typed = _core.fail_message(reason, permanent)
        await self._drain(CLOSE_TIMEOUT)  # the last reports to the Lease too, if it takes them soon
        await self._halt()
        self._last_words(typed, _core.FAIL_EXIT_CODE)

    async def retry_after(self, when: Any, reason: str) -> NoReturn:
        """Ends this attempt, asking to be restarted no earlier than `when`: see
        `Supervisor.retry_after`. Raises `SystemExit(1)`."""
        typed = _core.retry_after_message(when, reason)
        await self._drain(CLOSE_TIMEOUT)  # the last reports to the Lease too, if it takes them soon
        await self._halt()
        self._last_words(typed, _core.RETRY_AFTER_EXIT_CODE)

    async def shutdown(self, kind: str, reason: str) -> NoReturn:
        """Ends this agent for good, `"economic"` or `"voluntary"`: see `Supervisor.shutdown`.
        Raises `SystemExit(0)`."""
        typed = _core.shutdown_message(kind, reason)
        await self._drain(CLOSE_TIMEOUT)  # the last reports to the Lease too, if it takes them soon
        await self._halt()
        self._last_words(typed, _core.SHUTDOWN_EXIT_CODE)

    # The sender: one task writes the renewals and the reports, one request at a time.

    def _sender(self) -> tuple[asyncio.Event, asyncio.Condition]:
        """Starts the sending task if it is not running; its wake-up event and condition."""
        if self._wake is None or self._changed is None:
            self._wake, self._changed = asyncio.Event(), asyncio.Condition()
        if self._task is None and not self._stopping:
            self._task = asyncio.get_running_loop().create_task(
                self._run(self._wake, self._changed), name="agent-supervisor-heartbeat"
            )
        return self._wake, self._changed

    @staticmethod
    async def _wait(
        changed: asyncio.Condition,
        until: Callable[[], bool],
        timeout: float | None,
        result: Callable[[], bool] | None = None,
    ) -> bool:
        async def waiting() -> None:
            async with changed:
                await changed.wait_for(until)

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(waiting(), timeout)
        return (result or until)()

    async def _halt(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        lookup = self._stop_looking()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if lookup is not None and lookup.client is not None:
            await lookup.client.close()  # still looking: that client is no Lease's
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def _run(self, wake: asyncio.Event, changed: asyncio.Condition) -> None:
        while not self._stopping:
            wake.clear()
            now = time.monotonic()
            lookup = self._lookup
            if lookup is None and self._api is None:
                return  # given up: nothing to write
            due = lookup.next_at if lookup is not None else self._outbox.due(now)
            if due is None or due > now:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wake.wait(), None if due is None else due - now)
                continue
            if lookup is not None:
                await self._look(lookup, changed)
                continue
            await self._write(changed)
            if not self._duration_read and self._outbox.renew_at is not None:
                await self._read_duration()

    async def _look(self, lookup: _sandbox.Lookup, changed: asyncio.Condition) -> None:
        """One read of a Sandbox pod's Lease for its identity; takes it when found."""
        found = await _sandbox.aread(lookup)
        if self._stopping or self._lookup is not lookup:
            return
        if isinstance(found, Identity):
            api = None
            if found.lease is not None:
                namespace = found.namespace or lookup.target.namespace
                api = AsyncLeaseApi(found.lease, namespace, lookup.client)
            else:
                await lookup.client.close()  # an Agent without a heartbeat: nothing to renew
            self._found(found, api)
        elif found is not None:
            self._given_up(found)
        async with changed:
            changed.notify_all()

    async def _write(self, changed: asyncio.Condition) -> None:
        assert self._api is not None
        body, carried = self._outbox.body(self._holder, datetime.now(timezone.utc))
        reporting = bool(self._outbox.pending)
        try:
            await self._api.patch(body)
        except Exception as error:
            wait = retry_wait(error, self._outbox.failures + 1)
            self._outbox.failed(wait, time.monotonic(), self._every)
            self._said(error, reporting)
        else:
            self._outbox.taken(body, carried, time.monotonic(), self._every)
            self._said(None, reporting)
        async with changed:
            changed.notify_all()

    async def _read_duration(self) -> None:
        """Reads the Lease's duration once, after the first renewal, to renew at a third of it."""
        assert self._api is not None
        self._duration_read = True
        try:
            duration = await self._api.duration()
        except Exception as error:
            log.warning(
                "cannot read the heartbeat Lease's duration (renewing every %ss): %s",
                self._every,
                self._explain(error),
            )
            return
        self._every = self._interval(duration)
        if self._outbox.renew_at is not None:
            self._outbox.renew_at = min(self._outbox.renew_at, time.monotonic() + self._every)

    def _explain(self, error: BaseException) -> str:
        return explain(error, self._identity.lease or "", self._identity.namespace)
