"""The Conversations table as every part of the thread store sees it: the client, the
table's name, the condition a write into a live thread holds, and what a refused write
means. ``store/conversations.py`` puts the store together from its parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from recall.errors import Conflict, NotFound
from recall.settings import Settings
from recall.store.dynamodb import collided, dynamodb_client, translate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# A thread that exists and is not being deleted.
LIVE_THREAD = "attribute_exists(#sk) AND attribute_not_exists(#deleting)"
LIVE_THREAD_NAMES = {"#sk": "conversationId", "#deleting": "deleting"}
FAILED = "ConditionalCheckFailed"


class ConversationTable:
    """The client and table every part of ``ConversationStore`` writes through."""

    def __init__(self, settings: Settings, client: DynamoDBClient | None = None) -> None:
        self._table = settings.conversations_table
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    @property
    def table(self) -> str:
        return self._table


def missing_if_conflict(exc: ClientError) -> Exception:
    """A failed ``attribute_exists`` is a thread that is not there; a write that only met
    another transaction (a turn saving on the thread) is a ``Conflict`` to try again."""
    error = translate(exc)
    if isinstance(error, Conflict) and not collided(exc):
        return NotFound("No such conversation.")
    return error
