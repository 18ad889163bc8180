"""`Supervisor` against a stand-in Lease API, through the real lightkube client."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from agent_supervisor import Supervisor
from conftest import LEASE, NAMESPACE, POD
from fake_apiserver import FakeApiServer, eventually

PROGRESS = "supervisor.dev/progress"
CHECKPOINT = "supervisor.dev/checkpoint"
SPEND = "supervisor.dev/spend"


def annotations(apiserver: FakeApiServer) -> dict[str, str]:
    return apiserver.lease(NAMESPACE, LEASE)["metadata"].get("annotations", {})


def test_what_the_operator_handed_is_read_from_the_environment(pod: Path) -> None:
    sup = Supervisor.from_env()
    assert sup.checkpoint == "s3://bucket/run-7/step-100"
    assert sup.progress == 100
    assert sup.restart_count == 3
    assert sup.last_failure_reason == "OOMKilled"
    assert sup.supervised


def test_a_first_start_is_handed_nothing(pod: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AGENT_CHECKPOINT", "AGENT_PROGRESS", "AGENT_LAST_FAILURE_REASON"):
        monkeypatch.setenv(key, "")
    monkeypatch.setenv("AGENT_RESTART_COUNT", "0")
    sup = Supervisor.from_env()
    assert (sup.checkpoint, sup.progress, sup.last_failure_reason) == (None, None, None)
    assert sup.restart_count == 0


def test_entering_renews_the_lease_as_this_pod(pod: Path, apiserver: FakeApiServer) -> None:
    apiserver.leases[(NAMESPACE, LEASE)]["metadata"]["annotations"] = {
        SPEND: '{"cost":"9.00"}',  # the attempt before's
        CHECKPOINT: "kept",
    }
    with Supervisor.from_env(renew_every=60):
        lease = apiserver.lease(NAMESPACE, LEASE)
        assert lease["spec"]["holderIdentity"] == POD
        assert lease["spec"]["renewTime"].endswith("Z")
        assert lease["spec"]["acquireTime"] == lease["spec"]["renewTime"]
        assert lease["spec"]["leaseDurationSeconds"] == 30, "the operator's field is left alone"
        assert annotations(apiserver) == {CHECKPOINT: "kept"}, "spend is per attempt"


def test_renewals_happen_in_the_background_and_carry_no_report(
    pod: Path, apiserver: FakeApiServer
) -> None:
    with Supervisor.from_env(renew_every=0.05) as sup:
        sup.report(progress=120)
        eventually(lambda: len(apiserver.patches()) >= 5)
    renewals = apiserver.patches()
    times = [r.body["spec"]["renewTime"] for r in renewals]
    assert times == sorted(times)
    assert all(r.body["spec"]["holderIdentity"] == POD for r in renewals)
    carrying = [
        r for r in renewals if PROGRESS in r.body.get("metadata", {}).get("annotations", {})
    ]
    assert len(carrying) == 1, "only the agent's own report carries progress"
    count = len(apiserver.patches())
    time.sleep(0.2)
    assert len(apiserver.patches()) == count, "leaving the block stops renewing"


def test_renews_at_a_third_of_the_lease_duration(pod: Path, apiserver: FakeApiServer) -> None:
    apiserver.add_lease(NAMESPACE, LEASE, duration=1)
    with Supervisor.from_env():
        time.sleep(1.2)
    # The first renewal on entering, then one every 1/3 s: 3 more in 1.2 s.
    assert 2 <= len(apiserver.patches()) <= 6  # 4 expected; slack for a busy machine


def test_without_a_duration_it_renews_every_5_seconds(pod: Path) -> None:
    sup = Supervisor.from_env()
    assert sup._interval(None) == 5.0
    assert sup._interval(30) == 10.0
    assert Supervisor.from_env(renew_every=2)._interval(30) == 2
    with pytest.raises(ValueError, match="renew_every"):
        Supervisor.from_env(renew_every=0)


def test_report_writes_the_lease_annotations(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        sup.report(progress=120, checkpoint="s3://bucket/run-7/step-120")
        sup.report(spend={"cost": "0.42", "tokens": 18000})
        sup.report(spend={"cost": 1})
        assert sup.flush(5)
        assert annotations(apiserver) == {
            PROGRESS: "120",
            CHECKPOINT: "s3://bucket/run-7/step-120",
            SPEND: f'{{"cost":"1","tokens":18000,"pod":"{POD}"}}',  # its maker named
        }
        assert apiserver.lease(NAMESPACE, LEASE)["spec"]["holderIdentity"] == POD


def test_a_report_renews_without_entering(pod: Path, apiserver: FakeApiServer) -> None:
    sup = Supervisor.from_env()
    sup.report(progress=101)
    assert sup.flush(5)
    lease = apiserver.lease(NAMESPACE, LEASE)
    assert lease["spec"]["holderIdentity"] == POD
    assert annotations(apiserver) == {PROGRESS: "101"}


def test_conflicts_are_retried(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        before = len(apiserver.patches())
        apiserver.fail_next(409, 409)
        sup.report(progress=130)
        assert sup.flush(5)
        assert len(apiserver.patches()) == before + 3
        assert annotations(apiserver)[PROGRESS] == "130"


def test_a_report_not_taken_is_logged_and_sent_with_the_next(
    pod: Path, apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        apiserver.fail_next(403)
        with caplog.at_level(logging.WARNING, "agent_supervisor"):
            sup.report(checkpoint="step-140")
            eventually(lambda: "report not taken" in caplog.text)
        assert "--manage-agent-rbac=false" in caplog.text
        assert CHECKPOINT not in annotations(apiserver)
        sup.report(progress=140)
        assert sup.flush(5)
        assert annotations(apiserver) == {CHECKPOINT: "step-140", PROGRESS: "140"}


def test_failing_renewals_are_said_once_until_they_work(
    pod: Path, apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, "agent_supervisor"), Supervisor.from_env(renew_every=0.02):
        apiserver.fail_next(*[404] * 4)  # four renewals in a row: not retried, said once
        eventually(lambda: "works again" in caplog.text)
    assert caplog.text.count("does the Agent set spec.heartbeat?") == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"progress": -1}, "from 0"),
        ({"progress": 1.5}, "whole number"),
        ({"progress": True}, "whole number"),
        ({"progress": "7"}, "whole number"),
        ({"progress": 2**63}, "from 0 to"),
        ({"checkpoint": "x" * 1025}, "longer than 1024"),
        ({"checkpoint": "é" * 513}, "longer than 1024"),
        ({"checkpoint": "  "}, "empty"),
        ({"checkpoint": "step\n2"}, "control characters"),
        ({"checkpoint": 7}, "must be a str"),
        ({"spend": {"cost": "-0.01"}}, "from 0"),
        ({"spend": {"cost": "a lot"}}, "not a decimal"),
        ({"spend": {"cost": "NaN"}}, "finite"),
        ({"spend": {"tokens": -1}}, "whole number"),
        ({"spend": {"tokens": 1.0}}, "whole number"),
        ({"spend": {"dollars": 1}}, "not dollars"),
        ({"spend": {}}, "must be a dict"),
        ({"spend": "0.42"}, "must be a dict"),
        ({}, "needs progress="),
        ({"progress": 120, "checkpoint": "x" * 2000}, "longer than 1024"),
    ],
)
def test_bad_arguments_raise_before_anything_is_sent(
    pod: Path, apiserver: FakeApiServer, kwargs: dict[str, object], message: str
) -> None:
    sup = Supervisor.from_env()
    with pytest.raises(ValueError, match=message):
        sup.report(**kwargs)  # type: ignore[arg-type]
    assert apiserver.patches() == []
    sup.report(progress=120)  # a bad report is not half taken
    assert sup.flush(5)
    assert annotations(apiserver) == {PROGRESS: "120"}


def test_a_progress_below_the_one_handed_is_not_sent_until_it_passes_it(
    pod: Path, apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Handed 100, resumed from an older checkpoint: steps 81.. are redone, not a mistake.
    sup = Supervisor.from_env()
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        sup.report(progress=81, checkpoint="step-81")
        sup.report(progress=82)
    assert sup.flush(5)
    assert caplog.text.count("below the 100 recorded before this attempt") == 1
    assert annotations(apiserver) == {CHECKPOINT: "step-81"}
    sup.report(progress=100)
    assert sup.flush(5)
    assert annotations(apiserver) == {CHECKPOINT: "step-81", PROGRESS: "100"}
    with pytest.raises(ValueError, match="lower than the 100 this attempt reported"):
        sup.report(progress=99)


def test_progress_and_spend_never_go_back(pod: Path, apiserver: FakeApiServer) -> None:
    sup = Supervisor.from_env()
    sup.report(progress=100, spend={"cost": "0.50", "tokens": 10})
    sup.report(progress=100)  # the same again is fine
    with pytest.raises(ValueError, match="lower than the 100"):
        sup.report(progress=50)
    with pytest.raises(ValueError, match=r"cost 0\.49 is lower"):
        sup.report(spend={"cost": "0.49"})
    with pytest.raises(ValueError, match="tokens 9 is lower"):
        sup.report(spend={"tokens": 9})
    assert sup.flush(5)
    assert json.loads(annotations(apiserver)[SPEND]) == {"cost": "0.50", "tokens": 10, "pod": POD}


def test_retry_after_writes_the_message_and_exits_1(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew_every=0.02) as sup:
        sup.report(progress=120, checkpoint="step-120", spend={"cost": "0.42"})
        with pytest.raises(SystemExit) as exit:
            sup.retry_after("15m", "rate limited")
    assert exit.value.code == 1
    assert json.loads(pod.read_text()) == {
        "retryAfter": "15m",
        "reason": "rate limited",
        "progress": 120,
        "checkpoint": "step-120",
        "spend": {"cost": "0.42"},
    }
    count = len(apiserver.patches())
    time.sleep(0.1)
    assert len(apiserver.patches()) == count, "no renewal after deciding to stop"


@pytest.mark.parametrize("kind", ["economic", "voluntary", "Economic"])
def test_shutdown_writes_the_message_and_exits_0(pod: Path, kind: str) -> None:
    sup = Supervisor.from_env()
    with pytest.raises(SystemExit) as exit:
        sup.shutdown(kind, "out of credits")
    assert exit.value.code == 0
    assert json.loads(pod.read_text()) == {"shutdown": kind.lower(), "reason": "out of credits"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.shutdown("bored", "x"), "not one of: economic, voluntary"),
        (lambda s: s.shutdown(None, "x"), "not one of"),
        (lambda s: s.shutdown("voluntary", 7), "reason must be a str"),
        (lambda s: s.retry_after("soon", "x"), "write a duration"),
        (lambda s: s.retry_after("-15m", "x"), "write a duration"),
        (lambda s: s.retry_after(-1, "x"), "from 0 to a year"),
        (lambda s: s.retry_after("2026-13-01T00:00:00Z", "x"), "write a duration"),
        (lambda s: s.retry_after("2026-11-22T10:00:00", "x"), "write a duration"),
    ],
)
def test_bad_last_words_raise_and_leave_everything_running(
    pod: Path, apiserver: FakeApiServer, call: object, message: str
) -> None:
    with Supervisor.from_env(renew_every=0.02) as sup:
        with pytest.raises(ValueError, match=message):
            call(sup)  # type: ignore[operator]
        count = len(apiserver.patches())
        eventually(lambda: len(apiserver.patches()) > count)
    assert not pod.exists()


def test_a_report_after_deciding_to_stop_is_not_sent(pod: Path, apiserver: FakeApiServer) -> None:
    sup = Supervisor.from_env()
    with pytest.raises(SystemExit):
        sup.retry_after(60, "later")
    sup.report(progress=200)
    assert apiserver.patches() == []
