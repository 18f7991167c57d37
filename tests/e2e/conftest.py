"""The local HTTP server on a free port, over this process's embedded DynamoDB, and a
caller that speaks to it with a real HTTP client."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
import json
import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import threading
from typing import Any
import urllib.error
import urllib.request
import uuid

import pytest

from local import embedded, server, template
from local.tokens import demo_token

START_SECONDS = 60  # a cold interpreter on a busy CI machine; usually two or three
STORE_LINE = re.compile(r"Embedded DynamoDB and SQS on (http://127\.0\.0\.1:\d+)")
API_LINE = re.compile(r"Recall API ready on (http://127\.0\.0\.1:\d+)")


@dataclass
class DevServer:
    """A running ``python -m local.server`` and everything it has printed so far."""

    process: subprocess.Popen[str]
    url: str
    store: str
    lines: list[str]


@contextmanager
def dev_process(
    environment: dict[str, str],
    data: Path,
    *,
    stop: bool = True,
    command: tuple[str, ...] = (sys.executable, "-m", "local.server"),
) -> Iterator[DevServer]:
    """``python -m local.server`` (what ``make dev`` runs), or ``command``, in a subprocess
    with ``environment`` added, keeping its data in ``data``, ready to answer. On leaving it
    is terminated as Ctrl-C would, with all it started (``stop``; else the caller has ended
    it) and must exit 0."""
    shell = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    process = subprocess.Popen(  # noqa: S603 (our own interpreter, or make, fixed arguments)
        command,
        cwd=template.ROOT,
        # PORT 0: the server binds a free port and names it. One picked here could be taken
        # by another process (another xdist worker's server) before the server listens.
        env={**shell, **environment, "PORT": "0", "LOCAL_DATA_DIR": str(data)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: make and the server it runs
    )
    assert process.stdout is not None
    stdout = process.stdout
    seen: list[str] = []  # every line, appended by the pump for as long as the server runs
    ready = threading.Event()

    def pump() -> None:
        for line in stdout:
            seen.append(line)
            if API_LINE.search(line):
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        if not ready.wait(START_SECONDS):
            pytest.fail(f"no ready line within {START_SECONDS} s: {seen}")
        store = next(found[1] for line in list(seen) if (found := STORE_LINE.search(line)))
        url = next(found[1] for line in list(seen) if (found := API_LINE.search(line)))
        yield DevServer(process, url, store, seen)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    if stop:
        assert process.returncode == 0, "".join(seen[-40:])


@pytest.fixture(scope="session", autouse=True)
def store_for_every_test(embedded_store: embedded.EmbeddedStore) -> embedded.EmbeddedStore:
    return embedded_store


@dataclass
class Answer:
    """An HTTP response, its JSON body decoded."""

    status: int
    headers: dict[str, str]
    body: Any


class Caller:
    """Sends requests to the local API as one user (``sub``), or with no token at all."""

    def __init__(self, base_url: str, sub: str | None) -> None:
        self.base_url = base_url
        self.sub = sub

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 (always http://127.0.0.1)
            self.base_url + path, data=data, method=method, headers=dict(headers or {})
        )
        if data is not None and not request.has_header("Content-type"):
            request.add_header("Content-Type", "application/json")
        if self.sub is not None:
            request.add_header("Authorization", f"Bearer {demo_token(self.sub)}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                return self._answer(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as error:
            return self._answer(error.code, dict(error.headers), error.read())

    @staticmethod
    def _answer(status: int, headers: dict[str, str], payload: bytes) -> Answer:
        return Answer(status, headers, json.loads(payload) if payload else None)

    def get(self, path: str, **kwargs: Any) -> Answer:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Answer:
        return self.request("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Answer:
        return self.request("PUT", path, body, **kwargs)


@pytest.fixture(scope="session")
def local_api(embedded_store: embedded.EmbeddedStore) -> Iterator[server.LocalApi]:
    api = server.serve(0, store=embedded_store)
    yield api
    api.stop()


@pytest.fixture
def caller(local_api: server.LocalApi) -> Callable[[str | None], Caller]:
    """Makes callers: ``caller(None)`` sends no token, ``caller("x")`` is user x."""

    def make(sub: str | None) -> Caller:
        return Caller(local_api.url, sub)

    return make


@pytest.fixture
def owner(caller: Callable[[str | None], Caller]) -> Caller:
    return caller(f"owner-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def stranger(caller: Callable[[str | None], Caller]) -> Caller:
    return caller(f"stranger-{uuid.uuid4().hex[:12]}")
