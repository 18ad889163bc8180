"""An agent-sandbox Sandbox's pod: no `AGENT_*` variables (the operator does not edit a Sandbox's
template), so the SDK reads its identity from the `supervisor.dev/agent-env` annotation the
operator writes on the Lease named after the pod, and renews and reports as `AGENT_HOLDER`.
Both twins, against the stand-in API server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from agent_supervisor import AsyncSupervisor, Outcome, Supervisor
from agent_supervisor._env import DEFAULT_TERMINATION_LOG
from conftest import GIVE_UP, LEASE, NAMESPACE, POD, SANDBOX
from fake_apiserver import FakeApiServer

HOLDER = "box#3"
AGENT_ENV = "supervisor.dev/agent-env"
SPEND = "supervisor.dev/spend"
#: What the operator writes on the Lease for the Sandbox's fourth attempt.
MAPPING = {
    "AGENT_NAME": SANDBOX,
    "AGENT_NAMESPACE": NAMESPACE,
    "AGENT_POD_NAME": SANDBOX,
    "AGENT_RESTART_COUNT": "3",
    "AGENT_LAST_FAILURE_REASON": "Error",
    "AGENT_LAST_FAILURE": '{"attempt": 3, "reason": "Error", "class": "Transient", "exitCode": 2}',
    "AGENT_HEARTBEAT_LEASE": SANDBOX,
    "AGENT_CHECKPOINT": "s3://bucket/box/step-40",
    "AGENT_PROGRESS": "40",
    "AGENT_HOLDER": HOLDER,
}
TWINS = ["sync", "async"]


def written(apiserver: FakeApiServer, mapping: dict[str, str] = MAPPING) -> None:
    """The Sandbox's Lease as the operator leaves it before the attempt's pod starts."""
    apiserver.add_lease(
        NAMESPACE, SANDBOX, duration=30, annotations={AGENT_ENV: json.dumps(mapping)}
    )


def seen(sup: Supervisor | AsyncSupervisor) -> dict[str, Any]:
    """What the agent sees of its identity."""
    return {
        "supervised": sup.supervised,
        "restart_count": sup.restart_count,
        "last_failure_reason": sup.last_failure_reason,
        "previous": sup.previous,
        "checkpoint": sup.checkpoint,
        "progress": sup.progress,
        "termination_log": sup._identity.termination_log,
    }


def observe(twin: str, hold: float = 0.0) -> dict[str, Any]:
    """Enters the block with `twin`, stays `hold` seconds, reports progress and spend, flushes,
    and returns what it saw on entering, with how long entering took (`entered`), what it saw
    after `hold` (`later`) and, for the async twin, how often the event loop ran another task
    meanwhile (`ticks`)."""
    if twin == "sync":
        began = time.monotonic()
        with Supervisor.from_env(renew_every=0.05) as sup:
            got = {**seen(sup), "entered": time.monotonic() - began}
            time.sleep(hold)
            got["later"] = seen(sup)
            sup.report(progress=41, spend={"cost": "0.42"})
            assert sup.flush(5)
        return got

    async def agent() -> dict[str, Any]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        ticker = asyncio.create_task(tick())
        began = time.monotonic()
        async with AsyncSupervisor.from_env(renew_every=0.05) as asup:
            got = {**seen(asup), "entered": time.monotonic() - began}
            await asyncio.sleep(hold)
            got.update(later=seen(asup), ticks=ticks)
            await asup.report(progress=41, spend={"cost": "0.42"})
            assert await asup.flush(5)
        ticker.cancel()
        return got

    return asyncio.run(agent())


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agent_supervisor" and r.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize("twin", TWINS)
def test_the_identity_comes_from_the_leases_annotation(
    twin: str, sandbox: Path, apiserver: FakeApiServer
) -> None:
    written(apiserver)
    got = observe(twin)
    for extra in ("ticks", "entered", "later"):
        got.pop(extra, None)
    assert got == {
        "supervised": True,
        "restart_count": 3,
        "last_failure_reason": "Error",
        "previous": Outcome(
            attempt=3, reason="Error", exit_code=2, message=None, klass="Transient"
        ),
        "checkpoint": "s3://bucket/box/step-40",
        "progress": 40,
        "termination_log": DEFAULT_TERMINATION_LOG,  # as in any pod the operator runs
    }
    requests = apiserver.requests_for(NAMESPACE, SANDBOX)
    assert requests[0].method == "GET", "read first, for the identity"
    renewals = [r for r in requests if r.method == "PATCH"]
    assert renewals
    assert all(r.body["spec"]["holderIdentity"] == HOLDER for r in renewals)
    lease = apiserver.lease(NAMESPACE, SANDBOX)
    assert lease["spec"]["holderIdentity"] == HOLDER
    annotations = lease["metadata"]["annotations"]
    assert annotations[SPEND] == f'{{"cost":"0.42","pod":"{HOLDER}"}}'
    assert annotations["supervisor.dev/progress"] == "41"
    assert json.loads(annotations[AGENT_ENV]) == MAPPING, "the operator's, left alone"


@pytest.mark.parametrize("lease_exists", [True, False])
@pytest.mark.parametrize("twin", TWINS)
def test_no_annotation_in_time_is_a_no_op_said_once(
    twin: str,
    lease_exists: bool,
    sandbox: Path,
    apiserver: FakeApiServer,
    give_up_soon: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if lease_exists:
        apiserver.add_lease(NAMESPACE, SANDBOX, duration=30)
    began = time.time()
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        got = observe(twin, hold=GIVE_UP + 0.5)
    assert got["entered"] < 0.5, "entering does not wait for it"
    assert (got["supervised"], got["restart_count"], got["checkpoint"]) == (False, 0, None)
    assert got["later"]["supervised"] is False
    assert not apiserver.patches()
    reads = apiserver.requests_for(NAMESPACE, SANDBOX)
    assert 2 <= len(reads) <= 3, "on entering, a second later, and at the deadline"
    said = warnings_of(caplog)
    assert len(said) == 1, said
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert GIVE_UP <= warning.created - began < GIVE_UP + 1, "said when it gave up"
    why = "has no supervisor.dev/agent-env annotation" if lease_exists else "does not exist"
    assert f"Lease {NAMESPACE}/{SANDBOX} {why}" in said[0]
    assert "spec.sandboxRef" in said[0]
    assert f"after {GIVE_UP:g}s" in said[0]
    assert "every call is a no-op" in said[0]
    assert "AGENT_HEARTBEAT_LEASE is not set" not in caplog.text, "one line, not two"


@pytest.mark.parametrize("twin", TWINS)
def test_a_refused_read_is_a_no_op_that_names_the_fix(
    twin: str,
    sandbox: Path,
    apiserver: FakeApiServer,
    give_up_soon: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    written(apiserver)
    apiserver.fail_next(*[403] * 100)
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        got = observe(twin, hold=GIVE_UP + 0.5)
    assert got["entered"] < 0.5
    assert not got["later"]["supervised"]
    assert not apiserver.patches()
    said = warnings_of(caplog)
    assert len(said) == 1, said
    assert f"may not read Lease {NAMESPACE}/{SANDBOX} (403)" in said[0]
    assert "--manage-agent-rbac=false" in said[0]


def test_a_token_the_api_server_does_not_take_gives_up_at_once(
    sandbox: Path, apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    written(apiserver)
    apiserver.fail_next(401)
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        got = observe("sync")
    assert not got["supervised"]
    assert len(apiserver.requests) == 1
    assert "does not accept the pod's token (401)" in warnings_of(caplog)[0]


@pytest.mark.parametrize("twin", TWINS)
def test_a_mapping_for_another_pod_is_ignored(
    twin: str,
    sandbox: Path,
    apiserver: FakeApiServer,
    give_up_soon: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    other = {**MAPPING, "AGENT_POD_NAME": "another-box"}
    written(apiserver, other)
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        got = observe(twin, hold=GIVE_UP + 0.5)
    assert (got["supervised"], got["restart_count"]) == (False, 0)
    assert got["later"]["supervised"] is False
    assert not apiserver.patches()
    said = warnings_of(caplog)
    assert len(said) == 1, said
    assert "is for pod 'another-box', not this one (box): ignored" in said[0]


@pytest.mark.parametrize("twin", TWINS)
def test_with_agent_name_in_the_environment_the_lease_is_never_read(
    twin: str, pod: Path, service_account: Path, apiserver: FakeApiServer
) -> None:
    written(apiserver)
    got = observe(twin)
    assert (got["supervised"], got["checkpoint"]) == (True, "s3://bucket/run-7/step-100")
    assert apiserver.requests_for(NAMESPACE, SANDBOX) == []
    assert apiserver.lease(NAMESPACE, LEASE)["spec"]["holderIdentity"] == POD


@pytest.mark.parametrize("twin", TWINS)
def test_without_a_token_it_is_a_no_op_that_names_the_fix(
    twin: str,
    sandbox: Path,
    service_account: Path,
    apiserver: FakeApiServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (service_account / "token").unlink()
    written(apiserver)
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        got = observe(twin)
    assert not got["supervised"]
    assert apiserver.requests == []
    said = warnings_of(caplog)
    assert len(said) == 1, said
    assert "automountServiceAccountToken: true" in said[0]


def test_outside_a_pod_nothing_is_looked_up(
    sandbox: Path,
    apiserver: FakeApiServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    written(apiserver)
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        assert not observe("sync")["supervised"]
    assert apiserver.requests == []
    assert caplog.text.count("AGENT_HEARTBEAT_LEASE is not set") == 1


def test_a_bad_argument_raises_before_anything_is_sent(
    sandbox: Path, apiserver: FakeApiServer
) -> None:
    written(apiserver)
    with pytest.raises(ValueError, match="renew must be"):
        Supervisor.from_env(renew="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="renew_every"):
        AsyncSupervisor.from_env(renew_every=0)
    assert apiserver.requests == []


def test_a_report_before_the_block_goes_with_the_holder_read_on_entering(
    sandbox: Path, apiserver: FakeApiServer
) -> None:
    written(apiserver)
    sup = Supervisor.from_env(renew_every=0.05)
    sup.report(spend={"cost": "0.10"})
    assert apiserver.requests == [], "nothing is known, or sent, before the block"
    with sup:
        assert sup.flush(5)
    spend = apiserver.lease(NAMESPACE, SANDBOX)["metadata"]["annotations"][SPEND]
    assert spend == f'{{"cost":"0.10","pod":"{HOLDER}"}}'


def test_an_agent_without_a_heartbeat_gets_its_identity_and_writes_nothing(
    sandbox: Path, apiserver: FakeApiServer
) -> None:
    mapping = {k: v for k, v in MAPPING.items() if k not in ("AGENT_HEARTBEAT_LEASE",)}
    written(apiserver, mapping)
    got = observe("sync")
    assert (got["supervised"], got["restart_count"]) == (False, 3)
    assert got["termination_log"] == DEFAULT_TERMINATION_LOG
    assert not apiserver.patches()


def test_the_environments_termination_log_gets_the_last_words(
    sandbox: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TERMINATION_LOG", str(sandbox))
    written(apiserver)

    async def agent() -> None:
        async with AsyncSupervisor.from_env() as sup:
            await sup.report(progress=42)
            await sup.shutdown("voluntary", "done")

    with pytest.raises(SystemExit) as exit:
        asyncio.run(agent())
    assert exit.value.code == 0
    assert json.loads(sandbox.read_text()) == {
        "shutdown": "voluntary",
        "reason": "done",
        "progress": 42,
    }


def test_agent_holder_in_the_environment_is_the_holder(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_HOLDER", f"{POD}#4")
    observe("sync")
    lease = apiserver.lease(NAMESPACE, LEASE)
    assert lease["spec"]["holderIdentity"] == f"{POD}#4"
    assert lease["metadata"]["annotations"][SPEND] == f'{{"cost":"0.42","pod":"{POD}#4"}}'
