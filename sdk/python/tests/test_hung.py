"""What a hung agent looks like to the operator. Background renewal proves alive what runs the
sender: the sync twin's thread, the async twin's event loop. So a sync agent whose main thread
hangs keeps renewing (the stall judge or `renew="manual"` catches it), an async agent whose loop
is blocked does not, and with `renew="manual"` neither renews unless its own loop says so."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from agent_supervisor import AsyncSupervisor, Supervisor
from conftest import LEASE, NAMESPACE
from fake_apiserver import FakeApiServer, eventually

#: How long each agent hangs: more than three renewal intervals of a 1 s Lease (every 1/3 s).
HANG = 1.2


def renewals(apiserver: FakeApiServer) -> int:
    return sum(1 for r in apiserver.patches() if "spec" in r.body)


def hang(seconds: float = HANG) -> None:
    """The calling thread waits on what never comes (a deadlock, a call that never returns)."""
    threading.Event().wait(seconds)


def test_a_hung_main_thread_keeps_the_sync_twins_background_renewal(
    pod: Path, apiserver: FakeApiServer
) -> None:
    apiserver.add_lease(NAMESPACE, LEASE, duration=1)
    with Supervisor.from_env():
        before = renewals(apiserver)
        hang()
        assert renewals(apiserver) >= before + 2, "the sender's thread renews on"


def test_a_hung_main_thread_stops_manual_renewal(pod: Path, apiserver: FakeApiServer) -> None:
    apiserver.add_lease(NAMESPACE, LEASE, duration=1)
    with Supervisor.from_env(renew="manual") as sup:
        sup.alive()
        eventually(lambda: renewals(apiserver) == 2)
        hang()
        assert renewals(apiserver) == 2, "no alive(), no renewal: the heartbeat is lost"
        sup.alive()
        eventually(lambda: renewals(apiserver) == 3)


def test_a_blocked_event_loop_stops_the_async_twins_background_renewal(
    pod: Path, apiserver: FakeApiServer
) -> None:
    apiserver.add_lease(NAMESPACE, LEASE, duration=1)

    async def agent() -> None:
        async with AsyncSupervisor.from_env():
            await asyncio.sleep(0.5)  # the sender has read the Lease's duration
            # Blocks the loop: nothing on it runs, the sender neither. (A renewal sent just
            # before may still arrive: counted from when it would have.)
            hang(0.2)
            before = renewals(apiserver)
            hang()
            assert renewals(apiserver) == before, "a blocked loop renews nothing"
            await asyncio.sleep(0.8)
            assert renewals(apiserver) >= before + 1, "renewed again once the loop runs"

    asyncio.run(agent())
