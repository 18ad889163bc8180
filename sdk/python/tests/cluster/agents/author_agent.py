"""An agent that uses what an author relies on: it writes `sup.previous` (how the attempt before
ended, as JSON, or null) to `--previous`, reports a progress, then ends as asked: `crash` (an
exception leaves the block), `permanent` (`fail(reason, permanent=True)`), or `slow` (says
`expect_slow(--for, reason)` and then makes no progress until it is stopped)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from agent_supervisor import Supervisor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("ending", choices=["crash", "permanent", "slow"])
    parser.add_argument("reason")
    parser.add_argument("--previous", type=Path, required=True)
    parser.add_argument("--for", dest="duration", default="1h")
    args = parser.parse_args()

    with Supervisor.from_env() as sup:
        previous = sup.previous
        shown = None if previous is None else dataclasses.asdict(previous)
        args.previous.write_text(json.dumps(shown, default=str))
        sup.report(progress=1)
        if args.ending == "crash":
            raise RuntimeError(args.reason)
        if args.ending == "permanent":
            sup.fail(args.reason, permanent=True)
        sup.expect_slow(args.duration, args.reason)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
