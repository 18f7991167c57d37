"""A Bedrock runtime client with fake credentials and its Stubber, which checks every
request against the real service model and fails a test that leaves a response unused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
from botocore.stub import Stubber
import pytest


@pytest.fixture
def client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


@pytest.fixture
def stubber(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()
