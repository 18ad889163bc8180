"""The sender's pure state machine: what is written next, and when (no I/O, the time passed in)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from agent_supervisor._outbox import Outbox

PROGRESS = "supervisor.dev/progress"
SPEND = "supervisor.dev/spend"
SLOW_UNTIL = "supervisor.dev/expect-slow-until"
SLOW_REASON = "supervisor.dev/expect-slow-reason"
OLD_ATTEMPT = {SPEND: None, SLOW_UNTIL: None, SLOW_REASON: None}
T0 = datetime(2026, 12, 5, tzinfo=timezone.utc)


def test_every_write_until_one_is_taken_takes_the_old_spend_away() -> None:
    box = Outbox(renew_at=0.0)
    for tried in range(3):
        body, _ = box.body("pod-3", T0 + timedelta(seconds=tried))
        assert body["metadata"]["annotations"] == OLD_ATTEMPT
        assert body["spec"]["acquireTime"] == body["spec"]["renewTime"]
        box.failed(0.25, float(tried), 5.0)
    body, carried = box.body("pod-3", T0 + timedelta(seconds=3))
    box.taken(body, carried, 3.0, 5.0)
    later, _ = box.body("pod-3", T0 + timedelta(seconds=8))
    assert "metadata" not in later
    assert "acquireTime" not in later["spec"]


def test_a_report_of_the_new_attempt_wins_over_taking_the_old_spend_away() -> None:
    box = Outbox()
    box.record({SPEND: '{"cost":"0.01"}', SLOW_UNTIL: "2026-12-05T02:00:00Z"})
    body, _ = box.body("pod-3", T0)
    assert body["metadata"]["annotations"] == {
        **OLD_ATTEMPT,
        SPEND: '{"cost":"0.01"}',
        SLOW_UNTIL: "2026-12-05T02:00:00Z",
    }


def test_reports_coalesce_and_a_newer_value_is_never_dropped() -> None:
    box = Outbox()
    box.record({PROGRESS: "1"})
    body, carried = box.body("pod-3", T0)
    box.record({PROGRESS: "2"})  # while the write is on its way
    box.taken(body, carried, 0.0, 5.0)
    assert box.pending == {PROGRESS: "2"}
    assert (box.written, box.recorded) == (1, 2)
    body, carried = box.body("pod-3", T0 + timedelta(seconds=1))
    assert body["metadata"]["annotations"] == {PROGRESS: "2"}
    box.taken(body, carried, 1.0, 5.0)
    assert (box.pending, box.written) == ({}, 2)


def test_when_the_next_write_is_due() -> None:
    box = Outbox()
    assert box.due(0.0) is None, "nothing renews, nothing reported"
    box.record({PROGRESS: "1"})
    assert box.due(1.0) == 1.0
    box.failed(0.25, 1.0, 5.0)
    assert box.due(1.0) == 1.25, "backoff after a server error"
    box.failed(None, 2.0, 5.0)
    assert box.due(2.0) == 7.0, "a refusal: an interval away"
    box.record({PROGRESS: "2"})
    assert box.due(3.0) == 3.0, "unless a new report comes"
    renewing = Outbox(renew_at=0.0)
    body, carried = renewing.body("pod-3", T0)
    renewing.taken(body, carried, 0.0, 5.0)
    assert renewing.due(1.0) == 5.0
    renewing.failed(60.0, 5.0, 5.0)
    assert renewing.due(5.0) == 10.0, "never later than an interval"


def test_manual_renewal_renews_only_for_alive_and_the_first_write() -> None:
    box = Outbox(manual=True)
    assert box.due(0.0) is None
    box.alive()  # start(): the attempt's first write
    assert box.due(0.0) == 0.0
    body, carried = box.body("pod-3", T0)
    assert "renewTime" in body["spec"]
    box.taken(body, carried, 0.0, 5.0)
    assert box.due(100.0) is None, "no renewal on a timer"
    box.record({PROGRESS: "7"})
    body, carried = box.body("pod-3", T0 + timedelta(seconds=1))
    assert body == {"metadata": {"annotations": {PROGRESS: "7"}}}, "a report alone, no renewal"
    box.taken(body, carried, 1.0, 5.0)
    box.alive()
    box.alive()  # coalesced
    assert box.due(2.0) == 2.0
    body, carried = box.body("pod-3", T0 + timedelta(seconds=2))
    box.alive()  # while the write is on its way: renewed by the next one
    box.taken(body, carried, 2.0, 5.0)
    assert "metadata" not in body
    assert body["spec"]["renewTime"] == "2026-12-05T00:00:02.000000Z"
    assert box.due(3.0) == 3.0
    body, carried = box.body("pod-3", T0 + timedelta(seconds=3))
    box.failed(0.25, 3.0, 5.0)
    assert box.due(3.0) == 3.25, "an alive not taken is tried again"
    body, carried = box.body("pod-3", T0 + timedelta(seconds=4))
    box.taken(body, carried, 4.0, 5.0)
    assert box.due(5.0) is None


def test_without_manual_renewal_every_write_renews() -> None:
    box = Outbox(renew_at=0.0)
    body, carried = box.body("pod-3", T0)
    box.taken(body, carried, 0.0, 5.0)
    box.record({PROGRESS: "1"})
    body, _ = box.body("pod-3", T0 + timedelta(seconds=1))
    assert "renewTime" in body["spec"]
