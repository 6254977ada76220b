"""Clients of the fault test: every call retried until it succeeds, every failure recorded
with its time, so the test can tell when the deployment refused work."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

RETRYABLE = {502, 503, 504}


@dataclass
class Failures:
    """Failed attempts (retried) and calls that never succeeded, shared by all clients."""

    seen: list[tuple[float, str]] = field(default_factory=list)  # (monotonic time, what)
    gave_up: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, what: str) -> None:
        with self.lock:
            self.seen.append((time.monotonic(), what))


class RetryingClient:
    """An httpx client through the load balancer that retries refused or broken calls."""

    def __init__(self, url: str, token: str, failures: Failures, give_up_s: float = 120.0):
        headers = {"Authorization": f"Bearer {token}"}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=60.0)
        self.failures = failures
        self.give_up_s = give_up_s

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The first answer that is not a gateway error; retries connection errors too."""
        deadline = time.monotonic() + self.give_up_s
        while True:
            try:
                response = self.http.request(method, path, **kwargs)
                if response.status_code not in RETRYABLE:
                    return response
                what = f"{method} {path}: {response.status_code}"
            except httpx.TransportError as exc:
                what = f"{method} {path}: {exc!r}"
            self.failures.failed(what)
            if time.monotonic() > deadline:
                self.failures.gave_up.append(what)
                raise AssertionError(f"gave up: {what}")
            time.sleep(0.05)  # a backoff between retries, not a wait for a state

    def infer(self, model: str, input_name: str, data: np.ndarray) -> tuple[np.ndarray, str]:
        """One JSON-tensor /v2 call; the output and the replica that answered."""
        body = {
            "inputs": [
                {"name": input_name, "shape": list(data.shape), "datatype": "FP32",
                 "data": data.ravel().tolist()}
            ]
        }  # fmt: skip
        response = self.call("POST", f"/v2/models/{model}/infer", json=body)
        assert response.status_code == 200, response.text
        out = response.json()["outputs"][0]
        return np.array(out["data"], dtype=np.float32).reshape(out["shape"]), response.headers[
            "x-pteforge-replica"
        ]

    def close(self) -> None:
        self.http.close()
