"""The client boundary: the heartbeat Lease, read and patched with lightkube.

Every write is a JSON merge patch of only the fields it means (the renewal: `spec.holderIdentity`
and `spec.renewTime`; a report: its annotations as well), so a renewal never carries a stale
report and two writers never undo each other. Each call is one request with a bounded timeout:
the supervisors' background sender decides when to try again (`retry_wait`), building each try
afresh, so a retried write carries a fresh `renewTime`, never its original.
"""

from __future__ import annotations

from typing import Any

import httpx2  # lightkube's own HTTP client: its network errors are these
from lightkube import ApiError, AsyncClient, Client, ConfigError, KubeConfig
from lightkube.resources.coordination_v1 import Lease
from lightkube.types import PatchType

#: Waits before trying a write again: a conflict (409) this many seconds a failure in a row...
_CONFLICT_WAIT = 0.05
#: ... throttling, server and network errors this many, doubling with each failure in a row
#: (capped by the caller at its renewal interval).
_BACKOFF = 0.25
_RETRIED_STATUS = frozenset({409, 429, 500, 502, 503, 504})
#: One request's timeout, in seconds (connect, read, write). It bounds what an API server that
#: accepts connections and never answers costs: the start-up wait (`START_TIMEOUT`) and a close
#: (`CLOSE_TIMEOUT`) never wait longer than theirs for it, and reports never wait for it at all.
#: Longer, a stalled request would hold back the renewals behind it for longer (a heartbeat
#: timeout is at least a few times the renewal interval); much shorter, a slow but working API
#: server would be given up on.
REQUEST_TIMEOUT = 5.0


def status_of(error: BaseException) -> int | None:
    """The HTTP status of an API error, if it is one."""
    if isinstance(error, ApiError):
        return error.response.status_code if error.response is not None else error.status.code
    return None


def retry_wait(error: BaseException, tried: int) -> float | None:
    """How long to wait before trying again after `error`, the `tried`-th failure in a row (from
    1), or `None`: not soon (the caller tries again at its next renewal).
    """
    status = status_of(error)
    if status == 409:
        return _CONFLICT_WAIT * tried
    if status in _RETRIED_STATUS or isinstance(error, httpx2.TransportError):
        return float(_BACKOFF * 2 ** (tried - 1))
    return None


def explain(error: BaseException, lease: str, namespace: str) -> str:
    """What went wrong with the Lease, and what a person can do about it."""
    status = status_of(error)
    where = f"Lease {namespace}/{lease}"
    if status in (401, 403):
        return (
            f"may not update {where} ({status}): the operator grants the pod's ServiceAccount "
            "get, update and patch on it unless it runs with --manage-agent-rbac=false; then "
            "grant them yourself"
        )
    if status == 404:
        return f"{where} does not exist: does the Agent set spec.heartbeat?"
    if isinstance(error, ApiError):
        return f"{where}: {status} {error.status.message}"
    return f"{where}: {type(error).__name__}: {error}"


def config() -> KubeConfig:
    """In a pod the in-cluster config, elsewhere the standard kubeconfig."""
    try:
        return KubeConfig.from_env()
    except ConfigError as error:
        raise ConfigError(
            f"AGENT_HEARTBEAT_LEASE is set but there is no Kubernetes config ({error}): in a pod "
            "the service account's token must be mounted (automountServiceAccountToken not "
            "false); elsewhere set KUBECONFIG, or unset AGENT_HEARTBEAT_LEASE to run unsupervised"
        ) from error


class LeaseApi:
    """One agent's heartbeat Lease, through lightkube's sync `Client`."""

    def __init__(self, name: str, namespace: str | None, client: Client | None = None) -> None:
        self.name = name
        self.client = client or Client(
            config(), namespace=namespace, timeout=httpx2.Timeout(REQUEST_TIMEOUT)
        )
        self.namespace = namespace or self.client.namespace

    def duration(self) -> int | None:
        """The Lease's `spec.leaseDurationSeconds`: the heartbeat timeout, as the operator sets."""
        lease = self.client.get(Lease, self.name, namespace=self.namespace)
        return lease.spec.leaseDurationSeconds if lease.spec else None

    def patch(self, body: dict[str, Any]) -> None:
        """Merge-patches the Lease with `body`: one request."""
        self.client.patch(
            Lease, self.name, body, namespace=self.namespace, patch_type=PatchType.MERGE
        )

    def close(self) -> None:
        """Closes the client's connections."""
        self.client.close()


class AsyncLeaseApi:
    """One agent's heartbeat Lease, through lightkube's `AsyncClient`."""

    def __init__(self, name: str, namespace: str | None, client: AsyncClient | None = None) -> None:
        self.name = name
        self.client = client or AsyncClient(
            config(), namespace=namespace, timeout=httpx2.Timeout(REQUEST_TIMEOUT)
        )
        self.namespace = namespace or self.client.namespace

    async def duration(self) -> int | None:
        """The Lease's `spec.leaseDurationSeconds`: the heartbeat timeout, as the operator sets."""
        lease = await self.client.get(Lease, self.name, namespace=self.namespace)
        return lease.spec.leaseDurationSeconds if lease.spec else None

    async def patch(self, body: dict[str, Any]) -> None:
        """Merge-patches the Lease with `body`: one request."""
        await self.client.patch(
            Lease, self.name, body, namespace=self.namespace, patch_type=PatchType.MERGE
        )

    async def close(self) -> None:
        """Closes the client's connections."""
        await self.client.close()
