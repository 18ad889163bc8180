"""The SDK against a real API server: one test namespace with the operator watching it, Agents
and RestartPolicies made there, and agent processes run as their pods' processes by
hack/podrun.py (kwok runs none)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from lightkube import ApiError, Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[4]
PODRUN = REPO / "hack" / "podrun.py"
AGENTS = Path(__file__).resolve().parent / "agents"
#: How long a test waits for the operator, or an agent, to react: a minute, for a loaded machine
#: (only a failing test waits it out), as the Rust tests do.
REACT = 60.0

Agent = create_namespaced_resource("supervisor.dev", "v1alpha1", "Agent", "agents")
RestartPolicy = create_namespaced_resource(
    "supervisor.dev", "v1alpha1", "RestartPolicy", "restartpolicies"
)


def wait_for(what: str, check: Callable[[], T | None], timeout: float = REACT) -> T:
    """Polls `check` until it returns something other than `None` or `False`, and returns that."""
    deadline = time.monotonic() + timeout
    while True:
        seen = check()
        if seen is not None and seen is not False:
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f}s for {what}")
        time.sleep(0.2)


def parse_time(text: str) -> datetime:
    """A Kubernetes time (RFC 3339)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class Run:
    """One agent process started by podrun as a pod's process."""

    pod: str
    popen: subprocess.Popen[str]
    output: Path

    def wait(self, timeout: float = REACT) -> int:
        """podrun's exit code (the agent's), once it exits."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the agent of pod {self.pod} did not exit within {timeout:.0f}s:\n{self.text()}"
            ) from None

    def running(self) -> bool:
        """True while it runs; raises, with what it printed, once it exited."""
        if self.popen.poll() is not None:
            raise AssertionError(
                f"the agent of pod {self.pod} exited with {self.popen.returncode}:\n{self.text()}"
            )
        return True

    def text(self) -> str:
        """What podrun and the agent printed."""
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def stop(self) -> None:
        """Ends podrun (by its pid), which stops the agent, if it still runs."""
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@dataclass
class TestNamespace:
    """A namespace of one test, and what the test did in it."""

    __test__ = False  # (not a test class: pytest is told)

    client: Client
    name: str
    scratch: Path
    #: The admin kubeconfig: podrun's own (the agents get their pods' tokens).
    kubeconfig: Path
    runs: list[Run] = field(default_factory=list)

    # Making things.

    def create_policy(self, name: str, spec: dict[str, Any]) -> None:
        """A RestartPolicy."""
        self.client.create(
            RestartPolicy.from_dict(_object("RestartPolicy", name, spec)), namespace=self.name
        )

    def create_agent(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """An Agent; the template defaults to one container named `agent`."""
        spec = {
            "template": {
                "spec": {"containers": [{"name": "agent", "image": "example.invalid/agent:1"}]}
            },
            **spec,
        }
        return self.client.create(
            Agent.from_dict(_object("Agent", name, spec)), namespace=self.name
        )

    # Reading things.

    def agent(self, name: str) -> dict[str, Any]:
        """The Agent, as the API server has it now."""
        return self.client.get(Agent, name, namespace=self.name)

    def status(self, name: str) -> dict[str, Any]:
        """The Agent's status (empty before the operator wrote one)."""
        return self.agent(name).get("status") or {}

    def wait_status(
        self, name: str, what: str, check: Callable[[dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """The Agent's status, once `check` holds for it."""
        return wait_for(f"agent {name}: {what}", lambda: _when(self.status(name), check))

    def pods(self, agent: str) -> list[Pod]:
        """The Agent's pods, oldest attempt first."""
        pods = self.client.list(Pod, namespace=self.name, labels={"supervisor.dev/agent": agent})
        return sorted(pods, key=lambda p: int(p.metadata.labels["supervisor.dev/attempt"]))

    def wait_new_pod(self, agent: str, seen: Iterable[str] = ()) -> Pod:
        """The Agent's pod of an attempt whose pod is not in `seen`."""
        old = set(seen)

        def new() -> Pod | None:
            fresh = [p for p in self.pods(agent) if p.metadata.name not in old]
            return fresh[0] if fresh else None

        return wait_for(f"a new pod of agent {agent} (not {sorted(old)})", new)

    def lease(self, name: str) -> Lease | None:
        """The Lease, if it exists."""
        try:
            return self.client.get(Lease, name, namespace=self.name)
        except ApiError as error:
            if error.status.code == 404:
                return None
            raise

    def events(self, agent: str) -> list[tuple[str, str]]:
        """The Events about the Agent, as (reason, note)."""
        events = self.client.list(
            Event,
            namespace=self.name,
            fields={"regarding.name": agent, "regarding.kind": "Agent"},
        )
        return [(e.reason or "", e.note or "") for e in events]

    def decided_again(self, name: str) -> dict[str, Any]:
        """Makes the operator decide about the Agent once more, on everything as it is now, and
        waits until it has: a change of spec that changes nothing it does (`agentContainer`
        flipped between unset and the first container, the default) and the
        `observedGeneration` that proves the decision. Instead of waiting a while to see that
        nothing happens."""
        current = self.agent(name)
        first = current["spec"]["template"]["spec"]["containers"][0]["name"]
        flip = None if current["spec"].get("agentContainer") else first
        patched = self.client.patch(
            Agent,
            name,
            {"spec": {"agentContainer": flip}},
            namespace=self.name,
            patch_type=PatchType.MERGE,
        )
        generation = patched["metadata"]["generation"]
        return self.wait_status(
            name,
            f"observedGeneration {generation}",
            lambda s: s.get("observedGeneration") == generation,
        )

    # Running agents.

    def podrun(self, pod: str, *command: str | Path) -> Run:
        """Starts `command` as pod `pod`'s process (hack/podrun.py, the SDK's Python)."""
        output = self.scratch / f"{pod}.out"
        with output.open("w") as out:
            popen = subprocess.Popen(
                [sys.executable, str(PODRUN), "--namespace", self.name, "--pod", pod, "--"]
                + [str(part) for part in command],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "KUBECONFIG": str(self.kubeconfig), "PYTHONUNBUFFERED": "1"},
            )
        run = Run(pod, popen, output)
        self.runs.append(run)
        return run

    def agent_program(self, pod: str, program: str, *args: str | Path) -> Run:
        """Starts the agent program `agents/<program>.py` as pod `pod`'s process."""
        return self.podrun(pod, sys.executable, AGENTS / f"{program}.py", *args)


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "supervisor.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def _when(status: dict[str, Any], check: Callable[[dict[str, Any]], bool]) -> Any:
    return status if status and check(status) else None
