"""Spend: written so the operator always reads it, added to exactly as calls are made, and in
the last words however the process ends."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from decimal import Decimal
from pathlib import Path

import pytest

from agent_supervisor import AsyncSupervisor, Supervisor, _core
from conftest import LEASE, NAMESPACE, POD
from fake_apiserver import FakeApiServer

SPEND = "supervisor.dev/spend"
#: What the operator reads as a cost (src/supervise/spend.rs, Cost::parse).
OPERATOR_COST = re.compile(r"^[0-9]+(\.[0-9]{1,9})?$")


def lease_spend(apiserver: FakeApiServer) -> dict[str, object]:
    """The spend on the Lease, which names the pod that made it."""
    spend = json.loads(apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"][SPEND])
    assert spend.pop("pod") == POD, spend
    return dict(spend)


@pytest.mark.parametrize(
    ("cost", "written"),
    [
        (Decimal("0.420"), "0.420"),
        ("0.1234567891", "0.123456790"),  # rounded up to 9 places: never told less
        ("0.123456789000", "0.123456789"),
        ("1e-12", "0.000000001"),
        ("1E+2", "100"),
        ("-0", "0"),
        ("-0.0000", "0.0000"),
        (0.1, "0.1"),
        (1e-05, "0.00001"),
        (3, "3"),
        (".5", "0.5"),
        (_core.COST_LIMIT, "18446744073.709551615"),
    ],
)
def test_a_cost_is_written_as_the_operator_reads_it(cost: object, written: str) -> None:
    text = json.loads(_core.Reports().take(spend={"cost": cost})[SPEND])["cost"]
    assert text == written
    assert OPERATOR_COST.match(text), text


@pytest.mark.parametrize(
    ("spend", "message"),
    [
        ({"cost": "1e30"}, "more than the 18446744073.709551615"),
        ({"cost": "18446744073.709551616"}, "more than"),
        ({"cost": "-1e-12"}, "from 0"),
        ({"cost": "Infinity"}, "finite"),
        ({"cost": None}, "decimal string"),
        ({"tokens": 2**63}, "from 0 to 9223372036854775807"),
        ({"tokens": True}, "whole number"),
    ],
)
def test_a_spend_the_operator_would_refuse_is_refused_here(
    spend: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _core.Reports().take(spend=spend)


def test_rounding_up_keeps_a_growing_cost_growing() -> None:
    reports = _core.Reports()
    written = []
    for cost in ("0.0000000001", "0.0000000009", "0.000000001", "0.0000000011", "0.000000002"):
        written.append(Decimal(json.loads(reports.take(spend={"cost": cost})[SPEND])["cost"]))
    assert written == sorted(written)
    assert written[-1] == Decimal("0.000000002")


def test_adding_is_exact() -> None:
    total: dict[str, Decimal | int] = {}
    for _ in range(1000):
        total = _core.add_spend(total, "0.001", 7)
    assert total == {"cost": Decimal("1.000"), "tokens": 7000}
    floats: dict[str, Decimal | int] = {}
    for _ in range(3):
        floats = _core.add_spend(floats, 0.1, None)
    assert floats == {"cost": Decimal("0.3")}, "0.1 three times is 0.3, not 0.30000000000000004"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs cost= or tokens="),
        ({"cost": "-0.01"}, "add_spend cost '-0.01' must be a finite number from 0"),
        ({"cost": "two cents"}, "add_spend cost 'two cents' is not a decimal"),
        ({"cost": float("nan")}, "finite"),
        ({"cost": [1]}, "decimal string"),
        ({"cost": "1e30"}, "more than"),
        ({"tokens": -1}, "add_spend tokens must be a whole number"),
        ({"tokens": 1.5}, "whole number"),
        ({"tokens": "350"}, "whole number"),
        ({"tokens": False}, "whole number"),
        ({"cost": "0.01", "tokens": -1}, "whole number"),  # nothing of it taken
    ],
)
def test_bad_amounts_raise_before_anything_is_sent(
    pod: Path, apiserver: FakeApiServer, kwargs: dict[str, object], message: str
) -> None:
    sup = Supervisor.from_env()
    sup.add_spend(cost="0.50", tokens=10)
    assert sup.flush(5)
    sent = len(apiserver.patches())
    with pytest.raises(ValueError, match=message):
        sup.add_spend(**kwargs)  # type: ignore[arg-type]
    assert len(apiserver.patches()) == sent
    assert sup.spend == {"cost": Decimal("0.50"), "tokens": 10}, "a bad amount is not half taken"


def test_a_total_past_what_the_operator_reads_is_refused(pod: Path) -> None:
    sup = Supervisor.from_env()
    sup.add_spend(cost=_core.COST_LIMIT, tokens=2**63 - 1)
    with pytest.raises(ValueError, match="would pass"):
        sup.add_spend(cost="0.000000001")
    with pytest.raises(ValueError, match="would pass"):
        sup.add_spend(tokens=1)


def test_add_spend_reports_the_total_at_once(pod: Path, apiserver: FakeApiServer) -> None:
    sup = Supervisor.from_env()
    assert sup.spend == {}
    sup.add_spend(cost="0.002", tokens=350)
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"cost": "0.002", "tokens": 350}
    sup.add_spend(tokens=50)
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"cost": "0.002", "tokens": 400}
    sup.add_spend(cost=Decimal("0.0005"))
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"cost": "0.0025", "tokens": 400}
    # report(spend=) and add_spend speak of the same total.
    sup.report(spend={"cost": "1.00"})
    sup.add_spend(cost="0.25")
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"cost": "1.25", "tokens": 400}
    with pytest.raises(ValueError, match=r"lower than the 1\.25"):
        sup.report(spend={"cost": "1.00"})
    assert sup.spend == {"cost": Decimal("1.25"), "tokens": 400}


def test_add_spend_from_many_threads_loses_nothing(pod: Path, apiserver: FakeApiServer) -> None:
    sup = Supervisor.from_env()

    def calls() -> None:
        for _ in range(25):
            sup.add_spend(cost="0.001", tokens=1)

    threads = [threading.Thread(target=calls) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sup.spend == {"cost": Decimal("0.200"), "tokens": 200}
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"cost": "0.200", "tokens": 200}


def test_the_last_words_carry_the_spend_the_lease_did_not_take(
    pod: Path, apiserver: FakeApiServer
) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        sup.add_spend(cost="0.30", tokens=3000)
        assert sup.flush(5)
        apiserver.fail_next(403)  # the last report is not taken
        sup.add_spend(cost="0.12", tokens=1200)
        assert not sup.flush(0.5)
        assert lease_spend(apiserver) == {"cost": "0.30", "tokens": 3000}
        with pytest.raises(SystemExit) as exit:
            sup.shutdown("economic", "out of credits")
    assert exit.value.code == 0
    assert json.loads(pod.read_text()) == {
        "shutdown": "economic",
        "reason": "out of credits",
        "spend": {"cost": "0.42", "tokens": 4200},
    }


def test_a_retry_after_carries_the_spend(pod: Path) -> None:
    sup = Supervisor.from_env()
    sup.add_spend(cost="0.0000000001")
    with pytest.raises(SystemExit):
        sup.retry_after("1m", "rate limited")
    words = json.loads(pod.read_text())
    assert words["spend"] == {"cost": "0.000000001"}, "rounded up, as the operator reads it"


def crash(cost: str | None) -> None:
    """An agent that spends `cost` (if any), then fails."""
    with Supervisor.from_env(renew_every=60) as sup:
        if cost is not None:
            sup.add_spend(cost=cost, tokens=100)
        raise RuntimeError("the model's answer did not parse")


def spend_and_shut_down() -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        sup.add_spend(cost="0.10")
        sup.shutdown("voluntary", "done")


def test_a_crash_leaves_its_exception_and_spend_as_last_words(
    pod: Path, apiserver: FakeApiServer
) -> None:
    with pytest.raises(RuntimeError):
        crash("0.40")
    assert json.loads(pod.read_text()) == {
        "reason": "RuntimeError: the model's answer did not parse",
        "spend": {"cost": "0.40", "tokens": 100},
    }


def test_a_crash_without_spend_says_why_and_last_words_stay(pod: Path) -> None:
    with pytest.raises(RuntimeError):
        crash(None)
    words = json.loads(pod.read_text())
    assert words == {"reason": "RuntimeError: the model's answer did not parse"}, words
    with pytest.raises(SystemExit):
        spend_and_shut_down()
    assert json.loads(pod.read_text())["shutdown"] == "voluntary", "the last words stay"


def test_on_a_laptop_spend_is_added_and_checked_all_the_same(laptop: Path) -> None:
    sup = Supervisor.from_env()
    sup.add_spend(cost="0.01", tokens=5)
    sup.add_spend(cost="0.01")
    assert sup.spend == {"cost": Decimal("0.02"), "tokens": 5}
    with pytest.raises(ValueError, match="from 0"):
        sup.add_spend(cost=-1)


def test_the_async_twin_adds_the_same_way(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=60) as sup:
            await asyncio.gather(*(sup.add_spend(cost="0.001", tokens=2) for _ in range(50)))
            assert sup.spend == {"cost": Decimal("0.050"), "tokens": 100}
            assert await sup.flush(5)
            assert lease_spend(apiserver) == {"cost": "0.050", "tokens": 100}
            sent = len(apiserver.patches())
            with pytest.raises(ValueError, match="needs cost= or tokens="):
                await sup.add_spend()
            with pytest.raises(ValueError, match="from 0"):
                await sup.add_spend(cost="-0.5", tokens=1)
            assert len(apiserver.patches()) == sent
            assert sup.spend == {"cost": Decimal("0.050"), "tokens": 100}
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        asyncio.run(agent())
    assert json.loads(pod.read_text()) == {
        "reason": "RuntimeError: crash",
        "spend": {"cost": "0.050", "tokens": 100},
    }
