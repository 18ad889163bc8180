"""The example agents in examples/ run as their comments say, with this SDK: as scripts outside
Kubernetes (no-op mode), and in a pod's environment against the stand-in Lease API."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import LEASE, NAMESPACE
from fake_apiserver import FakeApiServer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PYTHON_AGENT = EXAMPLES / "python-agent" / "agent.py"
LANGGRAPH_AGENT = EXAMPLES / "langgraph-agent" / "agent.py"


def load(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example as a module (registered, so that LangGraph can read its type hints)."""
    name = f"example_{path.parent.name.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None, path
    assert spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ in examples/
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def run_script(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`python agent.py`, as a person would run it on a laptop."""
    return subprocess.run(
        [sys.executable, str(path)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def annotations(apiserver: FakeApiServer) -> dict[str, str]:
    return dict(apiserver.lease(NAMESPACE, LEASE)["metadata"].get("annotations", {}))


def attempt(monkeypatch: pytest.MonkeyPatch, restarts: int, checkpoint: str, progress: str) -> None:
    """What the operator hands an attempt."""
    monkeypatch.setenv("AGENT_RESTART_COUNT", str(restarts))
    monkeypatch.setenv("AGENT_CHECKPOINT", checkpoint)
    monkeypatch.setenv("AGENT_PROGRESS", progress)


def last_words(main: Any, code: int, termination_log: Path) -> dict[str, Any]:
    """Runs `main` to its SystemExit; the typed termination message it wrote."""
    with pytest.raises(SystemExit) as exit:
        main()
    assert exit.value.code == code
    return dict(json.loads(termination_log.read_text()))


# examples/python-agent


def test_the_python_agent_runs_outside_kubernetes(laptop: Path) -> None:
    done = run_script(PYTHON_AGENT, STEPS="3", STEP_SECONDS="0")
    assert done.returncode == 0, done.stderr
    assert "AGENT_HEARTBEAT_LEASE is not set" in done.stderr
    assert "starting at step 0 of 3" in done.stderr
    assert "step 3 done" in done.stderr


@pytest.fixture
def python_agent(pod: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("STEP_SECONDS", "0")
    return load(PYTHON_AGENT, monkeypatch)


def test_the_python_agent_resumes_reports_each_step_and_shuts_down_when_done(
    python_agent: Any, pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPS", "5")
    attempt(monkeypatch, 1, "step-3", "3")
    message = last_words(python_agent.main, 0, pod)
    assert message == {
        "shutdown": "voluntary",
        "reason": "all 5 steps done",
        "progress": 5,
        "checkpoint": "step-5",
        "spend": {"cost": "0.004", "tokens": 2000},  # steps 4 and 5: this attempt's
    }
    reported = annotations(apiserver)
    assert (reported["supervisor.dev/progress"], reported["supervisor.dev/checkpoint"]) == (
        "5",
        "step-5",
    )
    assert json.loads(reported["supervisor.dev/spend"]) == {
        "cost": "0.004",
        "tokens": 2000,
        "pod": os.environ["AGENT_POD_NAME"],
    }
    held = [r.body["spec"]["holderIdentity"] for r in apiserver.patches()]
    assert set(held) == {os.environ["AGENT_POD_NAME"]}, "renewed as its own pod"


def test_the_python_agent_asks_for_a_later_restart_when_rate_limited(
    python_agent: Any, pod: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STEPS", "10")
    monkeypatch.setenv("CALLS_PER_MINUTE", "2")
    attempt(monkeypatch, 0, "", "")
    message = last_words(python_agent.main, 1, pod)
    retry = message.pop("retryAfter")  # when the first of the minute's two calls is a minute old
    assert retry == "1m" or (retry.endswith("s") and 50 <= int(retry[:-1]) < 60), retry
    assert message == {
        "reason": "rate limited by the model provider",
        "progress": 2,
        "checkpoint": "step-2",
        "spend": {"cost": "0.004", "tokens": 2000},
    }


def test_the_python_agent_shuts_down_for_good_when_out_of_credits(
    python_agent: Any, pod: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CREDITS", "0.005")
    attempt(monkeypatch, 0, "", "")
    message = last_words(python_agent.main, 0, pod)
    assert message["shutdown"] == "economic"
    assert message["reason"] == "out of credits: $0.001 left, a call costs $0.002"
    assert (message["progress"], message["checkpoint"]) == (2, "step-2")


# examples/langgraph-agent


def test_the_langgraph_agent_runs_outside_kubernetes(laptop: Path, tmp_path: Path) -> None:
    done = run_script(LANGGRAPH_AGENT, CHECKPOINT_DB=str(tmp_path / "c.sqlite"), NODE_SECONDS="0")
    assert done.returncode == 0, done.stderr
    assert "A report on supervised agents" in done.stderr


def test_the_langgraph_agent_resumes_at_the_node_it_crashed_in(
    pod: Path,
    apiserver: FakeApiServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = tmp_path / "checkpoints.sqlite"  # on the Agent's volume claim, in a pod
    monkeypatch.setenv("CHECKPOINT_DB", str(db))
    monkeypatch.setenv("NODE_SECONDS", "0")
    monkeypatch.setenv("CRASH_IN", "research")
    example = load(LANGGRAPH_AGENT, monkeypatch)
    caplog.set_level(logging.INFO, "langgraph-agent")

    attempt(monkeypatch, 0, "", "")  # the first attempt crashes in research
    with pytest.raises(RuntimeError, match="research: the search tool timed out"):
        example.main()
    reported = annotations(apiserver)
    checkpoint = reported["supervisor.dev/checkpoint"]
    assert checkpoint.startswith("report-1/")
    assert reported["supervisor.dev/progress"] == "1", "steps: -1 input, 0 start, 1 after plan"

    # The operator hands the next attempt what the first reported.
    attempt(monkeypatch, 1, checkpoint, reported["supervisor.dev/progress"])
    message = last_words(example.main, 0, pod)
    assert (message["shutdown"], message["reason"]) == ("voluntary", "report written")
    assert f"resuming thread report-1 from checkpoint {checkpoint}, at node research" in caplog.text
    ran = [r.getMessage() for r in caplog.records if r.getMessage().startswith("node ")]
    assert ran == [
        "node plan: running",
        "node research: running",  # crashed
        "node research: running",
        "node write: running",
        "node review: running",
    ]
    conn = sqlite3.connect(db, check_same_thread=False)
    from langgraph.checkpoint.sqlite import SqliteSaver

    graph = example.build().compile(checkpointer=SqliteSaver(conn))
    state = graph.get_state({"configurable": {"thread_id": "report-1"}}).values
    assert state["notes"] == ["plan: done", "research: done", "write: done", "review: done"]
    assert state["report"] == "A report on supervised agents, from 2 notes"
    assert int(annotations(apiserver)["supervisor.dev/progress"]) > 1
