#!/usr/bin/env python3
"""Plays the kubelet for one pod under kwok, where no process runs in a pod: runs a command as
that pod's agent process and writes how it ended into the pod's status.

    python hack/podrun.py --namespace NS --pod POD [--container NAME] -- COMMAND...

Waits for the pod to be Running, then runs COMMAND with the container's environment (its literal
`env` values: the `AGENT_*` variables the operator injects), `KUBECONFIG` naming a kubeconfig
with the admin kubeconfig's server and CA and only a token of the pod's ServiceAccount (from the
TokenRequest API, bound to the pod, as a kubelet mounts one), and `AGENT_TERMINATION_LOG` naming
a file that stands in for /dev/termination-log. When the process exits it writes what a kubelet
would: the container terminated (exit code, reason Error or Completed, the termination log's
last 4096 bytes as its message, startedAt and finishedAt), and the phase Failed (Succeeded on
exit 0) once no other container runs. If the pod is deleted or stops Running meanwhile (the
operator stopped it), the process gets SIGTERM, then SIGKILL after the pod's grace period.

Exits with the command's exit code (128 + N after signal N); 125 when podrun itself fails, 127
when the command cannot be started. The admin kubeconfig is $KUBECONFIG. Needs lightkube (the
SDK's virtualenv: `hack/lib.sh`'s sdk_venv prints its python).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client, ConfigError, KubeConfig
from lightkube.models.authentication_v1 import BoundObjectReference, TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod, ServiceAccount
from lightkube.types import PatchType

#: The kubelet keeps at most this many bytes of a termination message (the file's last ones).
MESSAGE_LIMIT = 4096
#: How often the pod is looked at while the process runs.
POLL = 0.5
#: The bound token's lifetime (the API server's minimum is 10 minutes).
TOKEN_SECONDS = 3600
#: Exit codes of podrun's own failures (as `env` and `timeout` use them).
FAILED, NOT_FOUND = 125, 127


def say(message: str) -> None:
    """One line to stderr, marked as podrun's."""
    print(f"podrun: {message}", file=sys.stderr, flush=True)


class Failure(Exception):
    """podrun cannot go on."""


