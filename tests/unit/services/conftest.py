"""Service tests run on in-memory stores: any call that would reach AWS fails the test, and
the metrics a service records are dropped after each one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.client import BaseClient
import pytest

from recall.observability import metrics


def _no_aws(client: BaseClient, operation: str, params: Any) -> Any:
    raise AssertionError(f"a service unit test called AWS ({operation}); use the in-memory stores")


@pytest.fixture(autouse=True)
def no_aws_and_fresh_metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(BaseClient, "_make_api_call", _no_aws)
    yield
    metrics.clear_metrics()
