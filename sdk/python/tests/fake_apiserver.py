"""An in-process stand-in for the Kubernetes API, as far as a heartbeat Lease goes: GET and JSON
merge PATCH of Leases, over real HTTP on the loopback, so the SDK's real lightkube client is what
the tests exercise. It records every request and can be told to fail the next ones, or to stall:
accept requests and not answer them until released.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PREFIX = "/apis/coordination.k8s.io/v1/namespaces/"
MERGE_PATCH = "application/merge-patch+json"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass
class Request:
    method: str
    namespace: str
    name: str
    body: Any
    at: float


class FakeApiServer:
    """Leases by (namespace, name); `requests` in the order they came."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.failures: list[int] = []
        self.patch_failures: list[int] = []
        self.lock = threading.Lock()
        self.version = 0
        #: Cleared while stalled: requests are held, unanswered, until it is set again.
        self.answering = threading.Event()
        self.answering.set()
        #: Requests that came while stalled.
        self.stalled = 0
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        server.daemon_threads = True
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self.thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.answering.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def add_lease(
        self,
        namespace: str,
        name: str,
        duration: int | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        """A Lease as the operator makes it: its duration, no holder yet."""
        spec = {} if duration is None else {"leaseDurationSeconds": duration}
        with self.lock:
            self.version += 1
            self.leases[(namespace, name)] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "resourceVersion": str(self.version),
                    **({"annotations": dict(annotations)} if annotations else {}),
                },
                "spec": spec,
            }

    def annotate(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """Sets annotations on a Lease, as another writer (the operator) would."""
        with self.lock:
            self.version += 1
            metadata = self.leases[(namespace, name)]["metadata"]
            metadata.setdefault("annotations", {}).update(annotations)
            metadata["resourceVersion"] = str(self.version)

    def lease(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.leases[(namespace, name)])

    def fail_next(self, *codes: int) -> None:
        """Answer the next requests with these statuses, one each."""
        with self.lock:
            self.failures.extend(codes)

    def fail_next_patches(self, *codes: int) -> None:
        """Answer the next PATCHes (writes) with these statuses, one each; reads are answered."""
        with self.lock:
            self.patch_failures.extend(codes)

    def stall(self) -> None:
        """Accept requests and answer none of them (as an API server that hangs) until
        `answer()`."""
        self.answering.clear()

    def answer(self) -> None:
        """Answer again, the held requests first."""
        self.answering.set()

    def patches(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == "PATCH"]

    def requests_for(self, namespace: str, name: str) -> list[Request]:
        """The requests for one Lease."""
        with self.lock:
            return [r for r in self.requests if (r.namespace, r.name) == (namespace, name)]

    def _serve(
        self, method: str, path: str, content_type: str, body: bytes
    ) -> tuple[int, dict[str, Any]]:
        if not path.startswith(PREFIX):
            return 404, status(404, "NotFound", f"no route {path}")
        parts = path[len(PREFIX) :].split("/")
        if len(parts) != 3 or parts[1] != "leases":
            return 404, status(404, "NotFound", f"no route {path}")
        namespace, name = parts[0], parts[2].split("?")[0]
        with self.lock:
            parsed = json.loads(body) if body else None
            self.requests.append(Request(method, namespace, name, parsed, time.monotonic()))
            if self.failures:
                code = self.failures.pop(0)
                return code, status(code, "Injected", f"injected {code}")
            if method == "PATCH" and self.patch_failures:
                code = self.patch_failures.pop(0)
                return code, status(code, "Injected", f"injected {code}")
            lease = self.leases.get((namespace, name))
            if lease is None:
                return 404, status(404, "NotFound", f'leases "{name}" not found')
            if method == "GET":
                return 200, copy.deepcopy(lease)
            if method == "PATCH":
                if content_type != MERGE_PATCH:
                    return 415, status(415, "UnsupportedMediaType", content_type)
                self.version += 1
                patched = merge_patch(lease, parsed)
                patched["metadata"]["resourceVersion"] = str(self.version)
                self.leases[(namespace, name)] = patched
                return 200, copy.deepcopy(patched)
            return 405, status(405, "MethodNotAllowed", method)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                kind = (self.headers.get("Content-Type") or "").split(";")[0]
                if not fake.answering.is_set():
                    with fake.lock:
                        fake.stalled += 1
                    fake.answering.wait(60)
                code, payload = fake._serve(method, self.path, kind, body)
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_PATCH(self) -> None:
                self._answer("PATCH")

            def do_PUT(self) -> None:
                self._answer("PUT")

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def eventually(check: Any, timeout: float = 5.0) -> None:
    """Waits until `check()` is true, failing after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)
