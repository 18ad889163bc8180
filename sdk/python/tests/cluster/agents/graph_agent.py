"""A LangGraph agent: plan -> fetch -> write -> publish, plain functions (no model) over a SQLite
saver in a file that outlives the process, supervised, resumed from the checkpoint the operator
hands back. It shuts down voluntarily when the graph is done.

Each node appends to `--log`: `<attempt> start <node> step=<LangGraph step>`, then `<attempt>
done <node>` or `<attempt> crash <node>`; each attempt first writes `<attempt> resume <the
handed checkpoint, or ->`. `--crash-in NODE --crash-attempts 0,1` makes NODE raise on those
attempts (restart counts); `--hold-attempts 0 --hold-dir DIR` makes each node of those attempts
wait, once started, for the file `DIR/<attempt>-<node>` (the test makes it once the operator
recorded the checkpoint before the node).
"""

from __future__ import annotations

import argparse
import itertools
import operator
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agent_supervisor import Supervisor
from agent_supervisor.langgraph import resume_config, supervised

NODES = ("plan", "fetch", "write", "publish")
THREAD = "run-7"
#: How long a held node waits for the test before it gives up (and crashes).
HOLD_LIMIT = 120.0


class State(TypedDict):
    done: Annotated[list[str], operator.add]


class Crash(RuntimeError):
    pass


def numbers(text: str) -> set[int]:
    return {int(n) for n in text.split(",") if n}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--crash-in", choices=NODES)
    parser.add_argument("--crash-attempts", type=numbers, default=set())
    parser.add_argument("--hold-attempts", type=numbers, default=set())
    parser.add_argument("--hold-dir", type=Path)
    args = parser.parse_args()

    def note(line: str) -> None:
        with args.log.open("a") as f:
            f.write(line + "\n")

    with Supervisor.from_env() as sup:
        attempt = sup.restart_count
        note(f"{attempt} resume {sup.checkpoint or '-'}")

        def node(name: str) -> Any:
            def run(state: State, config: RunnableConfig) -> dict[str, list[str]]:
                note(f"{attempt} start {name} step={config['metadata']['langgraph_step']}")
                if attempt in args.hold_attempts:
                    hold = args.hold_dir / f"{attempt}-{name}"
                    deadline = time.monotonic() + HOLD_LIMIT
                    while not hold.exists():
                        if time.monotonic() > deadline:
                            raise Crash(f"{hold} never came")
                        time.sleep(0.05)
                if name == args.crash_in and attempt in args.crash_attempts:
                    note(f"{attempt} crash {name}")
                    raise Crash(f"{name} crashed on attempt {attempt}")
                note(f"{attempt} done {name}")
                return {"done": [name]}

            return run

        builder = StateGraph(State)
        for name in NODES:
            builder.add_node(name, node(name))
        builder.add_edge(START, NODES[0])
        for a, b in itertools.pairwise(NODES):
            builder.add_edge(a, b)
        builder.add_edge(NODES[-1], END)

        with SqliteSaver.from_conn_string(str(args.db)) as saver:
            graph = builder.compile(checkpointer=supervised(saver, sup))
            config = resume_config(sup, thread_id=THREAD)
            resuming = "checkpoint_id" in config["configurable"]
            graph.invoke(None if resuming else {"done": []}, config)
        sup.shutdown("voluntary", "graph done")


if __name__ == "__main__":
    main()
