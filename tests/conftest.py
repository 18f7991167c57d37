"""What every folder may share: the one embedded DynamoDB (moto's server) a run starts,
tables made from template.yaml.

It is not autouse, and moto is imported only when it starts, so the unit tests run
without it; ``tests/integration`` and ``tests/e2e`` make it autouse for their tests.
Each test isolates itself with fresh user and project ids."""

from __future__ import annotations

from collections.abc import Iterator
import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from local.embedded import EmbeddedStore

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def embedded_store() -> Iterator[EmbeddedStore]:
    from local import embedded  # here, not at the top: unit tests never load moto

    with embedded.running() as store:
        yield store
