"""The README's agents run as written: its 15-line agent and its LangGraph snippet, each with only
what the README leaves to the author (`do_step`, `builder`, ...) filled in, off Kubernetes and in a
pod (the stand-in Lease API)."""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from conftest import LEASE, NAMESPACE, POD
from fake_apiserver import FakeApiServer

README = Path(__file__).resolve().parents[1] / "README.md"


def snippet(heading: str) -> str:
    """The first Python block under the README's `## heading`."""
    text = README.read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, f"no Python block under '## {heading}'"
    return found.group(1)


class RateLimited(Exception):
    pass


def authors_part(steps: list[int]) -> dict[str, Any]:
    """What the 15-line agent leaves to its author: the work, saving and loading it."""
    return {
        "RateLimited": RateLimited,
        "do_step": lambda step: steps.append(step) or "0.001",
        "save": lambda step: f"s3://bucket/run-7/step-{step}",
        "load": lambda ref: int(ref.rsplit("-", 1)[1]),
        "out_of_credits": lambda: False,
    }


def test_the_15_line_agent_runs_off_kubernetes(laptop: Path) -> None:
    steps: list[int] = []
    with pytest.raises(SystemExit) as done:
        exec(snippet("An agent in 15 lines"), authors_part(steps))
    assert done.value.code == 0, "a voluntary shutdown"
    assert steps == list(range(1000))


def test_the_15_line_agent_in_a_pod_resumes_and_reports(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_CHECKPOINT", "s3://bucket/run-7/step-990")
    monkeypatch.setenv("AGENT_PROGRESS", "990")
    steps: list[int] = []
    with pytest.raises(SystemExit) as done:
        exec(snippet("An agent in 15 lines"), authors_part(steps))
    assert done.value.code == 0
    assert steps == list(range(990, 1000)), "resumed from the checkpoint handed over"
    words = json.loads(pod.read_text())
    assert (words["shutdown"], words["reason"]) == ("voluntary", "task done"), words
    assert (words["progress"], words["checkpoint"]) == (1000, "s3://bucket/run-7/step-1000")
    assert words["spend"] == {"cost": "0.001", "tokens": 18000}
    lease = apiserver.lease(NAMESPACE, LEASE)
    assert lease["spec"]["holderIdentity"] == POD
    assert lease["metadata"]["annotations"]["supervisor.dev/progress"] == "1000"


class State(TypedDict):
    notes: Annotated[list[str], operator.add]


def builder_of(crash_in: str | None) -> Any:
    """What the LangGraph snippet leaves to its author: the graph (two nodes)."""
    from langgraph.graph import END, START, StateGraph

    def node(name: str) -> Any:
        def run(state: State) -> dict[str, list[str]]:
            if name == crash_in:
                raise RuntimeError(f"{name}: the search tool timed out")
            return {"notes": [name]}

        return run

    graph = StateGraph(State)
    graph.add_node("plan", node("plan"))
    graph.add_node("research", node("research"))
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "research")
    graph.add_edge("research", END)
    return graph


def test_the_langgraph_snippet_resumes_a_crashed_thread_at_its_node(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The saver's file on the Agent's volume claim: here, the test's directory.
    code = snippet("LangGraph").replace("/data/", f"{tmp_path}/")
    monkeypatch.setenv("AGENT_CHECKPOINT", "")  # a first start
    monkeypatch.setenv("AGENT_PROGRESS", "")
    with pytest.raises(RuntimeError, match="research"):
        exec(code, {"builder": builder_of("research"), "inputs": {"notes": []}})
    words = json.loads(pod.read_text())
    assert words["reason"] == "RuntimeError: research: the search tool timed out", words
    checkpoint = words["checkpoint"]
    assert checkpoint.startswith("run-7/"), words

    # The operator hands the next attempt the checkpoint; it resumes at research.
    monkeypatch.setenv("AGENT_CHECKPOINT", checkpoint)
    monkeypatch.setenv("AGENT_PROGRESS", str(words["progress"]))
    ran: dict[str, Any] = {"builder": builder_of(None), "inputs": {"notes": ["not used"]}}
    exec(code, ran)
    assert "checkpoint_id" in ran["config"]["configurable"], "resumed, not started again"
    state = ran["graph"].get_state({"configurable": {"thread_id": "run-7"}}).values
    assert state["notes"] == ["plan", "research"], "plan ran once, research on resuming"
