"""The embedded AWS: moto's server on a loopback port serving DynamoDB, SQS and S3, with
every table, queue and bucket of ``template.yaml`` created from the template's own
definitions. Buckets live in memory only: make dev's snapshot keeps DynamoDB, not exports."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
import logging
import os
import socket
from typing import TYPE_CHECKING, cast

import boto3
from moto.server import ThreadedMotoServer

from local import dynamodb_writes, template

if TYPE_CHECKING:
    from mypy_boto3_sqs.literals import QueueAttributeNameType

MOTO_ACCOUNT = "123456789012"  # moto's default account id
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


@dataclass(frozen=True)
class LocalQueue:
    """A template queue as moto serves it."""

    name: str
    url: str
    arn: str


@dataclass
class EmbeddedStore:
    server: ThreadedMotoServer
    endpoint: str
    queues: dict[str, LocalQueue] = field(default_factory=dict)

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


def create_buckets(endpoint: str) -> None:
    """Every ``AWS::S3::Bucket`` of the template, named after its logical id. Their
    objects are links' targets only, so the template's lifecycle rule is not copied: the
    process that holds them lasts less than a day."""
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    existing = {bucket["Name"] for bucket in client.list_buckets().get("Buckets", [])}
    for name in template.bucket_names().values():
        if name not in existing:
            client.create_bucket(Bucket=name)


def create_queues(endpoint: str) -> dict[str, LocalQueue]:
    """Every ``AWS::SQS::Queue`` of the template, named after its logical id, with the
    attributes its properties declare; a dead-letter queue first, so the ``RedrivePolicy``
    that names it carries its local ARN."""
    client = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    made: dict[str, LocalQueue] = {}
    known: dict[tuple[str, str], str] = {}
    for name in template.queue_order():
        attributes = cast(
            "dict[QueueAttributeNameType, str]", template.queue_attributes(name, known)
        )
        url = client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        known[(name, "Arn")], known[(name, "QueueName")] = arn, name
        made[name] = LocalQueue(name, url, arn)
    return made


def queue_url(endpoint: str, name: str) -> str:
    """The URL moto gives a queue created through ``endpoint`` (its default account)."""
    return f"{endpoint}/{MOTO_ACCOUNT}/{name}"


def local_environment(endpoint: str, queues: dict[str, LocalQueue] | None = None) -> dict[str, str]:
    """What every function sees locally: its template environment (a table's ``!Ref`` is
    its local name, a queue's its local URL), fake credentials and the embedded endpoint for
    DynamoDB and SQS. All functions share Globals, so one environment serves them all.

    Only the template's variables are set: a setting the template does not name
    (``SESSION_IDLE_SECONDS``, ``LOCAL_SCHEDULE_SECONDS``…) comes from the process's own
    environment, so ``make dev``'s caller can shorten it."""
    urls = {name: queue_url(endpoint, name) for name in template.queue_names()}
    urls.update({name: queue.url for name, queue in (queues or {}).items()})
    env = dict(FAKE_AWS)
    for function in template.resources("AWS::Serverless::Function"):
        env.update(template.environment(function, LOCAL_PARAMETERS, urls))
    env["AWS_ENDPOINT_URL_DYNAMODB"] = endpoint
    env["AWS_ENDPOINT_URL_SQS"] = endpoint
    env["AWS_ENDPOINT_URL_S3"] = endpoint  # so an export's pre-signed URL names moto too
    return env


def start(port: int | None = None) -> EmbeddedStore:
    """Start moto, create the tables, queues and buckets, and point this process's AWS
    clients at it. Without a ``port`` the server binds one the system picks, so processes
    starting side by side (test workers) never race for the same one."""
    os.environ.update(FAKE_AWS)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    dynamodb_writes.install()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port or 0, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
    queues = create_queues(endpoint)
    os.environ.update(local_environment(endpoint, queues))
    from recall.settings import get_settings  # the layer is on sys.path once runtime loads

    get_settings.cache_clear()  # settings read before the store started named other tables
    create_tables(endpoint)
    create_buckets(endpoint)
    return EmbeddedStore(server, endpoint, queues)


@contextmanager
def running(port: int | None = None) -> Iterator[EmbeddedStore]:
    store = start(port)
    try:
        yield store
    finally:
        store.stop()
