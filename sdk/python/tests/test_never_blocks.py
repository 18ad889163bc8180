"""Reports never block the agent: a background sender writes the newest state, and an API server
that fails or never answers costs the agent's code nothing (issue 62's table, first rows)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from agent_supervisor import AsyncSupervisor, Supervisor, _async, _kube, _sync
from conftest import LEASE, NAMESPACE, POD
from fake_apiserver import FakeApiServer, eventually

PROGRESS = "supervisor.dev/progress"
SPEND = "supervisor.dev/spend"
#: Short stand-ins for the timing constants, so that the tests take little time.
TIMEOUT = 0.5


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kube, "REQUEST_TIMEOUT", TIMEOUT)
    monkeypatch.setattr(_kube, "_BACKOFF", 0.01)
    for module in (_sync, _async):
        monkeypatch.setattr(module, "START_TIMEOUT", TIMEOUT)
        monkeypatch.setattr(module, "CLOSE_TIMEOUT", TIMEOUT)


def last_attempt_left(apiserver: FakeApiServer) -> None:
    """The Lease as the attempt before left it: held by its pod, its spend on it."""
    lease = apiserver.leases[(NAMESPACE, LEASE)]
    lease["spec"].update(holderIdentity="agent-7-2", renewTime="2026-01-01T00:00:00.000000Z")
    lease["metadata"]["annotations"] = {SPEND: '{"cost":"1.50"}'}


def held_with_old_spend(apiserver: FakeApiServer) -> bool:
    lease = apiserver.lease(NAMESPACE, LEASE)
    spend = lease["metadata"].get("annotations", {}).get(SPEND)
    return lease["spec"].get("holderIdentity") == POD and spend == '{"cost":"1.50"}'


def test_a_failed_first_renewal_never_leaves_the_old_spend_under_the_new_pod(
    pod: Path, apiserver: FakeApiServer, quick: None
) -> None:
    last_attempt_left(apiserver)
    apiserver.fail_next_patches(503, 503, 503, 503)  # the renewals, not the read
    with Supervisor.from_env(renew_every=0.02):
        eventually(lambda: apiserver.lease(NAMESPACE, LEASE)["spec"]["holderIdentity"] == POD)
        assert not held_with_old_spend(apiserver)
        time.sleep(0.1)  # renewals go on
        assert not held_with_old_spend(apiserver)
    first_taken = apiserver.patches()[4].body
    assert first_taken["metadata"]["annotations"] == {
        SPEND: None,
        "supervisor.dev/expect-slow-until": None,  # the attempt before's slow step, too
        "supervisor.dev/expect-slow-reason": None,
    }
    assert "acquireTime" in first_taken["spec"]


def test_the_async_twin_never_leaves_the_old_spend_either(
    pod: Path, apiserver: FakeApiServer, quick: None
) -> None:
    last_attempt_left(apiserver)
    apiserver.fail_next_patches(503, 503, 503, 503)  # the renewals, not the read

    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=0.02) as sup:
            await sup.report(progress=101)
            assert await sup.flush(5)  # taken: after the first renewal was
            await asyncio.sleep(0.1)

    asyncio.run(agent())
    assert not held_with_old_spend(apiserver)
    first_taken = apiserver.patches()[4].body
    assert first_taken["metadata"]["annotations"][SPEND] is None


def renew_times_and_progress(apiserver: FakeApiServer) -> tuple[list[str], list[int]]:
    patches = apiserver.patches()
    times = [p.body["spec"]["renewTime"] for p in patches]
    progress = [
        int(p.body["metadata"]["annotations"][PROGRESS])
        for p in patches
        if PROGRESS in p.body.get("metadata", {}).get("annotations", {})
    ]
    return times, progress


def test_a_retried_report_never_sends_an_older_time_or_state(
    pod: Path, apiserver: FakeApiServer, quick: None
) -> None:
    with Supervisor.from_env(renew_every=0.02) as sup:
        for step in range(101, 151):
            if step % 10 == 0:
                apiserver.fail_next(503, 503)
            sup.report(progress=step)
            time.sleep(0.002)
        assert sup.flush(5)
    times, progress = renew_times_and_progress(apiserver)
    assert times == sorted(times), "renewTime never goes back, retried writes included"
    assert len(set(times)) == len(times), "a retried write carries a fresh renewTime"
    assert progress == sorted(progress), "no older progress after a newer one"
    assert progress[-1] == 150
    lease = apiserver.lease(NAMESPACE, LEASE)
    assert lease["spec"]["renewTime"] == times[-1]


def test_reports_made_while_a_write_is_on_its_way_go_together(
    pod: Path, apiserver: FakeApiServer, quick: None
) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        apiserver.stall()
        for step in range(101, 201):
            sup.report(progress=step, spend={"tokens": step})
        assert not sup.flush(0.1), "not on the Lease while the API server hangs"
        apiserver.answer()
        assert sup.flush(5)
    _, progress = renew_times_and_progress(apiserver)
    assert progress == sorted(progress)
    assert len(progress) <= 4, "coalesced: the newest state, not one write a report"
    written = apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"]
    assert (written[PROGRESS], json.loads(written[SPEND])) == ("200", {"tokens": 200, "pod": POD})


def test_a_silent_api_server_costs_the_agent_bounded_seconds(
    pod: Path, apiserver: FakeApiServer, quick: None
) -> None:
    apiserver.stall()
    began = time.monotonic()
    sup = Supervisor.from_env()
    sup.start()
    started = time.monotonic() - began
    for step in range(101, 131):
        sup.report(progress=step, checkpoint=f"step-{step}")
        sup.add_spend(cost="0.01", tokens=10)
    reported = time.monotonic() - began - started
    assert not sup.flush(TIMEOUT)
    closing = time.monotonic()
    sup.close()
    closed = time.monotonic() - closing
    # Generous bounds: the defect was minutes (83.7 s to start, 41.8 s a report).
    assert started < TIMEOUT + 2, f"start() took {started:.1f} s"
    assert reported < 1, f"60 reports took {reported:.1f} s"
    assert closed < TIMEOUT + 2, f"close() took {closed:.1f} s"


def test_the_async_twin_costs_bounded_seconds_too(
    pod: Path, apiserver: FakeApiServer, quick: None
) -> None:
    apiserver.stall()

    async def agent() -> tuple[float, float]:
        began = time.monotonic()
        async with AsyncSupervisor.from_env() as sup:
            started = time.monotonic() - began
            for step in range(101, 131):
                await sup.report(progress=step)
                await sup.add_spend(tokens=10)
            reported = time.monotonic() - began - started
            assert not await sup.flush(TIMEOUT)
        return started, reported

    began = time.monotonic()
    started, reported = asyncio.run(agent())
    assert started < TIMEOUT + 2, f"start() took {started:.1f} s"
    assert reported < 1, f"60 reports took {reported:.1f} s"
    assert time.monotonic() - began < 3 * TIMEOUT + 3


def test_flush_waits_until_the_lease_has_it(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=60) as sup:
            await sup.report(progress=120)
            assert await sup.flush(5)
            annotations = apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"]
            assert annotations[PROGRESS] == "120"

    asyncio.run(agent())
    sup = Supervisor.from_env()
    assert sup.flush(0), "nothing reported: nothing to wait for"
    sup.report(progress=130)
    assert sup.flush(5)
    assert apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"][PROGRESS] == "130"
