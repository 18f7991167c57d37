"""A chat turn's reads and writes span tables. Each table module builds its own keys and
items; this module only puts them into one ``BatchGetItem`` before the model is called
and one ``TransactWriteItems`` after it."""

from __future__ import annotations

from dataclasses import dataclass
import time
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from recall.domain.access import Role
from recall.domain.conversations import Conversation
from recall.domain.projects import Project
from recall.domain.session import Session
from recall.errors import Conflict, NotFound, Throttled
from recall.store.conversations import ConversationStore, conversation_from, conversation_key
from recall.store.dynamodb import Item, cancellation_codes, dynamodb_client, error_code, translate
from recall.store.projects import ProjectStore
from recall.store.sessions import SessionStore, session_from, session_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_UNPROCESSED_RETRIES = 5


@dataclass
class TurnReads:
    project: Project | None
    role: Role | None
    conversation: Conversation | None
    session: Session | None


class SessionChanged(Conflict):
    """Another turn on the same thread saved first; re-read and try again."""


class TurnStore:
    def __init__(
        self,
        projects: ProjectStore,
        conversations: ConversationStore,
        sessions: SessionStore,
        client: DynamoDBClient | None = None,
    ) -> None:
        self._projects = projects
        self._conversations = conversations
        self._sessions = sessions
        self._client = client

    @property
    def client(self) -> DynamoDBClient:
        return self._client or dynamodb_client()

    def read(
        self, user_id: str, project_id: str, conversation_id: str | None, thread: str | None
    ) -> TurnReads:
        """The project, the caller's role, the thread and its session: one request."""
        request: dict[str, Any] = {
            self._projects.table: {
                "Keys": self._projects.project_and_role_keys(project_id, user_id),
                "ConsistentRead": True,
            }
        }
        if conversation_id and thread:
            request[self._conversations.table] = {
                "Keys": [conversation_key(user_id, project_id, conversation_id)],
                "ConsistentRead": True,
            }
            request[self._sessions.table] = {"Keys": [session_key(thread)], "ConsistentRead": True}
        found: dict[str, list[Item]] = {}
        for attempt in range(_UNPROCESSED_RETRIES):
            result = self.client.batch_get_item(RequestItems=request)
            for table, items in result.get("Responses", {}).items():
                found.setdefault(table, []).extend(items)
            request = dict(result.get("UnprocessedKeys", {}))
            if not request:
                break
            time.sleep(min(0.05 * 2**attempt, 1.0))
        else:
            raise Throttled("The store is busy; try again shortly.")
        project, role = self._projects.read_project_and_role(found.get(self._projects.table, []))
        conversations = found.get(self._conversations.table, [])
        sessions = found.get(self._sessions.table, [])
        return TurnReads(
            project=project,
            role=role,
            conversation=conversation_from(conversations[0]) if conversations else None,
            session=session_from(sessions[0]) if sessions else None,
        )

    def write(
        self, items: list[dict[str, Any]], session_index: int, conversation_index: int
    ) -> None:
        """Everything a turn saves, or nothing. A lost race on the session is
        ``SessionChanged``; a thread deleted meanwhile is ``NotFound``."""
        try:
            self.client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise translate(exc) from exc
            codes = cancellation_codes(exc)
            if (
                len(codes) > conversation_index
                and codes[conversation_index] == "ConditionalCheckFailed"
            ):
                raise NotFound("The conversation was deleted.") from exc
            if len(codes) > session_index and codes[session_index] == "ConditionalCheckFailed":
                raise SessionChanged("Another turn saved first.") from exc
            raise translate(exc) from exc
