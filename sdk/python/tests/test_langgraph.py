"""LangGraph: a graph that crashes in its middle node resumes there from the checkpoint it reported,
and runs no finished node twice."""

from __future__ import annotations

import asyncio
import itertools
import operator
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agent_supervisor import AsyncSupervisor, Supervisor
from agent_supervisor.langgraph import SupervisedSaver, resume_config, supervised
from conftest import LEASE, NAMESPACE
from fake_apiserver import FakeApiServer

CHECKPOINT = "supervisor.dev/checkpoint"
PROGRESS = "supervisor.dev/progress"
THREAD = "run-7"


class State(TypedDict):
    log: Annotated[list[str], operator.add]


class Flaky(RuntimeError):
    pass


def build(ran: Counter[str], fail_in: set[str]) -> StateGraph[State]:
    """plan -> fetch -> write -> publish; `fetch` raises while it is in `fail_in`."""

    def node(name: str) -> Any:
        def run(state: State) -> dict[str, list[str]]:
            ran[name] += 1
            if name in fail_in:
                fail_in.discard(name)
                raise Flaky(f"{name} failed")
            return {"log": [name]}

        return run

    builder = StateGraph(State)
    names = ["plan", "fetch", "write", "publish"]
    for name in names:
        builder.add_node(name, node(name))
    builder.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    return builder


def new_attempt(monkeypatch: pytest.MonkeyPatch, apiserver: FakeApiServer) -> None:
    """What the operator hands the next attempt: the checkpoint and progress it was told."""
    reported = apiserver.lease(NAMESPACE, LEASE)["metadata"].get("annotations", {})
    monkeypatch.setenv("AGENT_CHECKPOINT", reported.get(CHECKPOINT, ""))
    monkeypatch.setenv("AGENT_PROGRESS", reported.get(PROGRESS, ""))


def fresh_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_CHECKPOINT", "")
    monkeypatch.setenv("AGENT_PROGRESS", "")


def run_twice(
    pod: Path,
    apiserver: FakeApiServer,
    monkeypatch: pytest.MonkeyPatch,
    saver: Any,
) -> Counter[str]:
    """The first attempt crashes in `fetch`; the second resumes from what the first reported."""
    fresh_agent(monkeypatch)
    ran: Counter[str] = Counter()
    fail_in = {"fetch"}
    with Supervisor.from_env(renew_every=60) as sup:
        graph = build(ran, fail_in).compile(checkpointer=supervised(saver(), sup))
        config = resume_config(sup, THREAD)
        assert "checkpoint_id" not in config["configurable"]
        with pytest.raises(Flaky):
            graph.invoke({"log": []}, config)
    reported = apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"]
    thread, _, checkpoint_id = reported[CHECKPOINT].rpartition("/")
    assert thread == THREAD
    assert int(reported[PROGRESS]) == 1, "steps: -1 input, 0 start, 1 after plan"

    new_attempt(monkeypatch, apiserver)
    with Supervisor.from_env(renew_every=60) as sup:
        graph = build(ran, fail_in).compile(checkpointer=supervised(saver(), sup))
        config = resume_config(sup, THREAD)
        assert config == {"configurable": {"thread_id": THREAD, "checkpoint_id": checkpoint_id}}
        result = graph.invoke(None if "checkpoint_id" in config["configurable"] else {}, config)
    assert result == {"log": ["plan", "fetch", "write", "publish"]}
    reported = apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"]
    # Resuming at a named checkpoint, LangGraph forks it (one more step) and goes on from there.
    assert int(reported[PROGRESS]) > 1
    assert reported[CHECKPOINT].startswith(f"{THREAD}/")
    assert reported[CHECKPOINT] != f"{THREAD}/{checkpoint_id}"
    return ran


