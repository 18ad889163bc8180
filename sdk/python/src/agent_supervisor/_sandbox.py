"""An agent-sandbox `Sandbox`'s pod: its identity read from its Lease.

The operator does not edit a Sandbox's pod template, so that pod has none of the `AGENT_*`
variables an operator-made pod has. The operator writes them instead on the Lease named after the
Sandbox (which is the pod's name, its hostname), in the pod's namespace, as the annotation
`supervisor.dev/agent-env`: a JSON object of each variable's name and its string value, with one
more, `AGENT_HOLDER` (`box#3`), the identity this attempt renews and reports as (a Sandbox's pods
all have the same name). When the environment has no `AGENT_NAME` and the process runs in a pod
with an API token, entering the supervisor's block reads that Lease once (bounded as the first
renewal is); not found yet, the block runs unsupervised while the sender reads it again in the
background, once a second, at most `LOOKUP_TIMEOUT` after entering, and takes the identity when
the annotation names this pod. Never found (or refused for good): nothing supervises the process
and every call is a no-op, said in one log line. So an ordinary pod, with no operator, pays one
request.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from lightkube import AsyncClient, Client, KubeConfig
from lightkube.resources.coordination_v1 import Lease

from . import _kube
from ._env import Identity

#: Where a pod's service-account token and namespace are mounted.
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: The Lease annotation the operator writes a Sandbox pod's `AGENT_*` variables in.
AGENT_ENV_ANNOTATION = "supervisor.dev/agent-env"
#: How long after entering the block the sender looks for the annotation naming this pod (in the
#: background: entering waits for one read only). The operator writes it before each attempt's
#: pod starts, so the read on entering finds it; but a pod it adopts while running gets it (and
#: its Role, so reads are refused until then) a moment later. Read when the block is entered.
LOOKUP_TIMEOUT = 30.0
#: The Lease is read this often while looking.
LOOKUP_EVERY = 1.0


@dataclass(frozen=True)
class Target:
    """Where this pod's identity would be: the Lease named after it, in its namespace."""

    pod: str
    namespace: str
    #: The environment's own `$AGENT_TERMINATION_LOG`, which the Lease's mapping does not override.
    termination_log: str | None = None

    @property
    def where(self) -> str:
        """The Lease, for a person."""
        return f"Lease {self.namespace}/{self.pod}"


def target(identity: Identity) -> Target | str | None:
    """Where to read this process's identity from, given what the environment said: a `Target`
    in a pod with an API token whose environment has no `AGENT_NAME` (nor
    `AGENT_HEARTBEAT_LEASE`); why not (a `str`) in such a pod without a token; `None` where the
    environment is the identity, or outside a pod."""
    if identity.name or identity.lease is not None:
        return None
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None  # not in a pod: a laptop, a unit test
    token = SERVICE_ACCOUNT / "token"
    if not token.is_file():
        return (
            f"no AGENT_NAME in the environment and no service-account token ({token}): nothing "
            "supervises this process and every call is a no-op. In an agent-sandbox Sandbox, set "
            "automountServiceAccountToken: true in its pod template so the SDK can read its "
            "identity from its Lease"
        )
    try:
        namespace = (SERVICE_ACCOUNT / "namespace").read_text().strip()
    except OSError as error:
        return f"cannot read the pod's namespace ({error}): nothing supervises this process"
    pod = os.environ.get("HOSTNAME", "").strip() or socket.gethostname()
    return Target(pod, namespace, identity.termination_log)


_UNSUPERVISED = (
    "is this Sandbox supervised? (an Agent with spec.sandboxRef naming it, or its "
    "supervisor.dev/restart-policy annotation)"
)


@dataclass(frozen=True)
class Seen:
    """What one read of the Lease says: the identity, or why not (and whether waiting helps)."""

    identity: Identity | None = None
    why: str = ""
    final: bool = False


