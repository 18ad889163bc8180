"""Spend reported by the SDK as the operator counts it: a crash's spend in its last words, the
next attempt's on its Lease, and a budget that stops the agent when they reach it."""

from __future__ import annotations

import json

from harness import TestNamespace, wait_for

HEARTBEAT = {"timeout": "30s"}
#: Restarts at once and without limit: only the budget stops this agent.
POLICY = {
    "backoff": {"type": "Immediate"},
    "circuitBreaker": {"failureThreshold": 0},
    "limits": {"maxRestarts": 0},
    "budget": {"maxCost": "1.00"},
}


def cost(status: dict) -> str | None:
    return (status.get("spend") or {}).get("cost")


def test_a_budget_stops_an_sdk_agent_when_its_reported_spend_reaches_it(
    ns: TestNamespace,
) -> None:
    ns.create_policy("budget", POLICY)
    ns.create_agent("spender", {"heartbeat": HEARTBEAT, "restartPolicyRef": {"name": "budget"}})

    # Attempt 1: four calls of 0.15 (add_spend), then a crash: its spend is in its last words.
    first = ns.wait_new_pod("spender").metadata.name
    run = ns.agent_program(
        first, "spend_agent", "--calls", "4", "--cost", "0.15", "--tokens", "100",
        "--then", "crash",
    )  # fmt: skip
    assert run.wait() == 1, "a crash"
    status = ns.wait_status("spender", "attempt 1's spend", lambda s: cost(s) == "0.60")
    assert status["spend"]["tokens"] == 400
    assert status.get("shutdown") is None, "0.60 of 1.00: not stopped"
    ended = ns.pods("spender")[0].status.containerStatuses[0].state.terminated
    assert json.loads(ended.message) == {
        "reason": "RuntimeError: the model's answer did not parse",
        "spend": {"cost": "0.60", "tokens": 400},
    }
    record = status["restartHistory"][0]
    assert record["message"] == "RuntimeError: the model's answer did not parse", record

    # Attempt 2: reports 0.30, adds 0.10: 1.00 in all, the budget. It works on until stopped.
    second = ns.wait_new_pod("spender", [first]).metadata.name
    run = ns.agent_program(
        second, "spend_agent", "--report", "0.30", "--cost", "0.10", "--tokens", "50",
        "--then", "work",
    )  # fmt: skip
    # The operator writes its shutdown first, then the rest of the status (the spend with it).
    status = ns.wait_status(
        "spender",
        "the budget's shutdown and the spend that made it",
        lambda s: (s.get("shutdown") or {}).get("source") == "Budget" and cost(s) == "1.00",
    )
    assert status["shutdown"]["type"] == "Economic"
    assert status["shutdown"]["reason"] == "spend budget exhausted: 1.00 of 1.00"
    assert (cost(status), status["spend"]["tokens"]) == ("1.00", 450)
    assert run.wait() == 128 + 15, "the operator stopped the pod: the agent got SIGTERM"
    note = wait_for(
        "Event BudgetExhausted",
        lambda: next((n for r, n in ns.events("spender") if r == "BudgetExhausted"), None),
    )
    assert "1.00" in note, note

    # Decided on once more, with everything as it is: no third pod, ever.
    status = ns.decided_again("spender")
    assert status["phase"] == "Shutdown"
    assert status["shutdown"]["source"] == "Budget"
    assert {p.metadata.name for p in ns.pods("spender")} <= {first, second}, "no third pod"
    assert status["restartCount"] == 1
