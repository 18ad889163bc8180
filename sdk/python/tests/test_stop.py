"""How an agent ends: a clean stop on SIGTERM (how Kubernetes stops a pod), in both twins, and a
report after the `with` block (issue 62's table)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent_supervisor import AsyncSupervisor, Supervisor
from fake_apiserver import FakeApiServer

SYNC_AGENT = """
import signal, sys, time
from agent_supervisor import Supervisor

if sys.argv[1] == "chained":
    def mine(signum, frame):
        print("the author's handler", flush=True)
        raise SystemExit(7)
    signal.signal(signal.SIGTERM, mine)
try:
    with Supervisor.from_env(renew_every=0.05) as sup:
        sup.report(progress=120, checkpoint="step-120")
        sup.add_spend(cost="0.40", tokens=400)
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
finally:
    print("cleanup ran", flush=True)
"""

ASYNC_AGENT = """
import asyncio, sys
from agent_supervisor import AsyncSupervisor

async def main():
    try:
        async with AsyncSupervisor.from_env(renew_every=0.05) as sup:
            await sup.report(progress=120, checkpoint="step-120")
            await sup.add_spend(cost="0.40", tokens=400)
            print("ready", flush=True)
            while True:
                await asyncio.sleep(0.05)
    finally:
        print("cleanup ran", flush=True)

asyncio.run(main())
"""

LAST_WORDS = {"progress": 120, "checkpoint": "step-120", "spend": {"cost": "0.40", "tokens": 400}}


def terminated(program: str, tmp_path: Path, *args: str, lease: bool = True) -> tuple[int, str]:
    """Runs `program` until it says it is ready, sends it SIGTERM; its exit code and output."""
    path = tmp_path / "agent.py"
    path.write_text(program)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if not lease:
        del env["AGENT_HEARTBEAT_LEASE"]
    with subprocess.Popen(
        [sys.executable, str(path), *args], stdout=subprocess.PIPE, text=True, env=env
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    return process.returncode, output


@pytest.mark.parametrize("program", [SYNC_AGENT, ASYNC_AGENT], ids=["sync", "async"])
def test_sigterm_writes_the_last_words_and_lets_cleanup_run(
    pod: Path, apiserver: FakeApiServer, tmp_path: Path, program: str
) -> None:
    code, output = terminated(program, tmp_path, "plain")
    assert code == 143, output  # 128 + SIGTERM, as for a process the signal ended
    assert "cleanup ran" in output
    assert json.loads(pod.read_text()) == LAST_WORDS


def test_sigterm_writes_the_last_words_without_a_heartbeat_too(pod: Path, tmp_path: Path) -> None:
    code, output = terminated(SYNC_AGENT, tmp_path, "plain", lease=False)
    assert code == 143, output
    assert "cleanup ran" in output
    assert json.loads(pod.read_text()) == LAST_WORDS


def test_sigterm_chains_to_the_authors_handler(
    pod: Path, apiserver: FakeApiServer, tmp_path: Path
) -> None:
    code, output = terminated(SYNC_AGENT, tmp_path, "chained")
    assert code == 7, output
    assert "the author's handler" in output
    assert "cleanup ran" in output
    assert json.loads(pod.read_text()) == LAST_WORDS


def test_the_handler_is_installed_only_in_the_main_thread_and_put_back(
    pod: Path, apiserver: FakeApiServer
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with Supervisor.from_env(renew_every=60):
        assert signal.getsignal(signal.SIGTERM) != before
    assert signal.getsignal(signal.SIGTERM) == before, "put back on leaving the block"
    sup = Supervisor.from_env(renew_every=60)
    thread = threading.Thread(target=sup.start)
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGTERM) == before, "not from another thread"
    sup.close()


def test_a_report_after_the_block_raises(pod: Path, apiserver: FakeApiServer) -> None:
    with Supervisor.from_env(renew_every=60) as sup:
        sup.report(progress=120)
    with pytest.raises(RuntimeError, match=r"report\(\) after the supervisor was closed"):
        sup.report(progress=121)
    with pytest.raises(RuntimeError, match=r"add_spend\(\) after the supervisor was closed"):
        sup.add_spend(tokens=1)
    assert apiserver.lease("team", "agent-7")["metadata"]["annotations"] == {
        "supervisor.dev/progress": "120"
    }, "the report inside the block was written as the block ended"


def test_the_async_twin_raises_too(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=60) as sup:
            await sup.report(progress=120)
        with pytest.raises(RuntimeError, match="after the supervisor was closed"):
            await sup.report(progress=121)
        with pytest.raises(RuntimeError, match="after the supervisor was closed"):
            await sup.add_spend(tokens=1)

    asyncio.run(agent())


def test_a_report_after_the_block_raises_on_a_laptop_too(laptop: Path) -> None:
    with Supervisor.from_env() as sup:
        sup.report(progress=1)
    with pytest.raises(RuntimeError, match="after the supervisor was closed"):
        sup.report(progress=2)
