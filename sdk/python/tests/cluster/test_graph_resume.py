"""LangGraph under the operator: a graph that crashes in a middle node resumes there from the
checkpoint the operator hands back and runs no finished node twice; a checkpoint that keeps
crashing is poisoned, and the next attempt resumes from the one before it."""

from __future__ import annotations

import re

from harness import Run, TestNamespace, wait_for

AGENT = "grapher"
NODES = ["plan", "fetch", "write", "publish"]
PROGRESS = "supervisor.dev/progress"
CHECKPOINT = "supervisor.dev/checkpoint"


class Graph:
    """The graph agent of one test: its database and log, which outlive its processes."""

    def __init__(self, ns: TestNamespace, crash_attempts: str) -> None:
        self.ns = ns
        self.db = ns.scratch / "graph.sqlite"
        self.log = ns.scratch / "graph.log"
        self.holds = ns.scratch / "holds"
        self.holds.mkdir()
        self.crash_attempts = crash_attempts
        self.pods: list[str] = []

    def start(self) -> Run:
        """The next attempt's process, on its pod."""
        pod = self.ns.wait_new_pod(AGENT, self.pods).metadata.name
        self.pods.append(pod)
        return self.ns.agent_program(
            pod, "graph_agent", "--db", self.db, "--log", self.log, "--crash-in", "write",
            "--crash-attempts", self.crash_attempts, "--hold-attempts", "0",
            "--hold-dir", self.holds,
        )  # fmt: skip

    def lines(self, attempt: int | None = None) -> list[str]:
        """The log's lines (of one attempt, without its number)."""
        text = self.log.read_text() if self.log.exists() else ""
        lines = text.splitlines()
        if attempt is None:
            return lines
        prefix = f"{attempt} "
        return [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]

    def first_attempt(self) -> dict[str, str]:
        """Runs attempt 0, holding each node until the operator has recorded the checkpoint
        before it (LangGraph saves checkpoints in the background, the operator records what it
        sees: held, none is missed); it crashes in `write`. The checkpoint before each node."""
        run = self.start()
        before = {}
        for node in ["plan", "fetch", "write"]:
            line = wait_for(f"{node} to start", lambda n=node: run.running() and self.started(0, n))
            step = int(line.rsplit("step=", 1)[1])
            ref = wait_for(
                f"the checkpoint of step {step - 1} on the Lease",
                lambda s=step: run.running() and self.reported(s - 1),
            )
            self.ns.wait_status(AGENT, f"checkpoint {ref} recorded", lambda s, r=ref: r in refs(s))
            before[node] = ref
            (self.holds / f"0-{node}").touch()
        assert run.wait() != 0, run.text()
        assert self.lines(0)[-1] == "crash write"
        return before

    def next_attempt(self) -> int:
        """Runs the next attempt to its end; its exit code."""
        run = self.start()
        return run.wait()

    def started(self, attempt: int, node: str) -> str | None:
        for line in self.lines(attempt):
            if line.startswith(f"start {node} "):
                return line
        return None

    def reported(self, step: int) -> str | None:
        """The checkpoint on the Lease, once it is the one of `step`."""
        lease = self.ns.lease(AGENT)
        annotations = (lease.metadata.annotations if lease else None) or {}
        return annotations.get(CHECKPOINT) if annotations.get(PROGRESS) == str(step) else None


def refs(status: dict) -> list[str]:
    return [c["ref"] for c in status.get("checkpoints") or []]


def setup(ns: TestNamespace, max_failures: int) -> None:
    ns.create_policy(
        "quick", {"backoff": {"type": "Immediate"}, "checkpoints": {"maxFailures": max_failures}}
    )
    ns.create_agent(AGENT, {"heartbeat": {"timeout": "10s"}, "restartPolicyRef": {"name": "quick"}})


def done(graph: Graph) -> list[str]:
    return [m.group(1) for line in graph.lines() if (m := re.fullmatch(r"\d+ done (\w+)", line))]


def test_a_crashed_graph_resumes_at_the_node_it_crashed_in(ns: TestNamespace) -> None:
    setup(ns, max_failures=3)
    graph = Graph(ns, crash_attempts="0")
    before = graph.first_attempt()
    assert graph.next_attempt() == 0, "the graph is done: a voluntary shutdown"

    assert graph.lines(1)[0] == f"resume {before['write']}", "handed the checkpoint after fetch"
    assert graph.lines(1)[1].startswith("start write "), "resumed in the node that crashed"
    assert done(graph) == NODES, "every node finished once, in order"
    status = ns.wait_status(
        AGENT,
        "the voluntary shutdown",
        lambda s: (s.get("shutdown") or {}).get("type") == "Voluntary",
    )
    assert status["restartCount"] == 1
    assert status["restartHistory"][0]["reason"] == "Error"
    assert not any(c.get("poisoned") for c in status["checkpoints"])


def test_a_poisoned_checkpoint_makes_the_next_attempt_resume_from_the_one_before(
    ns: TestNamespace,
) -> None:
    setup(ns, max_failures=2)
    # Attempts 1 and 2 resume from the checkpoint after fetch and crash in write again.
    graph = Graph(ns, crash_attempts="0,1,2")
    before = graph.first_attempt()
    poisoned, previous = before["write"], before["fetch"]
    for attempt in (1, 2):
        assert graph.next_attempt() != 0
        lines = graph.lines(attempt)
        assert lines[0] == f"resume {poisoned}", lines
        assert lines[1].startswith("start write "), lines
        assert lines[2:] == ["crash write"], lines
    status = ns.wait_status(
        AGENT,
        f"{poisoned} poisoned",
        lambda s: any(c.get("poisoned") for c in s.get("checkpoints") or []),
    )
    order = refs(status)
    assert [c["ref"] for c in status["checkpoints"] if c.get("poisoned")] == [poisoned]
    assert order[order.index(poisoned) + 1] == previous, "the one before is the one after plan"

    assert graph.next_attempt() == 0, "the graph is done: a voluntary shutdown"
    assert graph.lines(3)[0] == f"resume {previous}", "handed the checkpoint before the poisoned"
    assert graph.lines(3)[1].startswith("start fetch "), "resumed after plan"
    assert done(graph) == ["plan", "fetch", "fetch", "write", "publish"], "plan ran once"
    assert any(reason == "CheckpointPoisoned" for reason, _ in ns.events(AGENT))
