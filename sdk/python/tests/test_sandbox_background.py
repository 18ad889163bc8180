"""An agent-sandbox Sandbox's pod whose identity is not on its Lease when the block is entered:
entering does not wait for it (an ordinary pod with a token and no operator pays one request),
the sender looks on in the background and takes it when the operator writes it (the first attempt
of a pod the operator adopts while running), or says once why it gave up. Both twins, against
the stand-in API server."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from agent_supervisor import AsyncSupervisor, Supervisor, _env
from conftest import NAMESPACE, SANDBOX
from fake_apiserver import FakeApiServer
from test_sandbox import AGENT_ENV, HOLDER, MAPPING, SPEND, TWINS, seen, warnings_of, written

#: When the operator writes the annotation, in seconds after the block was entered.
LATER = 1.2


@pytest.mark.parametrize("status", [403, 404])
@pytest.mark.parametrize("twin", TWINS)
def test_entering_and_leaving_do_not_wait_for_an_identity_not_there(
    twin: str,
    status: int,
    sandbox: Path,
    apiserver: FakeApiServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if status == 403:  # an ordinary pod's ServiceAccount, no operator
        written(apiserver)
        apiserver.fail_next(*[403] * 100)
    began = time.monotonic()
    with caplog.at_level(logging.INFO, "agent_supervisor"):
        if twin == "sync":
            with Supervisor.from_env() as sup:
                entered = time.monotonic() - began
                supervised = sup.supervised
                sup.report(progress=1)
        else:

            async def agent() -> tuple[float, bool]:
                async with AsyncSupervisor.from_env() as asup:
                    entered = time.monotonic() - began
                    await asup.report(progress=1)
                    return entered, asup.supervised

            entered, supervised = asyncio.run(agent())
    took = time.monotonic() - began
    print(f"{twin} {status}: entering took {entered * 1000:.1f} ms, the block {took * 1000:.1f} ms")
    assert entered < 0.5, "one read, not LOOKUP_TIMEOUT"
    assert took < 1, "leaving waits for nothing either"
    assert not supervised
    assert [r.method for r in apiserver.requests_for(NAMESPACE, SANDBOX)] == ["GET"]
    said = warnings_of(caplog)
    assert len(said) == 1, said
    assert "the block ended before this pod's identity was found" in said[0]
    where = f"Lease {NAMESPACE}/{SANDBOX}"
    why = f"may not read {where} (403)" if status == 403 else f"{where} does not exist"
    assert why in said[0]


def annotate_later(apiserver: FakeApiServer) -> threading.Timer:
    """The Lease of a pod the operator adopts: there, its annotation written `LATER`."""
    apiserver.add_lease(NAMESPACE, SANDBOX, duration=30)
    later = threading.Timer(
        LATER, apiserver.annotate, (NAMESPACE, SANDBOX, {AGENT_ENV: json.dumps(MAPPING)})
    )
    later.start()
    return later


def adopt(twin: str) -> dict[str, Any]:
    """Enters the block with `twin`, reports, waits (at most 10 s) until supervised, then
    flushes; what it saw on entering, after, and when."""
    began = time.monotonic()
    if twin == "sync":
        with Supervisor.from_env(renew_every=0.05) as sup:
            got: dict[str, Any] = {"entered": time.monotonic() - began, "before": seen(sup)}
            sup.report(progress=41, spend={"cost": "0.42"})
            while not sup.supervised and time.monotonic() - began < 10:
                time.sleep(0.01)
            got.update(adopted=time.monotonic() - began, after=seen(sup), flushed=sup.flush(5))
            time.sleep(0.3)  # renewals
        return got

    async def agent() -> dict[str, Any]:
        async with AsyncSupervisor.from_env(renew_every=0.05) as asup:
            got: dict[str, Any] = {"entered": time.monotonic() - began, "before": seen(asup)}
            await asup.report(progress=41, spend={"cost": "0.42"})
            ticks = 0
            while not asup.supervised and time.monotonic() - began < 10:
                await asyncio.sleep(0.01)
                ticks += 1
            got.update(adopted=time.monotonic() - began, after=seen(asup), ticks=ticks)
            got["flushed"] = await asup.flush(5)
            await asyncio.sleep(0.3)
        return got

    return asyncio.run(agent())


@pytest.mark.parametrize("twin", TWINS)
def test_an_identity_written_a_moment_later_is_taken_in_the_background(
    twin: str, sandbox: Path, apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    later = annotate_later(apiserver)
    try:
        with caplog.at_level(logging.INFO, "agent_supervisor"):
            got = adopt(twin)
    finally:
        later.cancel()
    print(
        f"{twin}: entering took {got['entered'] * 1000:.1f} ms, adopted at {got['adopted']:.2f} s"
    )
    assert got["entered"] < 0.5
    assert (got["before"]["supervised"], got["before"]["restart_count"]) == (False, 0)
    assert LATER <= got["adopted"] < LATER + 1.5, "read again once a second"
    after = got["after"]
    assert (after["supervised"], after["restart_count"], after["progress"]) == (True, 3, 40)
    assert after["checkpoint"] == "s3://bucket/box/step-40"
    assert got["flushed"]
    if twin == "async":
        assert got["ticks"] >= 50, "the event loop ran on"
    requests = apiserver.requests_for(NAMESPACE, SANDBOX)
    reads = [r for r in requests if r.method == "GET"]
    assert len(reads) == 3, "on entering, then once a second until found"
    renewals = [r for r in requests if r.method == "PATCH"]
    assert len(renewals) >= 3, "renewing every 0.05 s"
    assert all(r.body["spec"]["holderIdentity"] == HOLDER for r in renewals)
    first = renewals[0].body["metadata"]["annotations"]
    assert first["supervisor.dev/progress"] == "41", "the report made before, with the first"
    assert first[SPEND] == f'{{"cost":"0.42","pod":"{HOLDER}"}}'
    lease = apiserver.lease(NAMESPACE, SANDBOX)
    assert lease["spec"]["holderIdentity"] == HOLDER
    assert lease["metadata"]["annotations"][SPEND] == f'{{"cost":"0.42","pod":"{HOLDER}"}}'
    assert warnings_of(caplog) == []


SIGTERM_AGENT = """
import sys, time
from pathlib import Path
from agent_supervisor import Supervisor, _sandbox

