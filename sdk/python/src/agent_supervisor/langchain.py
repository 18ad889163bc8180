"""LangChain: a callback handler that adds the tokens of each model call to the attempt's spend,
priced if you say how. Needs `langchain-core` (the `langchain` or `langgraph` extra).

```python
from agent_supervisor.langchain import spend_handler

handler = spend_handler(sup, input_per_1k="0.003", output_per_1k="0.015")  # prices optional
graph.invoke(inputs, {"callbacks": [handler], "configurable": {...}})  # every model call counted
```

Give it once (in the config of the run, or to the model), not both: each call it sees is added.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NamedTuple

try:
    from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
    from langchain_core.outputs import LLMResult
except ImportError as missing:
    raise ImportError(
        f"agent_supervisor.langchain needs LangChain ({missing}): "
        "pip install 'agent-supervisor[langchain]'"
    ) from missing

from . import _core
from ._async import AsyncSupervisor
from ._sync import Supervisor

log = logging.getLogger("agent_supervisor")

__all__ = ["AsyncSpendCallbackHandler", "SpendCallbackHandler", "Usage", "spend_handler", "usage"]


class Usage(NamedTuple):
    """The tokens of one model call: into it, out of it, and in all."""

    input: int
    output: int
    total: int


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _read(counts: Mapping[str, Any], inputs: str, outputs: str) -> Usage | None:
    """A `Usage` from a mapping of counts named `inputs` and `outputs` (and `total_tokens`)."""
    into, out = _count(counts.get(inputs)), _count(counts.get(outputs))
    total = _count(counts.get("total_tokens"))
    if into is None and out is None and total is None:
        return None
    into, out = into or 0, out or 0
    return Usage(into, out, total if total is not None else into + out)


def usage(response: LLMResult) -> Usage | None:
    """The tokens a model call used, from its messages' `usage_metadata` (LangChain's standard
    field) or else from `llm_output["token_usage"]` / `["usage"]` (as providers name them);
    `None` if it says nothing."""
    found: list[Usage] = []
    for generations in response.generations:
        for generation in generations:
            metadata = getattr(getattr(generation, "message", None), "usage_metadata", None)
            if isinstance(metadata, Mapping):
                read = _read(metadata, "input_tokens", "output_tokens")
                if read is not None:
                    found.append(read)
    if found:
        return Usage(*(sum(u[i] for u in found) for i in range(3)))
    output = response.llm_output if isinstance(response.llm_output, Mapping) else {}
    for key in ("token_usage", "usage"):
        counts = output.get(key)
        if isinstance(counts, Mapping):
            read = _read(counts, "prompt_tokens", "completion_tokens") or _read(
                counts, "input_tokens", "output_tokens"
            )
            if read is not None:
                return read
    return None


class _Counter:
    """What both handlers do: read a call's usage and turn it into an amount to add."""

    def __init__(self, input_per_1k: Any, output_per_1k: Any) -> None:
        if (input_per_1k is None) != (output_per_1k is None):
            raise ValueError("give both input_per_1k and output_per_1k (a price of 0 is fine)")
        self._prices: tuple[Decimal, Decimal] | None = None
        if input_per_1k is not None:
            self._prices = (
                _core.check_price(input_per_1k, "input_per_1k"),
                _core.check_price(output_per_1k, "output_per_1k"),
            )
        self._unsaid = True

    def _amount(self, response: LLMResult) -> dict[str, Any] | None:
        used = usage(response)
        if used is None:
            self._once("a model call said no token usage: not counted (does the model report it?)")
            return None
        amount: dict[str, Any] = {"tokens": used.total}
        if self._prices is not None:
            if used.input + used.output == 0 and used.total:
                self._once("a model call gave only its total tokens: counted, not priced")
                return amount
            into, out = self._prices
            amount["cost"] = _core.price(used.input, into) + _core.price(used.output, out)
        return amount

    def _once(self, text: str) -> None:
        if self._unsaid:
            self._unsaid = False
            log.warning(text)


class SpendCallbackHandler(BaseCallbackHandler, _Counter):
    """Adds the tokens of each model call it sees (and their price, when given: a cost per
    1,000 input and output tokens) to the spend of a `Supervisor` (`add_spend`): reported at
    once, one Lease write a call."""

    def __init__(
        self, sup: Supervisor, *, input_per_1k: Any = None, output_per_1k: Any = None
    ) -> None:
        _Counter.__init__(self, input_per_1k, output_per_1k)
        self._sup = sup

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        """A model call ended: its usage is added to the spend."""
        amount = self._amount(response)
        if amount is not None:
            self._sup.add_spend(**amount)


class AsyncSpendCallbackHandler(AsyncCallbackHandler, _Counter):
    """`SpendCallbackHandler` for an `AsyncSupervisor` (`await add_spend`)."""

    def __init__(
        self, sup: AsyncSupervisor, *, input_per_1k: Any = None, output_per_1k: Any = None
    ) -> None:
        _Counter.__init__(self, input_per_1k, output_per_1k)
        self._sup = sup

    async def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        """A model call ended: its usage is added to the spend."""
        amount = self._amount(response)
        if amount is not None:
            await self._sup.add_spend(**amount)


def spend_handler(
    sup: Supervisor | AsyncSupervisor, *, input_per_1k: Any = None, output_per_1k: Any = None
) -> SpendCallbackHandler | AsyncSpendCallbackHandler:
    """The handler for `sup`: `SpendCallbackHandler` for a `Supervisor`,
    `AsyncSpendCallbackHandler` for an `AsyncSupervisor`. `input_per_1k`, `output_per_1k`: what
    1,000 tokens into and out of the model cost (both, or neither: tokens only). Raises
    `ValueError` for a negative or unparsable price."""
    if isinstance(sup, AsyncSupervisor):
        return AsyncSpendCallbackHandler(
            sup, input_per_1k=input_per_1k, output_per_1k=output_per_1k
        )
    if isinstance(sup, Supervisor):
        return SpendCallbackHandler(sup, input_per_1k=input_per_1k, output_per_1k=output_per_1k)
    raise ValueError(f"spend_handler needs a Supervisor or AsyncSupervisor, not {sup!r}")
