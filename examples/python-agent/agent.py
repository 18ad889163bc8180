"""A Python agent supervised by agent-supervisor, with its SDK (sdk/python).

It works through a task of STEPS steps, one model call each. After every step it reports how far
it got, where it could resume from and what this attempt has spent; a restarted attempt resumes
from the checkpoint the operator hands it. Rate-limited by the model provider, it asks to be
restarted once the limit has passed (`retry_after`); out of credits, it stops for good
(`shutdown("economic")`); done, too (`shutdown("voluntary")`). All the while `Supervisor` renews
its heartbeat Lease in the background.

The model is a stand-in (`Model`), so that the example runs anywhere: put your client in its
place. Outside Kubernetes (no AGENT_HEARTBEAT_LEASE) the SDK does nothing and says so once:

    STEPS=5 STEP_SECONDS=0 python agent.py

Settings (environment): STEPS [100]; STEP_SECONDS a model call takes [1]; CALLS_PER_MINUTE the
provider allows [30]; CREDITS on the account, in dollars ["5.00"].
"""

from __future__ import annotations

import logging
import math
import os
import time
from decimal import Decimal

from agent_supervisor import Supervisor

log = logging.getLogger("python-agent")


class RateLimited(Exception):
    """The provider refused the call: try again in `retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"rate limited: retry in {retry_after}s")
        self.retry_after = retry_after


class OutOfCredits(Exception):
    """The account cannot pay for another call."""


class Model:
    """A stand-in for an LLM provider's client: each call takes tokens, paid from the account's
    credits, and the provider takes at most `calls_per_minute` calls a minute."""

    PRICE_PER_1K_TOKENS = Decimal("0.002")

    def __init__(self, credits: Decimal, calls_per_minute: int, seconds: float) -> None:
        self.credits = credits
        self.calls_per_minute = calls_per_minute
        self.seconds = seconds
        self.calls: list[float] = []  # when the calls of the last minute were made

    def complete(self, prompt: str) -> tuple[str, int, Decimal]:
        """The answer to `prompt`, the tokens it took and what it cost."""
        now = time.monotonic()
        self.calls = [t for t in self.calls if now - t < 60]
        if len(self.calls) >= self.calls_per_minute:
            raise RateLimited(retry_after=math.ceil(60 - (now - self.calls[0])))
        tokens = 900 + 10 * len(prompt)
        cost = self.PRICE_PER_1K_TOKENS * tokens / 1000
        if cost > self.credits:
            raise OutOfCredits(f"${self.credits} left, a call costs ${cost}")
        self.calls.append(now)
        self.credits -= cost
        time.sleep(self.seconds)
        return f"a summary of {prompt}", tokens, cost


def resume_point(checkpoint: str | None) -> int:
    """The step to go on after: the checkpoint `step-N` says N; none says 0, from scratch.

    Here the state is the step number itself; a real agent saves its work (a file on the Agent's
    volume claim, an object-store key) and reports where it is as the checkpoint."""
    if checkpoint and checkpoint.startswith("step-") and checkpoint[5:].isdigit():
        return int(checkpoint[5:])
    return 0


def main() -> None:
    """Works through the task under the operator's supervision (or none, off Kubernetes)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    steps = int(os.environ.get("STEPS", "100"))
    model = Model(
        credits=Decimal(os.environ.get("CREDITS", "5.00")),
        calls_per_minute=int(os.environ.get("CALLS_PER_MINUTE", "30")),
        seconds=float(os.environ.get("STEP_SECONDS", "1")),
    )
    with Supervisor.from_env() as sup:  # renews the heartbeat Lease in the background
        step = resume_point(sup.checkpoint)
        log.info(
            "attempt after %d restart(s) (last failure: %s): starting at step %d of %d",
            sup.restart_count,
            sup.last_failure_reason or "none",
            step,
            steps,
        )
        tokens, cost = 0, Decimal(0)  # this attempt's spend
        while step < steps:
            try:
                _answer, used, price = model.complete(f"document {step + 1}")
            except RateLimited as limited:  # restarted no earlier than the provider asks
                sup.retry_after(limited.retry_after, "rate limited by the model provider")
            except OutOfCredits as error:  # never restarted: money is a reason to stop
                sup.shutdown("economic", f"out of credits: {error}")
            step += 1
            tokens, cost = tokens + used, cost + price
            sup.report(
                progress=step,
                checkpoint=f"step-{step}",
                spend={"cost": str(cost), "tokens": tokens},
            )
            log.info("step %d done", step)
        sup.shutdown("voluntary", f"all {steps} steps done")


if __name__ == "__main__":
    main()
