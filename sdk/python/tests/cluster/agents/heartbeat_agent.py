"""An agent that renews its heartbeat in the background and reports a step every `--pause`
seconds until `--stop` exists, then shuts down voluntarily. First it tries, with the credentials
it was given (its pod's managed token), what it may do and what not, and writes that to
`--probe` as JSON."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from lightkube import ApiError, Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from agent_supervisor import Supervisor


def answer(call: Callable[[], object]) -> int:
    """The HTTP status the API server answers `call` with."""
    try:
        call()
    except ApiError as error:
        return error.status.code
    return 200


def probe(other: str) -> dict[str, object]:
    """What this process's credentials may do."""
    namespace, own = os.environ["AGENT_NAMESPACE"], os.environ["AGENT_HEARTBEAT_LEASE"]
    with open(os.environ["KUBECONFIG"]) as f:
        users = yaml.safe_load(f)["users"]
    client = Client(namespace=namespace)
    renewal = {"spec": {"holderIdentity": os.environ["AGENT_POD_NAME"]}}
    return {
        "credentials": sorted(key for user in users for key in user["user"]),
        "own_get": answer(lambda: client.get(Lease, own)),
        "other_get": answer(lambda: client.get(Lease, other)),
        "other_patch": answer(
            lambda: client.patch(Lease, other, renewal, patch_type=PatchType.MERGE)
        ),
        "pods_list": answer(lambda: list(client.list(Pod))),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pause", type=float, required=True)
    parser.add_argument("--other-lease", required=True)
    parser.add_argument("--probe", type=Path, required=True)
    parser.add_argument("--stop", type=Path, required=True)
    args = parser.parse_args()

    with Supervisor.from_env() as sup:
        found = probe(args.other_lease)
        partial = args.probe.with_suffix(".partial")
        partial.write_text(json.dumps(found))
        partial.rename(args.probe)
        step = 0
        while True:
            step += 1
            sup.report(progress=step, checkpoint=f"run-1/step-{step}")
            deadline = time.monotonic() + args.pause
            while time.monotonic() < deadline and not args.stop.exists():
                time.sleep(0.1)
            if args.stop.exists():
                break
        sup.shutdown("voluntary", f"stopped at step {step}")


if __name__ == "__main__":
    main()
