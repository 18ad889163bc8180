"""The LangChain callback handler: the tokens of each model call, from its usage metadata, added
to the supervisor's spend and priced when asked, with fake chat models (no network, no key)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult, Generation, LLMResult
from langgraph.graph import END, START, MessagesState, StateGraph

from agent_supervisor import AsyncSupervisor, Supervisor
from agent_supervisor.langchain import (
    AsyncSpendCallbackHandler,
    SpendCallbackHandler,
    Usage,
    spend_handler,
    usage,
)
from conftest import LEASE, NAMESPACE, POD
from fake_apiserver import FakeApiServer

SPEND = "supervisor.dev/spend"


def lease_spend(apiserver: FakeApiServer) -> dict[str, object]:
    """The spend on the Lease, which names the pod that made it."""
    spend = json.loads(apiserver.lease(NAMESPACE, LEASE)["metadata"]["annotations"][SPEND])
    assert spend.pop("pod") == POD, spend
    return dict(spend)


def answers(*tokens: tuple[int, int]) -> Iterator[AIMessage]:
    """Answers whose usage_metadata says (input, output) tokens."""
    for into, out in tokens:
        yield AIMessage(
            content="ok",
            usage_metadata={
                "input_tokens": into,
                "output_tokens": out,
                "total_tokens": into + out,
            },
        )


class ProviderModel(BaseChatModel):
    """A chat model that reports usage only as an OpenAI-style provider does, in llm_output."""

    usage: dict[str, Any]

    @property
    def _llm_type(self) -> str:
        return "provider-fake"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        generation = ChatGeneration(message=AIMessage(content="ok"))
        return ChatResult(generations=[generation], llm_output={"token_usage": self.usage})


def test_each_model_call_adds_its_tokens(pod: Path, apiserver: FakeApiServer) -> None:
    sup = Supervisor.from_env()
    model = GenericFakeChatModel(messages=answers((1000, 200), (500, 100)))
    handler = spend_handler(sup)
    assert isinstance(handler, SpendCallbackHandler)
    model.invoke("hello", config={"callbacks": [handler]})
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"tokens": 1200}
    model.invoke("again", config={"callbacks": [handler]})
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"tokens": 1800}
    assert sup.spend == {"tokens": 1800}


def test_calls_are_priced_per_thousand_tokens_exactly(pod: Path, apiserver: FakeApiServer) -> None:
    sup = Supervisor.from_env()
    handler = spend_handler(sup, input_per_1k="0.003", output_per_1k=Decimal("0.015"))
    model = GenericFakeChatModel(messages=answers((1000, 200), (1, 1)))
    model.invoke("hello", config={"callbacks": [handler]})
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"cost": "0.006", "tokens": 1200}
    model.invoke("one token each way", config={"callbacks": [handler]})
    assert sup.spend["cost"] == Decimal("0.006018")
    assert sup.flush(5)
    assert lease_spend(apiserver) == {"cost": "0.006018", "tokens": 1202}


def test_a_providers_token_usage_is_read_when_messages_say_nothing(
    pod: Path, apiserver: FakeApiServer
) -> None:
    sup = Supervisor.from_env()
    handler = spend_handler(sup, input_per_1k=1, output_per_1k=2)
    model = ProviderModel(usage={"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42})
    model.invoke("hello", config={"callbacks": [handler]})
    assert sup.spend == {"cost": Decimal("0.054"), "tokens": 42}


@pytest.mark.parametrize(
    ("result", "read"),
    [
        (LLMResult(generations=[[Generation(text="x")]]), None),
        (LLMResult(generations=[[]], llm_output={"usage": {"input_tokens": 3}}), Usage(3, 0, 3)),
        (
            LLMResult(generations=[[]], llm_output={"token_usage": {"total_tokens": 9}}),
            Usage(0, 0, 9),
        ),
        (LLMResult(generations=[[]], llm_output={"token_usage": {"total_tokens": -9}}), None),
        (LLMResult(generations=[[]], llm_output={"token_usage": "lots"}), None),
        (
            LLMResult(
                generations=[[ChatGeneration(message=m)] for m in answers((1, 2), (3, 4))],
                llm_output={"token_usage": {"total_tokens": 1000}},  # not counted twice
            ),
            Usage(4, 6, 10),
        ),
    ],
)  # fmt: skip
def test_usage_is_read_from_what_the_call_says(result: LLMResult, read: Usage | None) -> None:
    assert usage(result) == read


def test_a_call_without_usage_is_not_counted_and_said_once(
    pod: Path, apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    sup = Supervisor.from_env()
    handler = spend_handler(sup, input_per_1k="0.01", output_per_1k="0.01")
    silent = LLMResult(generations=[[Generation(text="x")]])
    only_total = LLMResult(generations=[[]], llm_output={"token_usage": {"total_tokens": 9}})
    with caplog.at_level(logging.WARNING, "agent_supervisor"):
        handler.on_llm_end(silent)
        handler.on_llm_end(silent)
    assert caplog.text.count("said no token usage") == 1
    assert apiserver.patches() == []
    handler.on_llm_end(only_total)
    assert sup.spend == {"tokens": 9}, "counted, but not priced: how it splits is unknown"


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        ({"input_per_1k": "0.01"}, "give both"),
        ({"output_per_1k": "0.01"}, "give both"),
        ({"input_per_1k": "-0.01", "output_per_1k": "0.01"}, "input_per_1k '-0.01' must be a"),
        ({"input_per_1k": "0.01", "output_per_1k": "cheap"}, "output_per_1k 'cheap' is not"),
        ({"input_per_1k": "0.01", "output_per_1k": True}, "output_per_1k must be a decimal"),
    ],
)
def test_bad_prices_are_refused_at_once(laptop: Path, prices: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spend_handler(Supervisor.from_env(), **prices)
    with pytest.raises(ValueError, match=message):
        spend_handler(AsyncSupervisor.from_env(), **prices)


def test_a_handler_needs_a_supervisor() -> None:
    with pytest.raises(ValueError, match="needs a Supervisor or AsyncSupervisor"):
        spend_handler(object())  # type: ignore[arg-type]


def test_a_langgraph_graph_reports_spend_without_code_of_its_own(
    pod: Path, apiserver: FakeApiServer
) -> None:
    model = GenericFakeChatModel(messages=answers((100, 10), (200, 20), (300, 30)))

    def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    for node in ("plan", "act", "check"):
        builder.add_node(node, think)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", "check")
    builder.add_edge("check", END)
    graph = builder.compile()
    with Supervisor.from_env(renew_every=60) as sup:
        handler = spend_handler(sup, input_per_1k="0.5", output_per_1k="1.5")
        graph.invoke({"messages": [("user", "go")]}, {"callbacks": [handler]})
        assert sup.spend == {"cost": Decimal("0.39"), "tokens": 660}
    assert lease_spend(apiserver) == {"cost": "0.390", "tokens": 660}


def test_the_async_handler_awaits_the_async_supervisor(pod: Path, apiserver: FakeApiServer) -> None:
    async def agent() -> None:
        async with AsyncSupervisor.from_env(renew_every=60) as sup:
            handler = spend_handler(sup, input_per_1k="0.002", output_per_1k="0.002")
            assert isinstance(handler, AsyncSpendCallbackHandler)
            model = GenericFakeChatModel(messages=answers((250, 250), (500, 0)))
            await asyncio.gather(
                model.ainvoke("a", config={"callbacks": [handler]}),
                model.ainvoke("b", config={"callbacks": [handler]}),
            )
            assert sup.spend == {"cost": Decimal("0.002"), "tokens": 1000}

    asyncio.run(agent())
    assert lease_spend(apiserver) == {"cost": "0.0020", "tokens": 1000}
