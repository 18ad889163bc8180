"""Fixtures for the tests against a real API server: its admin client and the CRDs (once), and
per test a fresh namespace watched by an operator of its own (the binary, as a subprocess).

Needs TEST_KUBECONFIG (a cluster with fake nodes: `make cluster-up`) and the operator binary
(AGENT_SUPERVISOR_BIN, default target/debug/agent-supervisor); fails, never skips, without them.
`hack/sdk.sh cluster` runs these tests.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace, ServiceAccount

from harness import REACT, REPO, TestNamespace, wait_for

CRDS = ("agents", "restartpolicies", "agentgroups")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Keeps each phase's report on the test, so a fixture's teardown knows if the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def kubeconfig() -> Path:
    """The admin kubeconfig of the cluster under test."""
    path = os.environ.get("TEST_KUBECONFIG")
    if not path:
        pytest.fail(
            "TEST_KUBECONFIG is not set: these tests need a cluster (make cluster-up; "
            "TEST_KUBECONFIG=target/cluster/kubeconfig) and run by `hack/sdk.sh cluster`",
            pytrace=False,
        )
    if not Path(path).is_file():
        pytest.fail(f"TEST_KUBECONFIG={path} is not a file", pytrace=False)
    return Path(path).resolve()


@pytest.fixture(scope="session")
def operator_binary() -> Path:
    """The operator binary under test."""
    binary = Path(
        os.environ.get("AGENT_SUPERVISOR_BIN", REPO / "target" / "debug" / "agent-supervisor")
    )
    if not os.access(binary, os.X_OK):
        pytest.fail(
            f"no operator binary at {binary}: run cargo build (or set AGENT_SUPERVISOR_BIN)",
            pytrace=False,
        )
    return binary


@pytest.fixture(scope="session")
def admin(kubeconfig: Path) -> Iterator[Client]:
    """A client of the cluster's admin; the CRDs from crds/ installed and established."""
    client = Client(KubeConfig.from_file(kubeconfig), field_manager="agent-supervisor-tests")
    # A field manager of its own, never forced: CRDs that differ from crds/ (a cluster whose
    # other tests installed a newer schema) fail here instead of being changed under them.
    applied = subprocess.run(
        [
            *("kubectl", "--kubeconfig", str(kubeconfig), "apply", "--server-side"),
            *("--field-manager=agent-supervisor-sdk-tests", "-f", REPO / "crds"),
        ],
        capture_output=True,
        text=True,
    )
    if applied.returncode != 0:
        pytest.fail(
            f"cannot apply the CRDs from crds/ (make crds; or the cluster has others):\n"
            f"{applied.stderr}",
            pytrace=False,
        )

    def established(name: str) -> bool:
        crd = client.get(CustomResourceDefinition, f"{name}.supervisor.dev")
        conditions = (crd.status.conditions if crd.status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    for name in CRDS:
        wait_for(f"CRD {name} to be established", lambda n=name: established(n), timeout=30)
    yield client
    client.close()


@pytest.fixture
def ns(
    admin: Client,
    kubeconfig: Path,
    operator_binary: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[TestNamespace]:
    """A fresh namespace (deleted after), watched by an operator of its own (stopped after)."""
    name = f"sdk-{secrets.token_hex(4)}"
    admin.create(
        Namespace.from_dict({"metadata": {"name": name, "labels": {"supervisor.dev/test": "true"}}})
    )
    operator: subprocess.Popen[bytes] | None = None
    log = tmp_path / "operator.log"
    test = TestNamespace(admin, name, tmp_path, kubeconfig)
    try:
        wait_for(
            "the namespace's default ServiceAccount",
            lambda: _exists(admin, ServiceAccount, "default", name),
            timeout=30,
        )
        operator = _start_operator(operator_binary, kubeconfig, name, log)
        yield test
    finally:
        for run in test.runs:
            run.stop()
        if operator is not None:
            _stop(operator)
        report = getattr(request.node, "report_call", None)
        if report is None or report.failed:
            _tell(log, test)
        try:
            admin.delete(Namespace, name)
        except ApiError as error:
            print(f"cannot delete namespace {name}: {error.status.message}")


def _exists(client: Client, kind: type, name: str, namespace: str) -> bool:
    try:
        client.get(kind, name, namespace=namespace)
    except ApiError as error:
        if error.status.code == 404:
            return False
        raise
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_operator(
    binary: Path, kubeconfig: Path, namespace: str, log: Path
) -> subprocess.Popen[bytes]:
    """The operator, watching `namespace` only, once /readyz answers."""
    port = _free_port()
    with log.open("w") as stderr:
        operator = subprocess.Popen(
            [
                str(binary),
                f"--namespaces={namespace}",
                "--leader-elect=false",
                f"--metrics-addr=127.0.0.1:{port}",
                "--status-addr=",
                "--status-interval=500ms",
            ],
            env={
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "HOSTNAME": f"sdk-tests-{namespace}",
                "RUST_LOG": "info,kube=warn",
                "NO_COLOR": "1",
            },
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )

    def ready() -> bool:
        if operator.poll() is not None:
            raise AssertionError(f"the operator exited with {operator.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for("the operator to be ready", ready, timeout=30)
    except AssertionError:
        _stop(operator)
        raise
    return operator


def _stop(operator: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the operator's pid, as Kubernetes stops a pod; SIGKILL if it does not stop."""
    operator.terminate()
    try:
        operator.wait(timeout=REACT)
    except subprocess.TimeoutExpired:
        operator.kill()
        operator.wait()


def _tail(path: Path, lines: int = 60) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _tell(log: Path, test: TestNamespace) -> None:
    """What the operator and the agents said, for a failed test's report."""
    print(f"--- operator log ({log}), last lines:\n{_tail(log)}")
    for run in test.runs:
        print(f"--- pod {run.pod}: podrun and the agent:\n{run.text()}")
