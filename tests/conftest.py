"""What every folder may share: the embedded DynamoDB (moto's server) a test process
starts, tables made from template.yaml. Under pytest-xdist (``make test``) each worker is a
process of its own, so each has its own store, on a port the system picks.

It is not autouse, and moto is imported only when it starts, so the unit tests run
without it; ``tests/integration`` and ``tests/e2e`` make it autouse for their tests.
Each test isolates itself with fresh user and project ids."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import os
import time
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from local.embedded import EmbeddedStore

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def embedded_store() -> Iterator[EmbeddedStore]:
    from local import embedded  # here, not at the top: unit tests never load moto

    with embedded.running() as store:
        yield store


def wait_for(check: Callable[[], Any], seconds: float, what: str) -> Any:
    """``check()``'s first truthy value, polled until a deadline; fails the test after it,
    so no wait on background work can hang a run."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s: {what}")
        time.sleep(0.1)
