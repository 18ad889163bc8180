"""A LangGraph agent that resumes at the node it crashed in, supervised by agent-supervisor.

Its graph, plan -> research -> write -> review, is compiled with a checkpointer that stores every
step in SQLite on the Agent's volume claim and, wrapped by `supervised`, reports each to the
operator as `<thread>/<checkpoint id>`, with LangGraph's step as progress. When an attempt
crashes, the operator hands its last checkpoint to the next attempt (AGENT_CHECKPOINT);
`resume_config` names it, and the graph goes on at the node it crashed in: nodes that had
finished do not run again. A checkpoint that attempts keep crashing from is poisoned, and the one
before it is handed back instead.

The nodes are plain functions (where a node sleeps, a real one would call its model or tools).
To see a crash and a resume, CRASH_IN names a node that raises on the agent's first attempt.
Anywhere outside Kubernetes the SDK does nothing and says so once:

    CHECKPOINT_DB=/tmp/graph.sqlite NODE_SECONDS=0 python agent.py

Settings (environment): CHECKPOINT_DB [/var/lib/agent/checkpoints.sqlite: on the claim];
THREAD_ID, the run's LangGraph thread [report-1]; TOPIC; NODE_SECONDS a node takes [2];
CRASH_IN, a node that crashes on the first attempt [none].
"""

from __future__ import annotations

import itertools
import logging
import operator
import os
import sqlite3
import time
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agent_supervisor import Supervisor
from agent_supervisor.langgraph import resume_config, supervised

log = logging.getLogger("langgraph-agent")

NODES = ("plan", "research", "write", "review")


class State(TypedDict, total=False):
    """The graph's state: what it is about, what each node noted, and the result."""

    topic: str
    notes: Annotated[list[str], operator.add]
    report: str


def build(crash_in: str | None = None, seconds: float = 0) -> StateGraph[State]:
    """The graph, its nodes in a line; the node `crash_in` raises, as a flaky tool would."""

    def node(name: str) -> Any:
        def run(state: State) -> State:
            log.info("node %s: running", name)
            time.sleep(seconds)
            if name == crash_in:
                raise RuntimeError(f"{name}: the search tool timed out")
            update: State = {"notes": [f"{name}: done"]}
            if name == "write":
                update["report"] = f"A report on {state['topic']}, from {len(state['notes'])} notes"
            return update

        return run

    builder = StateGraph(State)
    for name in NODES:
        builder.add_node(name, node(name))
    for before, after in itertools.pairwise((START, *NODES, END)):
        builder.add_edge(before, after)
    return builder


def main() -> None:
    """Runs the graph's thread to its end under the operator (or none, off Kubernetes)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    db = os.environ.get("CHECKPOINT_DB", "/var/lib/agent/checkpoints.sqlite")
    thread = os.environ.get("THREAD_ID", "report-1")
    with Supervisor.from_env() as sup:  # renews the heartbeat Lease in the background
        crash_in = os.environ.get("CRASH_IN") if sup.restart_count == 0 else None
        seconds = float(os.environ.get("NODE_SECONDS", "2"))
        conn = sqlite3.connect(db, check_same_thread=False)  # kept on the Agent's volume claim
        graph = build(crash_in, seconds).compile(checkpointer=supervised(SqliteSaver(conn), sup))
        config = resume_config(sup, thread_id=thread)
        if "checkpoint_id" in config["configurable"]:
            pending = graph.get_state(config).next
            log.info(
                "resuming thread %s from checkpoint %s, at node %s",
                thread,
                sup.checkpoint,
                ", ".join(pending) or "(none: it had ended)",
            )
            inputs: State | None = None
        else:
            log.info("starting thread %s", thread)
            inputs = {"topic": os.environ.get("TOPIC", "supervised agents"), "notes": []}
        result = graph.invoke(inputs, config)
        log.info("%s", result.get("report"))
        sup.shutdown("voluntary", "report written")


if __name__ == "__main__":
    main()