_sandbox.SERVICE_ACCOUNT = Path(sys.argv[1])
try:
    with Supervisor.from_env() as sup:
        print(f"ready supervised={sup.supervised}", flush=True)
        while True:
            time.sleep(0.05)
finally:
    print("cleanup ran", flush=True)
"""


def test_sigterm_before_the_identity_is_found_ends_the_process_as_by_default(
    sandbox: Path, service_account: Path, apiserver: FakeApiServer, tmp_path: Path
) -> None:
    program = tmp_path / "agent.py"
    program.write_text(SIGTERM_AGENT)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, str(program), str(service_account)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready supervised=False\n"
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGTERM, output
    assert "cleanup ran" not in output


def test_sigterm_after_the_identity_is_found_in_the_background_writes_the_last_words(
    sandbox: Path,
    apiserver: FakeApiServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    termination_log = tmp_path / "termination-log"
    monkeypatch.setattr(_env, "DEFAULT_TERMINATION_LOG", str(termination_log))
    calls: list[int] = []

    def mine(signum: int, frame: FrameType | None) -> None:
        calls.append(signum)

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with Supervisor.from_env(renew_every=0.05) as sup:
            sup.report(progress=41)
            signal.raise_signal(signal.SIGTERM)
            assert calls == [signal.SIGTERM], "not found yet: the author's handler alone"
            assert not termination_log.exists()
            written(apiserver)
            deadline = time.monotonic() + 5
            while not sup.supervised and time.monotonic() < deadline:
                time.sleep(0.01)
            assert sup.supervised
            signal.raise_signal(signal.SIGTERM)
            assert calls == [signal.SIGTERM] * 2
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert json.loads(termination_log.read_text()) == {"progress": 41}