def test_a_crashed_graph_resumes_at_its_node_in_memory(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = InMemorySaver()  # kept by the test across "attempts", as a database would be
    ran = run_twice(pod, apiserver, monkeypatch, lambda: memory)
    assert ran == Counter(plan=1, fetch=2, write=1, publish=1)


def test_a_crashed_graph_resumes_at_its_node_from_sqlite(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "checkpoints.sqlite"  # on the Agent's volume claim, in a pod

    def saver() -> SqliteSaver:  # each attempt opens it anew
        return SqliteSaver(sqlite3.connect(db, check_same_thread=False))

    ran = run_twice(pod, apiserver, monkeypatch, saver)
    assert ran == Counter(plan=1, fetch=2, write=1, publish=1)


def test_a_resume_that_crashes_again_reports_nothing_new(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph copies the checkpoint it resumes at ("fork") before it runs from it. Were the
    copy reported, every attempt that crashes again would seem to get past its checkpoint: it
    would never be poisoned, and each next attempt would resume from a copy of a copy."""
    fresh_agent(monkeypatch)
    memory = InMemorySaver()
    ran: Counter[str] = Counter()
    with Supervisor.from_env(renew_every=60) as sup:
        graph = build(ran, {"fetch"}).compile(checkpointer=supervised(memory, sup))
        with pytest.raises(Flaky):
            graph.invoke({"log": []}, resume_config(sup, THREAD))
    handed = dict(apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"])
    for _ in range(2):
        new_attempt(monkeypatch, apiserver)
        with Supervisor.from_env(renew_every=60) as sup:
            graph = build(ran, {"fetch"}).compile(checkpointer=supervised(memory, sup))
            config = resume_config(sup, THREAD)
            assert f"{THREAD}/{config['configurable']['checkpoint_id']}" == handed[CHECKPOINT]
            with pytest.raises(Flaky):
                graph.invoke(None, config)
        reported = apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"]
        assert reported[CHECKPOINT] == handed[CHECKPOINT], "the same checkpoint: no news"
        assert reported[PROGRESS] == handed[PROGRESS], "no node ended: no progress"
    forks = [c for c in memory.list(None) if c.metadata and c.metadata.get("source") == "fork"]
    assert len(forks) == 2, "LangGraph did copy it, each time"
    assert ran == Counter(plan=1, fetch=3)


def test_the_async_twin_resumes_too(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_agent(monkeypatch)
    memory = InMemorySaver()
    ran: Counter[str] = Counter()
    fail_in = {"fetch"}

    async def attempt() -> dict[str, Any]:
        async with AsyncSupervisor.from_env(renew_every=60) as sup:
            graph = build(ran, fail_in).compile(checkpointer=supervised(memory, sup))
            config = resume_config(sup, THREAD)
            inputs = None if "checkpoint_id" in config["configurable"] else {"log": []}
            return await graph.ainvoke(inputs, config)

    with pytest.raises(Flaky):
        asyncio.run(attempt())
    new_attempt(monkeypatch, apiserver)
    assert asyncio.run(attempt()) == {"log": ["plan", "fetch", "write", "publish"]}
    assert ran == Counter(plan=1, fetch=2, write=1, publish=1)


def test_a_sync_supervisor_serves_an_async_graph(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_agent(monkeypatch)
    with Supervisor.from_env(renew_every=60) as sup:
        graph = build(Counter(), set()).compile(checkpointer=supervised(InMemorySaver(), sup))
        asyncio.run(graph.ainvoke({"log": []}, resume_config(sup, THREAD)))
    reported = apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"]
    assert reported[PROGRESS] == "4"


def test_progress_is_reported_only_when_it_grew(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_CHECKPOINT", "other-thread/abc")  # from another run: not resumed
    monkeypatch.setenv("AGENT_PROGRESS", "10")
    with Supervisor.from_env(renew_every=60) as sup:
        graph = build(Counter(), set()).compile(checkpointer=supervised(InMemorySaver(), sup))
        config = resume_config(sup, THREAD)
        assert config == {"configurable": {"thread_id": THREAD}}
        graph.invoke({"log": []}, config)
    reported = apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"]
    assert PROGRESS not in reported
    assert reported[CHECKPOINT].startswith(f"{THREAD}/")


def test_resume_config_names_only_this_threads_checkpoint(
    laptop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def config_for(handed: str, thread: str) -> dict[str, Any]:
        monkeypatch.setenv("AGENT_CHECKPOINT", handed)
        return dict(resume_config(Supervisor.from_env(), thread)["configurable"])

    assert config_for("run-7/1ef", "run-7") == {"thread_id": "run-7", "checkpoint_id": "1ef"}
    assert config_for("team/run-7/1ef", "team/run-7") == {
        "thread_id": "team/run-7",
        "checkpoint_id": "1ef",
    }
    assert config_for("run-8/1ef", "run-7") == {"thread_id": "run-7"}
    assert config_for("run-7/", "run-7") == {"thread_id": "run-7"}
    assert config_for("s3://bucket/x", "run-7") == {"thread_id": "run-7"}
    assert config_for("", "run-7") == {"thread_id": "run-7"}
    with pytest.raises(ValueError, match="thread_id"):
        resume_config(Supervisor.from_env(), "")


def test_everything_else_is_the_wrapped_savers(tmp_path: Path, laptop: Path) -> None:
    conn = sqlite3.connect(tmp_path / "c.sqlite", check_same_thread=False)
    inner = SqliteSaver(conn)
    saver = supervised(inner, Supervisor.from_env())
    assert isinstance(saver, SupervisedSaver)
    assert saver.conn is conn, "attributes only the saver has"
    assert saver.serde is inner.serde
    # SqliteSaver's own versions (strings), not the base class's integers.
    assert saver.get_next_version(None, None).startswith("00000000000000000000000000000001.")
    assert supervised(saver, Supervisor.from_env()).saver is inner, "never wrapped twice"
    graph = build(Counter(), set()).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": THREAD}}
    graph.invoke({"log": []}, config)
    assert saver.get_tuple(config) == inner.get_tuple(config)
    assert [t.config for t in saver.list(config)] == [t.config for t in inner.list(config)]
    saver.delete_thread(THREAD)
    assert inner.get_tuple(config) is None
    with pytest.raises(ValueError, match="BaseCheckpointSaver"):
        supervised(object(), Supervisor.from_env())  # type: ignore[arg-type]


def test_a_sync_graph_cannot_await_an_async_supervisor(laptop: Path) -> None:
    saver = supervised(InMemorySaver(), AsyncSupervisor.from_env())
    graph = build(Counter(), set()).compile(checkpointer=saver)
    with pytest.raises(TypeError, match="ainvoke"):
        graph.invoke({"log": []}, {"configurable": {"thread_id": THREAD}})


def test_a_thread_id_that_makes_no_reference_is_not_reported(
    pod: Path, apiserver: FakeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_agent(monkeypatch)
    with Supervisor.from_env(renew_every=60) as sup:
        graph = build(Counter(), set()).compile(checkpointer=supervised(InMemorySaver(), sup))
        result = graph.invoke({"log": []}, {"configurable": {"thread_id": "x" * 1100}})
    assert result == {"log": ["plan", "fetch", "write", "publish"]}, "the graph goes on"
    reported = apiserver.lease(NAMESPACE, LEASE)["metadata"].get("annotations", {})
    assert CHECKPOINT not in reported