def now() -> str:
    """The time as Kubernetes writes it (seconds, UTC)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def running(pod: Pod) -> bool:
    """Whether the pod runs and is not being deleted."""
    phase = pod.status.phase if pod.status else None
    return phase == "Running" and pod.metadata.deletionTimestamp is None


def wait_running(client: Client, namespace: str, name: str, timeout: float) -> Pod:
    """The pod, once Running; fails if it ends first or does not run within `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pod = client.get(Pod, name, namespace=namespace)
        except ApiError as error:
            if error.status.code != 404:
                raise
        else:
            if running(pod):
                return pod
            phase = pod.status.phase if pod.status else None
            if phase in ("Succeeded", "Failed") or pod.metadata.deletionTimestamp:
                raise Failure(f"pod {namespace}/{name} ended before it ran (phase {phase})")
        if time.monotonic() > deadline:
            raise Failure(f"pod {namespace}/{name} did not run within {timeout:.0f}s")
        time.sleep(0.2)


def container_of(pod: Pod, name: str | None) -> Any:
    """The container named `name`, or the first."""
    containers = pod.spec.containers
    if name is None:
        return containers[0]
    for container in containers:
        if container.name == name:
            return container
    names = ", ".join(c.name for c in containers)
    raise Failure(f"pod {pod.metadata.name} has no container {name} (it has {names})")


def pod_env(container: Any) -> dict[str, str]:
    """The container's literal environment (a `valueFrom` is not resolved: said, and left out)."""
    env = {}
    for var in container.env or []:
        if var.valueFrom is not None:
            say(f"{var.name} comes from valueFrom, which podrun does not resolve: left out")
            continue
        env[var.name] = var.value or ""
    return env


def token(client: Client, pod: Pod) -> str:
    """A token of the pod's ServiceAccount, bound to the pod (invalid once it is deleted)."""
    account = pod.spec.serviceAccountName or "default"
    request = ServiceAccount.Token(
        metadata=ObjectMeta(name=account, namespace=pod.metadata.namespace),
        spec=TokenRequestSpec(
            audiences=[],
            expirationSeconds=TOKEN_SECONDS,
            boundObjectRef=BoundObjectReference(
                apiVersion="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid
            ),
        ),
    )
    made = client.create(request, account, namespace=pod.metadata.namespace)
    return made.status.token


def token_kubeconfig(admin: KubeConfig, bearer: str) -> dict[str, Any]:
    """A kubeconfig of the admin kubeconfig's server and CA, and `bearer`: no other credential."""
    current = admin.get()
    if current is None:
        raise Failure("the admin kubeconfig has no current context")
    cluster: dict[str, Any] = {"server": current.cluster.server}
    if current.cluster.certificate_auth_data:
        cluster["certificate-authority-data"] = current.cluster.certificate_auth_data
    elif current.cluster.certificate_auth:
        ca = Path(current.abs_file(current.cluster.certificate_auth)).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    if current.cluster.insecure:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": "pod", "user": {"token": bearer}}],
        "contexts": [{"name": "pod", "context": {"cluster": "cluster", "user": "pod"}}],
        "current-context": "pod",
    }


def termination_message(path: Path) -> str:
    """The termination log's last `MESSAGE_LIMIT` bytes, as the kubelet reads it."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - MESSAGE_LIMIT))
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def exit_code(returncode: int) -> int:
    """A process's exit code as a container runtime reports it: 128 + N after signal N."""
    return 128 - returncode if returncode < 0 else returncode


def terminated_status(
    pod: Pod, container: str, code: int, message: str, started: str
) -> dict[str, Any]:
    """The status patch a kubelet writes when `container` exited with `code`."""
    state = {
        "running": None,
        "waiting": None,
        "terminated": {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "message": message,
            "startedAt": started,
            "finishedAt": now(),
        },
    }
    statuses = {s.name: s for s in (pod.status.containerStatuses or [])}

    def ended(name: str) -> bool:
        status = statuses.get(name)
        return bool(status and status.state and status.state.terminated)

    others_run = any(c.name != container and not ended(c.name) for c in pod.spec.containers)
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": now()},
            {"type": "ContainersReady", "status": "False", "lastTransitionTime": now()},
        ],
        "containerStatuses": [
            {"name": container, "ready": False, "started": False, "state": state}
        ],
    }
    if not others_run:  # (a classic sidecar that still runs keeps the pod Running)
        status["phase"] = "Succeeded" if code == 0 else "Failed"
    # The uid: a precondition, so a pod of the same name made since is never written.
    return {"metadata": {"uid": pod.metadata.uid}, "status": status}


class Process:
    """The command, in a process group of its own (a container's processes end together)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(command, env=env, start_new_session=True)
        self.started = now()

    def signal(self, signum: int) -> None:
        """Sends `signum` to the process and its children."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signum)

    def wait(self, timeout: float) -> int | None:
        """The exit code, once it exits within `timeout` seconds."""
        try:
            return exit_code(self.popen.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float) -> int:
        """SIGTERM, then SIGKILL after `grace` seconds; the exit code."""
        self.signal(signal.SIGTERM)
        code = self.wait(grace)
        if code is None:
            self.signal(signal.SIGKILL)
            code = exit_code(self.popen.wait())
        return code


def still_running(client: Client, pod: Pod) -> tuple[bool, float]:
    """Whether the pod still runs, and the grace period it would be stopped with."""
    grace = float(pod.spec.terminationGracePeriodSeconds or 30)
    try:
        current = client.get(Pod, pod.metadata.name, namespace=pod.metadata.namespace)
    except ApiError as error:
        if error.status.code == 404:
            return False, grace
        say(f"cannot read the pod ({error.status.code}): trying again")
        return True, grace
    except Exception as error:  # the network: the next look may work
        say(f"cannot read the pod ({error}): trying again")
        return True, grace
    if current.metadata.uid != pod.metadata.uid:
        return False, grace
    if current.metadata.deletionGracePeriodSeconds is not None:
        grace = float(current.metadata.deletionGracePeriodSeconds)
    return running(current), grace


def run(args: argparse.Namespace) -> int:
    """Runs the command as the pod's process; its exit code."""
    admin = KubeConfig.from_env()
    client = Client(admin, namespace=args.namespace)
    pod = wait_running(client, args.namespace, args.pod, args.timeout)
    container = container_of(pod, args.container)
    with tempfile.TemporaryDirectory(prefix="podrun-") as scratch:
        kubeconfig = Path(scratch, "kubeconfig")
        if pod.spec.automountServiceAccountToken is False:
            say("automountServiceAccountToken is false: the process gets no token")
        else:
            config = token_kubeconfig(admin, token(client, pod))
            kubeconfig.write_text(json.dumps(config))
            kubeconfig.chmod(0o600)
        log = Path(scratch, "termination-log")
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AGENT_", "KUBERNETES_SERVICE_", "KUBERNETES_PORT"))
        }
        env.update(pod_env(container))
        env["KUBECONFIG"] = str(kubeconfig)
        env["AGENT_TERMINATION_LOG"] = str(log)
        try:
            process = Process(args.command, env)
        except OSError as error:
            say(f"cannot run {args.command[0]}: {error}")
            return NOT_FOUND
        say(f"running {args.command[0]} as pod {args.namespace}/{args.pod} ({container.name})")

        stopped = False

        def forward(signum: int, _frame: object) -> None:
            process.signal(signum)

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        while (code := process.wait(POLL)) is None:
            alive, grace = still_running(client, pod)
            if not alive:
                say("the pod was stopped: stopping the process")
                stopped = True
                code = process.stop(grace)
                break
        if stopped:
            say(f"the process ended with {code}; the pod's status is the operator's")
            return code
        message = termination_message(log)
        patch = terminated_status(pod, container.name, code, message, process.started)
        try:
            client.patch(
                Pod.Status,
                args.pod,
                patch,
                namespace=args.namespace,
                patch_type=PatchType.STRATEGIC,
            )
        except ApiError as error:
            say(f"cannot write the pod's status: {error.status.code} {error.status.message}")
            return code
        say(f"the process exited with {code}: written into the pod's status")
        return code


def main() -> int:
    """podrun's command line."""
    parser = argparse.ArgumentParser(
        description="Run a command as a pod's process, as a kubelet would (for kwok).",
        usage="%(prog)s --namespace NS --pod POD [--container NAME] -- COMMAND...",
    )
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--pod", required=True)
    parser.add_argument("--container", help="the container to be (default: the first)")
    parser.add_argument(
        "--timeout", type=float, default=120, help="seconds to wait for the pod to run [120]"
    )
    parser.add_argument("command", nargs="+", help="the command, after --")
    args = parser.parse_args()
    try:
        return run(args)
    except Failure as error:
        say(str(error))
    except ApiError as error:
        say(f"the API server refused: {error.status.code} {error.status.message}")
    except ConfigError as error:
        say(f"no admin kubeconfig (set KUBECONFIG): {error}")
    return FAILED


if __name__ == "__main__":
    sys.exit(main())
