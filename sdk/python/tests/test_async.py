"""`AsyncSupervisor`, the asyncio twin, against the same stand-in Lease API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_supervisor import AsyncSupervisor, Supervisor
from conftest import LEASE, NAMESPACE, POD
from fake_apiserver import FakeApiServer

PROGRESS = "supervisor.dev/progress"
CHECKPOINT = "supervisor.dev/checkpoint"
SPEND = "supervisor.dev/spend"


def annotations(apiserver: FakeApiServer) -> dict[str, str]:
    return apiserver.lease(NAMESPACE, LEASE)["metadata"].get("annotations", {})


def test_the_twins_have_the_same_names() -> None:
    public = {n for n in dir(Supervisor) if not n.startswith("_")}
    assert public == {n for n in dir(AsyncSupervisor) if not n.startswith("_")}
    assert {"from_env", "report", "add_spend", "retry_after", "shutdown", "spend"} <= public
    assert {"previous", "fail", "expect_slow", "alive"} <= public
    verbs = ("report", "add_spend", "retry_after", "shutdown", "start", "close")
    for name in (*verbs, "fail", "expect_slow", "alive", "flush"):
        assert asyncio.iscoroutinefunction(getattr(AsyncSupervisor, name)), name


def test_renews_in_a_task_and_reports(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=0.03) as sup:
            assert (sup.checkpoint, sup.progress) == ("s3://bucket/run-7/step-100", 100)
            assert (sup.restart_count, sup.last_failure_reason) == (3, "OOMKilled")
            await sup.report(progress=120, checkpoint="step-120")
            await sup.report(spend={"cost": "0.42", "tokens": 18000})
            await asyncio.sleep(0.4)
        count = len(apiserver.patches())
        await asyncio.sleep(0.1)
        assert len(apiserver.patches()) == count, "leaving the block stops renewing"

    asyncio.run(agent())
    renewals = apiserver.patches()
    assert len(renewals) >= 5
    assert all(r.body["spec"]["holderIdentity"] == POD for r in renewals)
    with_progress = [
        r for r in renewals if PROGRESS in r.body.get("metadata", {}).get("annotations", {})
    ]
    assert len(with_progress) == 1, "the renewing task reports nothing"
    assert annotations(apiserver) == {
        PROGRESS: "120",
        CHECKPOINT: "step-120",
        SPEND: f'{{"cost":"0.42","tokens":18000,"pod":"{POD}"}}',
    }


def test_renews_at_a_third_of_the_lease_duration(pod: Path, apiserver: FakeApiServer) -> None:
    apiserver.add_lease(NAMESPACE, LEASE, duration=1)

    async def agent() -> None:
        async with AsyncSupervisor.from_env():
            await asyncio.sleep(1.2)

    asyncio.run(agent())
    assert 2 <= len(apiserver.patches()) <= 6  # 4 expected; slack for a busy machine


def test_conflicts_are_retried(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        sup = AsyncSupervisor.from_env()
        apiserver.fail_next(409, 409, 409)
        await sup.report(progress=101)
        await sup.close()

    asyncio.run(agent())
    assert len(apiserver.patches()) == 4
    assert annotations(apiserver) == {PROGRESS: "101"}


@pytest.mark.parametrize(
    "kwargs",
    [{"progress": -1}, {"checkpoint": "x" * 1025}, {"spend": {"cost": "-1"}}, {}],
)
def test_bad_arguments_raise_before_anything_is_sent(
    pod: Path, apiserver: FakeApiServer, kwargs: dict[str, object]
) -> None:
    async def agent() -> None:
        sup = AsyncSupervisor.from_env()
        with pytest.raises(ValueError):  # noqa: PT011 - each message is tested on the sync twin
            await sup.report(**kwargs)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="not one of"):
            await sup.shutdown("lazy", "x")
        with pytest.raises(ValueError, match="write a duration"):
            await sup.retry_after("tomorrow", "x")
        await sup.close()

    asyncio.run(agent())
    assert apiserver.patches() == []
    assert not pod.exists()


def test_retry_after_writes_the_message_and_exits_1(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=0.02) as sup:
            await sup.report(progress=150)
            await sup.retry_after("2026-11-22T10:00:00Z", "provider outage")

    with pytest.raises(SystemExit) as exit:
        asyncio.run(agent())
    assert exit.value.code == 1
    assert json.loads(pod.read_text()) == {
        "retryAfter": "2026-11-22T10:00:00Z",
        "reason": "provider outage",
        "progress": 150,
    }


def test_shutdown_writes_the_message_and_exits_0(pod: Path) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env() as sup:
            await sup.report(spend={"tokens": 5})
            await sup.shutdown("economic", "budget exhausted")

    with pytest.raises(SystemExit) as exit:
        asyncio.run(agent())
    assert exit.value.code == 0
    assert json.loads(pod.read_text()) == {
        "shutdown": "economic",
        "reason": "budget exhausted",
        "spend": {"tokens": 5},
    }
