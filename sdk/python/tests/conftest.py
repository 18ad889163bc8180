"""Fixtures: an agent's environment in a pod the operator runs (with the Lease API stood in for
in-process), and on a laptop (nothing supervises it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_supervisor import _sandbox
from fake_apiserver import FakeApiServer

NAMESPACE = "team"
LEASE = "agent-7"
POD = "agent-7-3"
#: An agent-sandbox Sandbox's name: its pod's hostname, and its Lease's name.
SANDBOX = "box"
#: A short stand-in for `LOOKUP_TIMEOUT` where a test waits it out (`give_up_soon`).
GIVE_UP = 1.5
#: How the attempt before ended, as the operator injects it.
LAST_FAILURE = '{"attempt": 3, "reason": "OOMKilled", "class": "Transient", "exitCode": 137}'

AGENT_VARIABLES = (
    "AGENT_NAME",
    "AGENT_NAMESPACE",
    "AGENT_POD_NAME",
    "AGENT_RESTART_COUNT",
    "AGENT_LAST_FAILURE_REASON",
    "AGENT_LAST_FAILURE",
    "AGENT_HEARTBEAT_LEASE",
    "AGENT_CHECKPOINT",
    "AGENT_PROGRESS",
    "AGENT_TERMINATION_LOG",
    "AGENT_HOLDER",
)


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        fake.add_lease(NAMESPACE, LEASE, duration=30)
        yield fake


@pytest.fixture
def laptop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No AGENT_* variables and no cluster; returns where a termination log would go."""
    for key in AGENT_VARIABLES:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    return tmp_path / "termination-log"


@pytest.fixture
def kubeconfig(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, apiserver: FakeApiServer, laptop: Path
) -> Path:
    """No AGENT_* variables, a kubeconfig for the stand-in API server; returns the termination
    log's path."""
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": apiserver.url}}],
        "users": [{"name": "agent", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "agent"}}],
        "current-context": "fake",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(path))
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    return laptop


@pytest.fixture
def pod(monkeypatch: pytest.MonkeyPatch, kubeconfig: Path) -> Path:
    """The variables the operator sets, a kubeconfig for the stand-in API server; returns the
    termination log's path."""
    laptop = kubeconfig
    env = {
        "AGENT_NAME": LEASE,
        "AGENT_NAMESPACE": NAMESPACE,
        "AGENT_POD_NAME": POD,
        "AGENT_RESTART_COUNT": "3",
        "AGENT_LAST_FAILURE_REASON": "OOMKilled",
        "AGENT_LAST_FAILURE": LAST_FAILURE,
        "AGENT_HEARTBEAT_LEASE": LEASE,
        "AGENT_CHECKPOINT": "s3://bucket/run-7/step-100",
        "AGENT_PROGRESS": "100",
        "AGENT_TERMINATION_LOG": str(laptop),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return laptop


@pytest.fixture
def service_account(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A pod's mounted token and namespace, the API server's address in the environment, and
    the pod's hostname (the Sandbox's name)."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("t")
    (account / "namespace").write_text(NAMESPACE)
    monkeypatch.setattr(_sandbox, "SERVICE_ACCOUNT", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("HOSTNAME", SANDBOX)
    return account


@pytest.fixture
def sandbox(kubeconfig: Path, service_account: Path) -> Path:
    """An agent-sandbox Sandbox's pod: a token, no AGENT_* variables. (The client reaches the
    stand-in API server through $KUBECONFIG: lightkube's own service-account path is not
    there.) Returns where a termination log would go."""
    return kubeconfig


@pytest.fixture
def give_up_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Sandbox pod's identity is looked for `GIVE_UP` seconds, not `LOOKUP_TIMEOUT`."""
    monkeypatch.setattr(_sandbox, "LOOKUP_TIMEOUT", GIVE_UP)
