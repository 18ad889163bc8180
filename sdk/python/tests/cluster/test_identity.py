"""An Agent with a heartbeat and no RBAC of the user's: its pod's managed token is all the SDK
needs to keep it alive and report, and is refused on another agent's Lease."""

from __future__ import annotations

import json

from harness import TestNamespace, wait_for

HEARTBEAT = {"timeout": "4s", "gracePeriod": "8s"}
#: The agent reports a step every PAUSE seconds, longer than the heartbeat timeout: between
#: reports only the background renewal keeps it alive.
PAUSE = 5
#: Reached only past the grace period plus a whole pause without a report: at step 4 the agent
#: has run 15 s since its first report, the last 5 of them after the grace period.
STEPS = 4


def test_a_managed_token_renews_and_reports_and_is_refused_elsewhere(ns: TestNamespace) -> None:
    ns.create_policy("quick", {"backoff": {"type": "Immediate"}})
    # Another agent, whose Lease the first must not touch (its pod, without a process, has ten
    # minutes before its heartbeat is due).
    ns.create_agent(
        "other", {"heartbeat": {"timeout": "10m"}, "restartPolicyRef": {"name": "quick"}}
    )
    ns.create_agent("worker", {"heartbeat": HEARTBEAT, "restartPolicyRef": {"name": "quick"}})
    wait_for("the other agent's Lease", lambda: ns.lease("other"))
    pod = ns.wait_new_pod("worker")
    name = pod.metadata.name
    assert pod.spec.serviceAccountName == "worker", "the ServiceAccount the operator made"

    probe, stop = ns.scratch / "probe.json", ns.scratch / "stop"
    run = ns.agent_program(
        name, "heartbeat_agent", "--pause", str(PAUSE), "--other-lease", "other",
        "--probe", probe, "--stop", stop,
    )  # fmt: skip
    found = json.loads(
        wait_for(
            "the agent's probe", lambda: run.running() and probe.exists() and probe.read_text()
        )
    )
    assert found["credentials"] == ["token"], "the agent holds its pod's token and nothing else"
    assert found["own_get"] == 200
    assert found["other_get"] == 403, "another agent's Lease may not be read"
    assert found["other_patch"] == 403, "another agent's Lease may not be renewed"
    assert found["pods_list"] == 403, "nothing but its own Lease"

    status = ns.wait_status(
        "worker", f"progress {STEPS} on the first pod", lambda s: reached(s, STEPS)
    )
    assert status["podName"] == name, "the same pod: never restarted"
    assert status["restartCount"] == 0
    assert "lastFailure" not in status, status.get("lastFailure")
    assert status["phase"] == "Running"
    lease, other = ns.lease("worker"), ns.lease("other")
    assert lease is not None
    assert lease.spec.holderIdentity == name
    assert other is not None
    assert other.spec.holderIdentity != name

    stop.touch()
    assert run.wait() == 0, run.text()
    status = ns.wait_status(
        "worker",
        "the voluntary shutdown",
        lambda s: (s.get("shutdown") or {}).get("type") == "Voluntary",
    )
    last = status["progress"]["value"]
    assert last >= STEPS
    assert status["checkpoints"][0]["ref"] == f"run-1/step-{last}", "the last checkpoint reported"
    assert status["restartCount"] == 0


def reached(status: dict, steps: int) -> bool:
    """Whether the agent reported `steps` steps; fails at once if it was restarted meanwhile."""
    assert status.get("restartCount", 0) == 0, f"restarted: {status.get('lastFailure')}"
    return (status.get("progress") or {}).get("value", 0) >= steps
