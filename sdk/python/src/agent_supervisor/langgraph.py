"""LangGraph: a graph that reports its checkpoints to the operator and resumes from the one handed
back. Needs the `langgraph` extra: `pip install 'agent-supervisor[langgraph]'`.

```python
from agent_supervisor.langgraph import supervised, resume_config

graph = builder.compile(checkpointer=supervised(SqliteSaver(conn), sup))
config = resume_config(sup, thread_id="run-7")
graph.invoke(None if "checkpoint_id" in config["configurable"] else inputs, config)
```

The saver must outlive the pod (SQLite on the Agent's volume claim, or a database): the
checkpoint the operator hands back is only a name for state the saver keeps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint
except ImportError as missing:
    raise ImportError(
        f"agent_supervisor.langgraph needs LangGraph ({missing}): "
        "pip install 'agent-supervisor[langgraph]'"
    ) from missing

from . import _core
from ._async import AsyncSupervisor
from ._sync import Supervisor

log = logging.getLogger("agent_supervisor")

__all__ = ["SupervisedSaver", "resume_config", "supervised"]


def _reference(config: RunnableConfig) -> str | None:
    """`<thread_id>/<checkpoint_id>` for a checkpoint of a root graph (a subgraph's own
    checkpoints are not where a run resumes), if it makes a checkpoint reference."""
    configurable = config.get("configurable") or {}
    thread, checkpoint = configurable.get("thread_id"), configurable.get("checkpoint_id")
    if configurable.get("checkpoint_ns") or thread is None or not checkpoint:
        return None
    try:
        return _core.check_checkpoint(f"{thread}/{checkpoint}")
    except ValueError as error:  # a thread id of 1 KiB, or with a line break: the graph goes on
        log.warning("LangGraph checkpoint not reported: %s", error)
        return None


def _forked(metadata: Any) -> bool:
    """Whether LangGraph stored this checkpoint as a copy of the one a run resumes at: invoked
    at a `checkpoint_id`, it copies that checkpoint (one step on, the same state) and runs from
    the copy."""
    return isinstance(metadata, dict) and metadata.get("source") == "fork"


def _step(metadata: Any) -> int | None:
    step = metadata.get("step") if isinstance(metadata, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


class SupervisedSaver(BaseCheckpointSaver[Any]):
    """A checkpoint saver that, after each checkpoint the wrapped saver stored, reports it to the
    operator as `<thread_id>/<checkpoint_id>`, with LangGraph's step as progress when it grew.
    The copy LangGraph makes of the checkpoint a run resumes at is not reported: it is the
    checkpoint the operator handed back.

    Everything else is the wrapped saver's. Make one with `supervised(saver, sup)`.
    """

    def __init__(self, saver: BaseCheckpointSaver[Any], sup: Supervisor | AsyncSupervisor) -> None:
        # BaseCheckpointSaver.__init__ is not called: the serializer is the wrapped saver's.
        self.saver = saver
        self.supervisor = sup

    @property
    def serde(self) -> Any:
        """The wrapped saver's serializer."""
        return self.saver.serde

    @serde.setter
    def serde(self, value: Any) -> None:
        self.saver.serde = value

    @property
    def config_specs(self) -> list[Any]:
        """The wrapped saver's configuration options."""
        return self.saver.config_specs

    def __getattr__(self, name: str) -> Any:
        # What only the wrapped saver has (a connection, `setup()`, ...).
        if name in ("saver", "supervisor"):
            raise AttributeError(name)
        return getattr(self.saver, name)

    def _report(self, config: RunnableConfig, metadata: Any) -> dict[str, Any] | None:
        if _forked(metadata):
            # The checkpoint the attempt resumed from, again: not news. Reported, it would tell
            # the operator that the attempt got past its checkpoint before any node ran (one
            # that crashes every attempt would never be poisoned: each would resume from the
            # copy before) and its step as progress. What runs from it is reported as it ends.
            return None
        reference = _reference(config)
        if reference is None:
            return None
        report: dict[str, Any] = {"checkpoint": reference}
        step = _step(metadata)
        if step is not None and self.supervisor._growing(step):
            report["progress"] = step
        return report

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: Any,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores the checkpoint with the wrapped saver, then reports it."""
        stored = self.saver.put(config, checkpoint, metadata, new_versions)
        report = self._report(stored, metadata)
        if report is not None:
            sup = self.supervisor
            if isinstance(sup, AsyncSupervisor):
                raise TypeError(
                    "a graph run with invoke()/stream() stores checkpoints with put(), which "
                    "cannot await an AsyncSupervisor: run it with ainvoke()/astream(), or pass "
                    "a Supervisor to supervised()"
                )
            sup.report(**report)
        return stored

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: Any,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores the checkpoint with the wrapped saver, then reports it."""
        stored = await self.saver.aput(config, checkpoint, metadata, new_versions)
        report = self._report(stored, metadata)
        if report is not None:
            sup = self.supervisor
            if isinstance(sup, AsyncSupervisor):
                await sup.report(**report)
            else:
                sup.report(**report)  # returns at once: the supervisor's thread writes it
        return stored

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> SupervisedSaver:
        """The wrapped saver's `with_allowlist`, still supervised."""
        inner = self.saver.with_allowlist(extra_allowlist)
        return self if inner is self.saver else SupervisedSaver(inner, self.supervisor)


