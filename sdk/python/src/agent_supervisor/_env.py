"""Who this agent is: the `AGENT_*` variables the operator puts in every container it runs."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger("agent_supervisor")

#: Where the kubelet reads a container's termination message unless its spec says otherwise.
DEFAULT_TERMINATION_LOG = "/dev/termination-log"


@dataclass(frozen=True)
class Identity:
    """The agent's identity and what the operator handed this attempt."""

    name: str = ""
    namespace: str = ""
    pod_name: str = ""
    restart_count: int = 0
    last_failure_reason: str | None = None
    #: The heartbeat Lease's name; `None` when nothing supervises heartbeats (no-op mode).
    lease: str | None = None
    checkpoint: str | None = None
    progress: int | None = None
    #: Where the termination message goes; `None` off-cluster, where nobody would read it.
    termination_log: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Identity:
        """Reads the identity from `environ` (default: the process's environment)."""
        env = os.environ if environ is None else environ

        def text(key: str) -> str | None:
            value = env.get(key, "").strip()
            return value or None

        def number(key: str) -> int | None:
            value = text(key)
            if value is None:
                return None
            if value.isascii() and value.isdigit():
                return int(value)
            log.warning("%s=%r is not a whole number: ignored", key, value)
            return None

        pod_name = text("AGENT_POD_NAME")
        # In a pod the operator runs, the kubelet reads /dev/termination-log (the default
        # terminationMessagePath); elsewhere only an explicit $AGENT_TERMINATION_LOG is written.
        termination_log = text("AGENT_TERMINATION_LOG") or (
            DEFAULT_TERMINATION_LOG if pod_name else None
        )
        return cls(
            name=text("AGENT_NAME") or "",
            namespace=text("AGENT_NAMESPACE") or "",
            pod_name=pod_name or "",
            restart_count=number("AGENT_RESTART_COUNT") or 0,
            last_failure_reason=text("AGENT_LAST_FAILURE_REASON"),
            lease=text("AGENT_HEARTBEAT_LEASE"),
            checkpoint=text("AGENT_CHECKPOINT"),
            progress=number("AGENT_PROGRESS"),
            termination_log=termination_log,
        )
