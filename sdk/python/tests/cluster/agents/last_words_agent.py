"""An agent that reports a progress and a checkpoint, then ends with its last words: a shutdown
(`economic` or `voluntary`) or `retry-after --when`. With `--asked`, it first writes there the
time it asked (seconds since the epoch)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from agent_supervisor import Supervisor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["economic", "voluntary", "retry-after"])
    parser.add_argument("reason")
    parser.add_argument("--when", help="for retry-after: a duration such as 20s")
    parser.add_argument("--progress", type=int, default=1)
    parser.add_argument("--checkpoint", default="step-1")
    parser.add_argument("--asked", type=Path)
    args = parser.parse_args()

    with Supervisor.from_env() as sup:
        sup.report(progress=args.progress, checkpoint=args.checkpoint)
        if args.asked is not None:
            args.asked.write_text(repr(time.time()))
        if args.kind == "retry-after":
            sup.retry_after(args.when, args.reason)
        sup.shutdown(args.kind, args.reason)


if __name__ == "__main__":
    main()
