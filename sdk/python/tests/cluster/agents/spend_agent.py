"""An agent that spends: it reports `--report` as its spend so far (`report(spend=...)`), then
makes `--calls` calls costing `--cost` and `--tokens` each (`add_spend`), and then crashes
(`--then crash`: an exception leaves the `with` block) or works on until it is stopped
(`--then work`)."""

from __future__ import annotations

import argparse
import time

from agent_supervisor import Supervisor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", help="a cost to report first")
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--cost", default="0")
    parser.add_argument("--tokens", type=int, default=0)
    parser.add_argument("--then", choices=["crash", "work"], required=True)
    args = parser.parse_args()

    with Supervisor.from_env() as sup:
        if args.report is not None:
            sup.report(spend={"cost": args.report})
        for _ in range(args.calls):
            sup.add_spend(cost=args.cost, tokens=args.tokens)
        print("spent", sup.spend, flush=True)
        if args.then == "crash":
            raise RuntimeError("the model's answer did not parse")
        while True:  # until the operator stops the pod (SIGTERM)
            time.sleep(0.2)


if __name__ == "__main__":
    main()
