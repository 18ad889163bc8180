"""What an author relies on, as the operator acts on it: `previous` tells the next attempt how the
last one ended (and a crash's exception is its reason), `fail(permanent=True)` stops the agent,
and `expect_slow` holds the stall judge off, up to the policy's `progress.maxExtension`."""

from __future__ import annotations

import json
from datetime import timedelta

from harness import TestNamespace, parse_time, wait_for

HEARTBEAT = {"timeout": "30s"}
EXPECT_SLOW = "supervisor.dev/expect-slow-until"
#: The stall judge's patience without a word from the agent.
STALL = 3


def condition(status: dict, kind: str) -> dict:
    return next(c for c in status.get("conditions", []) if c["type"] == kind)


def test_previous_says_how_the_last_attempt_ended_and_a_permanent_failure_stops(
    ns: TestNamespace,
) -> None:
    ns.create_policy("quick", {"backoff": {"type": "Immediate"}})
    ns.create_agent("author", {"heartbeat": HEARTBEAT, "restartPolicyRef": {"name": "quick"}})

    # Attempt 1, a first start: nothing before it. Its exception is the failure's reason.
    first = ns.wait_new_pod("author").metadata.name
    seen_first = ns.scratch / "previous-1"
    run = ns.agent_program(
        first, "author_agent", "crash", "the search tool timed out", "--previous", seen_first
    )
    assert run.wait() == 1, run.text()
    assert json.loads(seen_first.read_text()) is None, "a first start has no previous"
    status = ns.wait_status(
        "author", "attempt 1's failure", lambda s: bool(s.get("restartHistory"))
    )
    assert status["lastFailure"]["message"] == "RuntimeError: the search tool timed out"

    # Attempt 2 reads how attempt 1 ended, then fails for good.
    second = ns.wait_new_pod("author", [first]).metadata.name
    seen_second = ns.scratch / "previous-2"
    run = ns.agent_program(
        second, "author_agent", "permanent", "no API key configured", "--previous", seen_second
    )
    assert run.wait() == 1, run.text()
    assert json.loads(seen_second.read_text()) == {
        "attempt": 1,
        "reason": "Error",
        "exit_code": 1,
        "message": "RuntimeError: the search tool timed out",
        "klass": "Transient",
    }
    status = ns.wait_status("author", "stopped for good", lambda s: s.get("phase") == "Stopped")
    assert status["lastFailure"]["class"] == "Permanent", status["lastFailure"]
    assert status["lastFailure"]["message"] == "no API key configured"
    assert condition(status, "Ready")["reason"] == "PermanentFailure"
    # Decided on once more, with everything as it is: no third attempt.
    status = ns.decided_again("author")
    assert status["phase"] == "Stopped"
    assert {p.metadata.name for p in ns.pods("author")} <= {first, second}, "no third pod"


def stalled(status: dict) -> dict | None:
    history = status.get("restartHistory") or []
    return next((r for r in history if r.get("reason") == "NoProgress"), None)


def test_expect_slow_holds_the_stall_judge_off_up_to_max_extension(ns: TestNamespace) -> None:
    # `patient` says 12 s, well within its policy's cap; `capped` says an hour, past its 8 s cap.
    for name, cap, says in (("patient", "1h", "12s"), ("capped", "8s", "1h")):
        ns.create_policy(
            name,
            {
                "backoff": {"type": "Immediate"},
                "progress": {"stallTimeout": f"{STALL}s", "maxExtension": cap},
            },
        )
        ns.create_agent(name, {"heartbeat": HEARTBEAT, "restartPolicyRef": {"name": name}})
        pod = ns.wait_new_pod(name).metadata.name
        ns.agent_program(
            pod, "author_agent", "slow", "fine-tuning run", "--for", says,
            "--previous", ns.scratch / f"previous-{name}",
        )  # fmt: skip

    for name, extension in (("patient", 12), ("capped", 8)):
        lease = wait_for(
            f"{name}'s expect-slow on its Lease",
            lambda name=name: (
                (held := ns.lease(name)) is not None
                and EXPECT_SLOW in (held.metadata.annotations or {})
                and held
            ),
        )
        until = parse_time(lease.metadata.annotations[EXPECT_SLOW])
        status = ns.wait_status(name, f"{name} judged stuck", lambda s: stalled(s) is not None)
        record = stalled(status)
        failed = parse_time(record["failedAt"])
        # The stall clock starts when the progress was recorded (1, reported at the start).
        grew = parse_time(status["progress"]["at"]) if status.get("progress") else None
        assert grew is not None, status
        assert failed >= grew + timedelta(seconds=extension - 1), (
            f"{name} judged {failed - grew} after its last progress; it said {until}"
        )
        if name == "patient":
            assert failed >= until - timedelta(seconds=1), f"judged at {failed}, before {until}"
        else:
            assert failed < until - timedelta(minutes=50), "capped by maxExtension, not an hour"
