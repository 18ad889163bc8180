"""What an author relies on: `previous`, `fail`, `expect_slow` and manual renewal (`alive`), in
both twins, against the stand-in Lease API."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from agent_supervisor import AsyncSupervisor, Outcome, Supervisor
from agent_supervisor._env import Identity
from conftest import LEASE, NAMESPACE
from fake_apiserver import FakeApiServer, eventually

PROGRESS = "supervisor.dev/progress"
SLOW_UNTIL = "supervisor.dev/expect-slow-until"
SLOW_REASON = "supervisor.dev/expect-slow-reason"


def on_lease(apiserver: FakeApiServer) -> dict[str, str]:
    found: dict[str, str] = apiserver.lease(NAMESPACE, LEASE)["metadata"].get("annotations", {})
    return found


def run(agent: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(agent())


def until(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


# previous


def test_previous_is_how_the_attempt_before_ended(pod: Path) -> None:
    expected = Outcome(
        attempt=3, reason="OOMKilled", exit_code=137, message=None, klass="Transient"
    )
    assert Supervisor.from_env().previous == expected
    assert AsyncSupervisor.from_env().previous == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"attempt": 2, "reason": "Error", "class": "Transient", "exitCode": 3, '
            '"message": "boom"}',
            Outcome(2, "Error", 3, "boom", "Transient"),
        ),
        ('{"reason": "HeartbeatLost"}', Outcome(None, "HeartbeatLost", None, None, None)),
        ('{"attempt": 1, "exitCode": null, "later": "ignored"}', Outcome(1, "", None, None, None)),
        ("{}", Outcome(None, "", None, None, None)),
        ("", None),
        ("   ", None),
    ],
)
def test_previous_parses_what_the_operator_injects(text: str, expected: Outcome | None) -> None:
    assert Identity.from_env({"AGENT_LAST_FAILURE": text}).previous == expected


def test_previous_is_none_on_a_first_start_and_off_cluster(laptop: Path) -> None:
    assert Supervisor.from_env().previous is None
    assert AsyncSupervisor.from_env().previous is None


@pytest.mark.parametrize(
    "text",
    ["{not json", "[1, 2]", '"Error"', '{"attempt": "2"}', '{"exitCode": true}', '{"reason": 7}'],
)
def test_a_malformed_previous_is_none_and_said_once(
    laptop: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    monkeypatch.setenv("AGENT_LAST_FAILURE", text)
    with caplog.at_level(logging.WARNING, "agent_supervisor"):
        sup = Supervisor.from_env()
    assert sup.previous is None
    assert caplog.text.count("AGENT_LAST_FAILURE=") == 1


def test_an_outcome_is_frozen() -> None:
    outcome = Outcome(1, "Error", 1, None, None)
    with pytest.raises(AttributeError):
        outcome.reason = "x"  # type: ignore[misc]


# fail


@pytest.mark.parametrize(
    ("permanent", "typed"),
    [
        (True, {"permanent": True, "reason": "no API key configured"}),
        (False, {"reason": "no API key configured"}),
    ],
)
def test_fail_writes_the_message_and_exits_1(
    pod: Path, apiserver: FakeApiServer, permanent: bool, typed: dict[str, Any]
) -> None:
    with Supervisor.from_env(renew_every=0.02) as sup:
        sup.report(progress=120, checkpoint="step-120", spend={"cost": "0.42"})
        with pytest.raises(SystemExit) as exit:
            sup.fail(" no API key configured ", permanent=permanent)
    assert exit.value.code == 1
    assert json.loads(pod.read_text()) == {
        **typed,
        "progress": 120,
        "checkpoint": "step-120",
        "spend": {"cost": "0.42"},
    }
    assert on_lease(apiserver)[PROGRESS] == "120", "the last reports reach the Lease too"
    count = len(apiserver.patches())
    time.sleep(0.1)
    assert len(apiserver.patches()) == count, "no renewal after deciding to stop"


@pytest.mark.parametrize("permanent", [True, False])
def test_the_async_twin_fails_the_same(
    pod: Path, apiserver: FakeApiServer, permanent: bool
) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=0.02) as sup:
            await sup.report(progress=150)
            await sup.fail("bad config", permanent=permanent)

    with pytest.raises(SystemExit) as exit:
        run(agent)
    assert exit.value.code == 1
    typed = {"permanent": True} if permanent else {}
    assert json.loads(pod.read_text()) == {**typed, "reason": "bad config", "progress": 150}


@pytest.mark.parametrize(
    ("reason", "permanent", "message"),
    [(None, True, "reason must be a str"), ("x", 1, "permanent must be True or False")],
)
def test_bad_fail_arguments_raise_and_leave_everything_running(
    pod: Path, apiserver: FakeApiServer, reason: Any, permanent: Any, message: str
) -> None:
    with Supervisor.from_env(renew_every=0.02) as sup:
        with pytest.raises(ValueError, match=message):
            sup.fail(reason, permanent=permanent)
        count = len(apiserver.patches())
        eventually(lambda: len(apiserver.patches()) > count)

    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=60) as sup:
            with pytest.raises(ValueError, match=message):
                await sup.fail(reason, permanent=permanent)

    run(agent)
    assert not pod.exists()


def test_fail_off_kubernetes_logs_and_exits_1(
    laptop: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, "agent_supervisor"), pytest.raises(SystemExit) as exit:
        Supervisor.from_env().fail("no API key configured", permanent=True)
    assert exit.value.code == 1
    assert '{"permanent":true,"reason":"no API key configured"}' in caplog.text
    assert not laptop.exists()
    with pytest.raises(SystemExit) as exit:
        run(lambda: AsyncSupervisor.from_env().fail("again"))
    assert exit.value.code == 1


# expect_slow


def test_expect_slow_puts_until_when_on_the_lease(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        before = datetime.now(timezone.utc)
        sup.expect_slow("2h", "fine-tuning run")
        assert sup.flush(5)
        after = datetime.now(timezone.utc)
        written = on_lease(apiserver)
        assert written[SLOW_REASON] == "fine-tuning run"
        slow = until(written[SLOW_UNTIL])
        assert before + timedelta(hours=2) - timedelta(seconds=1) <= slow
        assert slow <= after + timedelta(hours=2, seconds=1)
        sup.expect_slow(90, "")  # a later one replaces it
        assert sup.flush(5)
        written = on_lease(apiserver)
        assert written[SLOW_REASON] == ""
        assert until(written[SLOW_UNTIL]) < slow
    carrying = [
        r
        for r in apiserver.patches()
        if SLOW_UNTIL in r.body.get("metadata", {}).get("annotations", {})
    ]
    assert all("renewTime" in r.body["spec"] for r in carrying), "written with a renewal"


def test_the_async_twin_expects_slow_the_same(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=60) as sup:
            await sup.expect_slow("90m", "big download")
            assert await sup.flush(5)

    start = datetime.now(timezone.utc)
    run(agent)
    written = on_lease(apiserver)
    assert written[SLOW_REASON] == "big download"
    delta = until(written[SLOW_UNTIL]) - start
    assert timedelta(minutes=90) - timedelta(seconds=1) <= delta <= timedelta(minutes=91)


def test_a_new_attempt_takes_the_expect_slow_of_the_one_before_away(
    pod: Path, apiserver: FakeApiServer
) -> None:
    apiserver.leases[(NAMESPACE, LEASE)]["metadata"]["annotations"] = {
        SLOW_UNTIL: "2099-01-01T00:00:00Z",
        SLOW_REASON: "the attempt before's",
        PROGRESS: "100",
    }
    with Supervisor.from_env(renew_every=60):
        assert on_lease(apiserver) == {PROGRESS: "100"}


@pytest.mark.parametrize(
    ("duration", "why", "message"),
    [
        ("0s", "x", "give a duration above 0"),
        (-1, "x", "give a duration above 0"),
        ("tomorrow", "x", "give a duration above 0"),
        ("2026-11-22T10:00:00Z", "x", "give a duration above 0"),
        ("2h", None, "reason must be a str"),
    ],
)
def test_bad_expect_slow_arguments_raise_before_anything_is_sent(
    pod: Path, apiserver: FakeApiServer, duration: Any, why: Any, message: str
) -> None:
    sup = Supervisor.from_env()
    with pytest.raises(ValueError, match=message):
        sup.expect_slow(duration, why)

    async def agent() -> None:
        twin = AsyncSupervisor.from_env()
        with pytest.raises(ValueError, match=message):
            await twin.expect_slow(duration, why)
        await twin.close()

    run(agent)
    assert apiserver.patches() == []


def test_expect_slow_never_waits_for_the_api_server(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        apiserver.stall()
        sup.report(progress=101)  # a write on its way, unanswered
        eventually(lambda: apiserver.stalled >= 1)
        began = time.monotonic()
        for _ in range(100):
            sup.expect_slow("1h", "stalled API server")
        assert time.monotonic() - began < 0.5
        apiserver.answer()
        assert sup.flush(5)
    assert on_lease(apiserver)[SLOW_REASON] == "stalled API server"


def test_expect_slow_after_the_block_raises_and_is_a_no_op_off_cluster(
    laptop: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, "agent_supervisor"), Supervisor.from_env() as sup:
        sup.expect_slow("2h", "fine-tuning run")
    assert caplog.text.count("AGENT_HEARTBEAT_LEASE is not set") == 1
    with pytest.raises(RuntimeError, match=r"expect_slow\(\) after the supervisor was closed"):
        sup.expect_slow("2h", "x")


# renew="manual" and alive()


def renewals(apiserver: FakeApiServer) -> list[str]:
    return [r.body["spec"]["renewTime"] for r in apiserver.patches() if "spec" in r.body]


def test_manual_renewal_renews_on_alive_only(pod: Path, apiserver: FakeApiServer) -> None:
    apiserver.add_lease(NAMESPACE, LEASE, duration=1)  # background renewal: every 1/3 s
    with Supervisor.from_env(renew="manual") as sup:
        assert len(renewals(apiserver)) == 1, "entering takes the Lease over"
        time.sleep(0.5)
        assert len(renewals(apiserver)) == 1, "no renewal on a timer"
        sup.report(progress=101)
        assert sup.flush(5)
        assert apiserver.patches()[-1].body == {"metadata": {"annotations": {PROGRESS: "101"}}}
        assert len(renewals(apiserver)) == 1, "a report alone does not renew"
        sup.alive()
        eventually(lambda: len(renewals(apiserver)) == 2)
        times = renewals(apiserver)
        assert times == sorted(times)
        assert apiserver.lease(NAMESPACE, LEASE)["spec"]["renewTime"] == times[-1]
    assert len(renewals(apiserver)) == 2


def test_manual_alive_never_waits_and_coalesces(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew="manual") as sup:
        apiserver.stall()
        sup.alive()  # a renewal on its way, unanswered
        eventually(lambda: apiserver.stalled >= 1)
        began = time.monotonic()
        for _ in range(1000):
            sup.alive()
        assert time.monotonic() - began < 0.5
        apiserver.answer()
        eventually(lambda: len(renewals(apiserver)) == 3)  # entering, the stalled one, one more
        time.sleep(0.1)
        assert len(renewals(apiserver)) == 3


def test_the_async_twin_renews_manually_the_same(pod: Path, apiserver: FakeApiServer) -> None:
    apiserver.add_lease(NAMESPACE, LEASE, duration=1)

    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew="manual") as sup:
            await asyncio.sleep(0.5)
            assert len(renewals(apiserver)) == 1
            await sup.report(progress=101)
            assert await sup.flush(5)
            assert len(renewals(apiserver)) == 1
            await sup.alive()
            await sup.alive()
            for _ in range(100):
                if len(renewals(apiserver)) == 2:
                    break
                await asyncio.sleep(0.02)
            assert len(renewals(apiserver)) == 2

    run(agent)
    assert on_lease(apiserver) == {PROGRESS: "101"}


def test_alive_is_a_no_op_with_background_renewal(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        count = len(apiserver.patches())
        sup.alive()
        time.sleep(0.1)
        assert len(apiserver.patches()) == count

    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=60) as twin:
            count = len(apiserver.patches())
            await twin.alive()
            await asyncio.sleep(0.1)
            assert len(apiserver.patches()) == count

    run(agent)
    sup.alive()  # after the block too: never raises


def test_alive_is_a_no_op_off_cluster(laptop: Path) -> None:
    with Supervisor.from_env(renew="manual") as sup:
        sup.alive()
    run(lambda: AsyncSupervisor.from_env(renew="manual").alive())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"renew": "sometimes"}, "renew must be 'background' or 'manual'"),
        ({"renew": None}, "renew must be"),
        ({"renew": "Manual"}, "renew must be"),
        ({"renew": "manual", "renew_every": 5}, "no use with renew='manual'"),
    ],
)
def test_a_bad_renew_raises(laptop: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Supervisor.from_env(**kwargs)
    with pytest.raises(ValueError, match=message):
        AsyncSupervisor.from_env(**kwargs)
