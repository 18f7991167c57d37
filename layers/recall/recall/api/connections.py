"""How the WebSocket functions reach out: frames to a client through API Gateway's
management API (``POST /@connections/{connectionId}``, and ``DELETE`` to close one), and a
turn handed to the streaming worker as an asynchronous Lambda invocation, so it may
outlive API Gateway's 29-second integration limit. ``make dev`` and tests put in-process
links in front with ``use``."""

from __future__ import annotations

from functools import lru_cache
import json
from typing import TYPE_CHECKING, Any, Protocol

import boto3
from botocore.exceptions import ClientError

from recall.api.stream import Connection, ConnectionGone, Frame

# The management API's client has no type stubs installed; its calls are post_to_connection
# and delete_connection.
ManagementClient = Any

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient


class StreamLinks(Protocol):
    def connection(self, domain: str, stage: str, connection_id: str) -> Connection:
        """The client on ``connection_id`` of the API at ``domain``/``stage``."""

    def hand_off(self, payload: dict[str, Any]) -> None:
        """Start the streaming worker on ``payload`` and return at once."""


class ManagedConnection:
    """One client, posted to through the management API."""

    def __init__(self, client: ManagementClient, connection_id: str) -> None:
        self._client = client
        self._connection_id = connection_id

    def post(self, frame: Frame) -> None:
        data = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode()
        try:
            self._client.post_to_connection(ConnectionId=self._connection_id, Data=data)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "GoneException":
                raise ConnectionGone(self._connection_id) from exc
            raise

    def close(self) -> None:
        """API Gateway closes the socket (status 1000) and sends ``$disconnect``."""
        try:
            self._client.delete_connection(ConnectionId=self._connection_id)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "GoneException":
                raise


@lru_cache(maxsize=8)
def _management_client(endpoint: str) -> ManagementClient:
    return boto3.client("apigatewaymanagementapi", endpoint_url=endpoint)


class AwsLinks:
    """The deployed links: the management API at ``https://{domain}/{stage}`` and Lambda's
    ``Invoke`` with ``InvocationType=Event`` on the streaming worker."""

    def __init__(
        self,
        function_name: str,
        lambda_client: LambdaClient | None = None,
        management_client: ManagementClient | None = None,
    ) -> None:
        self._function_name = function_name
        self._lambda = lambda_client
        self._management = management_client

    def connection(self, domain: str, stage: str, connection_id: str) -> Connection:
        client = self._management or _management_client(f"https://{domain}/{stage}")
        return ManagedConnection(client, connection_id)

    def hand_off(self, payload: dict[str, Any]) -> None:
        if self._lambda is None:
            self._lambda = boto3.client("lambda")
        self._lambda.invoke(
            FunctionName=self._function_name,
            InvocationType="Event",
            Payload=json.dumps(payload, ensure_ascii=False).encode(),
        )


class LinkChoice:
    """The deployed links, unless ``use`` put others in front (``make dev``, tests)."""

    def __init__(self, deployed: StreamLinks) -> None:
        self._deployed = deployed
        self._chosen: StreamLinks | None = None

    def use(self, links: StreamLinks | None) -> None:
        self._chosen = links

    def connection(self, domain: str, stage: str, connection_id: str) -> Connection:
        return (self._chosen or self._deployed).connection(domain, stage, connection_id)

    def hand_off(self, payload: dict[str, Any]) -> None:
        (self._chosen or self._deployed).hand_off(payload)
