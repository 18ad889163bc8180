"""The SDK's last words as the operator acts on them: an economic shutdown is left alone, and a
retry-after is restarted no earlier than asked."""

from __future__ import annotations

import math

from harness import TestNamespace, parse_time

HEARTBEAT = {"timeout": "30s"}
#: The agent asks to be restarted this many seconds later; its policy would restart at once.
RETRY_AFTER = 8


def test_an_economic_shutdown_is_left_alone(ns: TestNamespace) -> None:
    ns.create_policy("quick", {"backoff": {"type": "Immediate"}})
    ns.create_agent("spender", {"heartbeat": HEARTBEAT, "restartPolicyRef": {"name": "quick"}})
    pod = ns.wait_new_pod("spender").metadata.name
    run = ns.agent_program(
        pod, "last_words_agent", "economic", "out of credits", "--progress", "7",
        "--checkpoint", "ledger/7",
    )  # fmt: skip
    assert run.wait() == 0, "a shutdown is no failure: exit code 0"
    status = ns.wait_status(
        "spender",
        "an economic shutdown",
        lambda s: (s.get("shutdown") or {}).get("type") == "Economic",
    )
    assert status["shutdown"]["reason"] == "out of credits"
    # Decided on once more, with everything as it is: still no other pod.
    status = ns.decided_again("spender")
    assert status["phase"] == "Shutdown"
    assert status["restartCount"] == 0
    assert status["shutdown"]["type"] == "Economic"
    assert {p.metadata.name for p in ns.pods("spender")} <= {pod}, "no other pod, ever"
    assert status["progress"]["value"] == 7, "the progress in the last words"
    assert status["checkpoints"][0]["ref"] == "ledger/7", "the checkpoint in the last words"


def test_a_retry_after_is_restarted_no_earlier_than_asked(ns: TestNamespace) -> None:
    ns.create_policy("quick", {"backoff": {"type": "Immediate"}})
    ns.create_agent("caller", {"heartbeat": HEARTBEAT, "restartPolicyRef": {"name": "quick"}})
    pod = ns.wait_new_pod("caller").metadata.name
    asked = ns.scratch / "asked"
    run = ns.agent_program(
        pod, "last_words_agent", "retry-after", "rate limited", "--when", f"{RETRY_AFTER}s",
        "--asked", asked,
    )  # fmt: skip
    assert run.wait() == 1, "a retry-after ends the attempt with exit code 1"
    asked_at = float(asked.read_text())

    following = ns.wait_new_pod("caller", [pod])
    created = following.metadata.creationTimestamp.timestamp()
    # (Creation times are whole seconds, cut: so is the time asked.)
    assert created >= math.floor(asked_at) + RETRY_AFTER, (
        f"restarted {created - asked_at:.1f}s after the agent asked for {RETRY_AFTER}s"
    )
    # The failure is recorded first, the restart once its pod is made: wait for the latter.
    status = ns.wait_status(
        "caller",
        "the restart recorded",
        lambda s: s.get("restartCount") == 1 and bool(s.get("restartHistory")),
    )
    record = status["restartHistory"][0]
    assert record["trigger"] == "RetryAfter"
    assert record.get("restartedAt"), record
    assert created >= parse_time(record["failedAt"]).timestamp() + RETRY_AFTER