def _forward(name: str) -> Callable[..., Any]:
    def forward(self: SupervisedSaver, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.saver, name)(*args, **kwargs)

    forward.__name__ = name
    forward.__doc__ = f"The wrapped saver's `{name}`."
    return forward


# Every other method a saver has (get_tuple, list, put_writes, their async twins, get_next_version,
# delete_thread, and whatever later LangGraph versions add) is the wrapped saver's own.
for _name, _value in list(vars(BaseCheckpointSaver).items()):
    if not _name.startswith("_") and callable(_value) and _name not in vars(SupervisedSaver):
        setattr(SupervisedSaver, _name, _forward(_name))


def supervised(
    saver: BaseCheckpointSaver[Any], sup: Supervisor | AsyncSupervisor
) -> SupervisedSaver:
    """Wraps `saver` (any LangGraph `BaseCheckpointSaver`) so that each checkpoint it stores is
    reported to the operator through `sup`, with LangGraph's step as progress.

    With a `Supervisor` the graph may run sync or async; with an `AsyncSupervisor`, async only.
    """
    if not isinstance(saver, BaseCheckpointSaver):
        raise ValueError(f"supervised() wraps a LangGraph BaseCheckpointSaver, not {saver!r}")
    if isinstance(saver, SupervisedSaver):
        saver = saver.saver
    return SupervisedSaver(saver, sup)


def resume_config(sup: Supervisor | AsyncSupervisor, thread_id: str) -> RunnableConfig:
    """The config to run thread `thread_id` with: at the checkpoint the operator handed this
    attempt (`sup.checkpoint`) when that is one of this thread's.

    Returns `{"configurable": {"thread_id": ..., "checkpoint_id": ...}}` to resume (invoke the
    graph with `None` as its input), or `{"configurable": {"thread_id": ...}}` when the operator
    handed nothing of this thread's: a first start, or every checkpoint poisoned. Then invoke
    the graph with its inputs; LangGraph starts a new run on the thread, over its saved state.
    """
    if not isinstance(thread_id, str) or not thread_id:
        raise ValueError(f"thread_id must be a non-empty str, not {thread_id!r}")
    configurable: dict[str, Any] = {"thread_id": thread_id}
    thread, _, checkpoint = (sup.checkpoint or "").rpartition("/")
    if thread == thread_id and checkpoint:
        configurable["checkpoint_id"] = checkpoint
    return {"configurable": configurable}