def judge(target: Target, lease: Lease | None, error: BaseException | None = None) -> Seen:
    """What a read of the Lease (or its error) says of this pod's identity."""
    where = target.where
    if error is not None:
        status = _kube.status_of(error)
        if status == 401:
            return Seen(why="the API server does not accept the pod's token (401)", final=True)
        if status == 403:
            return Seen(
                why=f"may not read {where} (403): the operator grants the pod's ServiceAccount "
                "get on it (the Role it makes for the Sandbox's Agent) unless it runs with "
                "--manage-agent-rbac=false; then grant it yourself"
            )
        if status == 404:
            return Seen(why=f"{where} does not exist: {_UNSUPERVISED}")
        return Seen(why=f"cannot read {where}: {type(error).__name__}: {error}")
    metadata = lease.metadata if lease is not None else None
    text = ((metadata.annotations if metadata else None) or {}).get(AGENT_ENV_ANNOTATION)
    if text is None:
        return Seen(why=f"{where} has no {AGENT_ENV_ANNOTATION} annotation: {_UNSUPERVISED}")
    try:
        mapping: Any = json.loads(text)
    except ValueError:
        mapping = None
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        return Seen(why=f"{where}'s {AGENT_ENV_ANNOTATION} is not a JSON object of strings")
    if mapping.get("AGENT_POD_NAME") != target.pod:
        named = mapping.get("AGENT_POD_NAME")
        return Seen(
            why=f"{where}'s {AGENT_ENV_ANNOTATION} is for pod {named!r}, not this one "
            f"({target.pod}): ignored"
        )
    if target.termination_log is not None:
        mapping["AGENT_TERMINATION_LOG"] = target.termination_log
    return Seen(Identity.from_env(mapping))


def _given_up(why: str) -> str:
    return f"{why}; nothing supervises this process and every call is a no-op"


def _timeout() -> httpx2.Timeout:
    return httpx2.Timeout(_kube.REQUEST_TIMEOUT)


class Lookup:
    """The search for this pod's identity, which the twins' senders (a thread, a task) make: one
    read when the block is entered, then, not found yet, one every `LOOKUP_EVERY` seconds until
    `LOOKUP_TIMEOUT` after entering. The agent runs on meanwhile, unsupervised until it is found.
    """

    def __init__(self, target: Target) -> None:
        self.target = target
        #: The client the reads go through (`Client` or `AsyncClient`), made on the first; the
        #: heartbeat Lease's once the identity is found.
        self.client: Any = None
        #: Whether a read was made (entering the block waits for the first, bounded).
        self.tried = False
        #: When the next read is due, and when to give up (monotonic seconds; set by `begin`).
        self.next_at = 0.0
        self.deadline = 0.0
        #: Why the last read did not find it.
        self.why = ""

    def begin(self, now: float) -> None:
        """Entering the block: the first read is due now, the last `LOOKUP_TIMEOUT` from now."""
        self.next_at = now
        self.deadline = now + LOOKUP_TIMEOUT

    def after(self, seen: Seen, now: float) -> Identity | str | None:
        """What a read says: the identity; why it gives up (a `str`, for the one warning);
        `None`: not yet, read again at `next_at`."""
        self.tried = True
        if seen.identity is not None:
            return seen.identity
        self.why = seen.why
        left = self.deadline - now
        if seen.final or left <= 0:
            return _given_up(seen.why if seen.final else f"after {LOOKUP_TIMEOUT:g}s, {seen.why}")
        self.next_at = now + min(LOOKUP_EVERY, left)
        return None

    def unfound(self) -> str:
        """Why it was not found, when the block ends before it gave up."""
        return _given_up(f"the block ended before this pod's identity was found: {self.why}")


def read(lookup: Lookup) -> Identity | str | None:
    """One read of the Lease with the sync client (`Lookup.after` says what it gives; on giving
    up the client is closed). One request, bounded by `REQUEST_TIMEOUT`; never raises."""
    target = lookup.target
    try:
        if lookup.client is None:
            config = KubeConfig.from_env()
            lookup.client = Client(config, namespace=target.namespace, timeout=_timeout())
        seen = judge(target, lookup.client.get(Lease, target.pod, namespace=target.namespace))
    except Exception as error:
        seen = _failed(target, lookup, error)
    found = lookup.after(seen, time.monotonic())
    if isinstance(found, str) and lookup.client is not None:
        lookup.client.close()
    return found


async def aread(lookup: Lookup) -> Identity | str | None:
    """`read`, with the async client, never blocking the event loop."""
    target = lookup.target
    try:
        if lookup.client is None:
            config = KubeConfig.from_env()
            lookup.client = AsyncClient(config, namespace=target.namespace, timeout=_timeout())
        lease = await lookup.client.get(Lease, target.pod, namespace=target.namespace)
        seen = judge(target, lease)
    except Exception as error:
        seen = _failed(target, lookup, error)
    found = lookup.after(seen, time.monotonic())
    if isinstance(found, str) and lookup.client is not None:
        await lookup.client.close()
    return found


def _failed(target: Target, lookup: Lookup, error: BaseException) -> Seen:
    """What a read that raised says: without a client, that there is no config to make one."""
    if lookup.client is None:
        return Seen(why=f"no Kubernetes config to read {target.where} with: {error}", final=True)
    return judge(target, None, error)
