"""Who this agent is: the `AGENT_*` variables the operator puts in every container it runs (or,
in an agent-sandbox Sandbox's pod, on its Lease: `_sandbox`)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("agent_supervisor")

#: Where the kubelet reads a container's termination message unless its spec says otherwise.
DEFAULT_TERMINATION_LOG = "/dev/termination-log"


@dataclass(frozen=True)
class Outcome:
    """How the attempt before this one ended, as the operator recorded it (`AGENT_LAST_FAILURE`).

    `attempt`: its number; `reason`: why it ended (`Error`, `OOMKilled`, `HeartbeatLost`, ...;
    `""` if the operator did not say); `exit_code`: its container's exit code; `message`: its
    termination message or the operator's note; `klass`: how the operator classed the failure
    (`Transient`, `Permanent`, ...). A field the operator did not know is `None`.
    """

    attempt: int | None
    reason: str
    exit_code: int | None
    message: str | None
    klass: str | None

    @classmethod
    def parse(cls, text: str | None) -> Outcome | None:
        """Reads `AGENT_LAST_FAILURE`'s JSON (`{"attempt": 2, "reason": "Error", "class":
        "Transient", "exitCode": 3, "message": "..."}`, keys absent when unknown); `None` when
        empty (a first start). Never raises: what does not parse is logged once and is `None`."""
        if text is None or not text.strip():
            return None
        try:
            value = json.loads(text)
            if not isinstance(value, dict):
                raise ValueError("not a JSON object")
            return cls(
                attempt=_field(value, "attempt", int),
                reason=_field(value, "reason", str) or "",
                exit_code=_field(value, "exitCode", int),
                message=_field(value, "message", str),
                klass=_field(value, "class", str),
            )
        except ValueError as error:  # json.JSONDecodeError is one
            log.warning(
                "AGENT_LAST_FAILURE=%r is not what the operator writes (%s): ignored; "
                "sup.previous is None",
                text[:200],
                error,
            )
            return None


def _field(value: dict[str, Any], key: str, kind: type[Any]) -> Any:
    """`value[key]` if it is a `kind` (`None` when absent or null); `ValueError` otherwise."""
    found = value.get(key)
    if found is None:
        return None
    if isinstance(found, bool) or not isinstance(found, kind):
        raise ValueError(f"{key!r} is not a{'n' if kind is int else ''} {kind.__name__}")
    return found


@dataclass(frozen=True)
class Identity:
    """The agent's identity and what the operator handed this attempt."""

    name: str = ""
    namespace: str = ""
    pod_name: str = ""
    restart_count: int = 0
    last_failure_reason: str | None = None
    #: How the attempt before ended (`AGENT_LAST_FAILURE`); `None` on a first start.
    previous: Outcome | None = None
    #: The heartbeat Lease's name; `None` when nothing supervises heartbeats (no-op mode).
    lease: str | None = None
    checkpoint: str | None = None
    progress: int | None = None
    #: Where the termination message goes; `None` off-cluster, where nobody would read it.
    termination_log: str | None = None
    #: Who this attempt renews the Lease and reports spend as (`AGENT_HOLDER`, `box#3` in an
    #: agent-sandbox Sandbox, whose pods all have the same name); `""`: the pod's name.
    holder: str = ""

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
            previous=Outcome.parse(env.get("AGENT_LAST_FAILURE")),
            lease=text("AGENT_HEARTBEAT_LEASE"),
            checkpoint=text("AGENT_CHECKPOINT"),
            progress=number("AGENT_PROGRESS"),
            termination_log=termination_log,
            holder=text("AGENT_HOLDER") or "",
        )
