"""The embedded DynamoDB: moto's server on a loopback port, with every table of
``template.yaml`` created from the template's own definitions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
import logging
import os
import socket

import boto3
from moto.server import ThreadedMotoServer

from local import template

LOCAL_PARAMETERS = {"ModelProvider": "offline", "LogLevel": "WARNING"}

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
    "POWERTOOLS_DEV": "false",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class EmbeddedStore:
    server: ThreadedMotoServer
    endpoint: str

    def stop(self) -> None:
        self.server.stop()


def create_tables(endpoint: str) -> None:
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    existing = set(client.list_tables()["TableNames"])
    for request in template.create_table_requests():
        if request["TableName"] not in existing:
            client.create_table(**request)
    for table, attribute in template.time_to_live().items():
        client.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute},
        )


def local_environment(endpoint: str) -> dict[str, str]:
    """What every function sees locally: its template environment, fake credentials and the
    embedded endpoint. All functions share Globals, so one environment serves them all."""
    env = dict(FAKE_AWS)
    for function in template.resources("AWS::Serverless::Function"):
        env.update(template.environment(function, LOCAL_PARAMETERS))
    env["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    return env


def start(port: int | None = None) -> EmbeddedStore:
    """Start moto, create the tables and point this process's AWS clients at it."""
    os.environ.update(FAKE_AWS)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = port or free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(local_environment(endpoint))
    from recall.settings import get_settings  # the layer is on sys.path once runtime loads

    get_settings.cache_clear()  # settings read before the store started named other tables
    create_tables(endpoint)
    return EmbeddedStore(server, endpoint)


@contextmanager
def running(port: int | None = None) -> Iterator[EmbeddedStore]:
    store = start(port)
    try:
        yield store
    finally:
        store.stop()
