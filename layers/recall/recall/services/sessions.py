"""Sessions as a member and an operator see them: the member's list in a project, and the
prune-sessions job, which reads only the sessions that are due and ends those whose
member has been idle, giving extraction its turn for what they said."""

from __future__ import annotations

from datetime import datetime

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.jobs import ExtractJob
from recall.domain.sessions import Session
from recall.observability import logger
from recall.services.access import ProjectAccess
from recall.settings import Settings
from recall.store.conversations import ConversationStore
from recall.store.jobs import JobQueue
from recall.store.sessions import DueSession, SessionStore
from recall.store.usage import UsageStore


class SessionService:
    def __init__(
        self,
        settings: Settings,
        access: ProjectAccess,
        sessions: SessionStore,
        usage: UsageStore,
        conversations: ConversationStore,
        queue: JobQueue,
    ) -> None:
        self._settings = settings
        self._access = access
        self._sessions = sessions
        self._usage = usage
        self._conversations = conversations
        self._queue = queue

    def page(
        self, user_id: str, project_id: str, limit: int, cursor: str | None, now: datetime
    ) -> tuple[list[Session], str | None]:
        """The caller's sessions in the project, newest first: the live one (with what its
        turns added up to so far, which their usage item counts) before the ended ones."""
        self._access.require(user_id, project_id, Role.VIEWER)
        sessions, next_cursor = self._sessions.page(user_id, project_id, limit, cursor)
        if sessions and sessions[0].live:
            tally = self._usage.get(user_id, project_id, now).session
            if tally is not None and tally.started_at == sessions[0].started_at:
                sessions[0] = sessions[0].model_copy(
                    update={
                        "last_turn_at": tally.last_turn_at,
                        "turns": tally.turns,
                        "tokens": tally.tokens,
                    }
                )
        return sessions, next_cursor

    def prune(self, now: datetime) -> tuple[int, int]:
        """``(read, changed)``: each due session ended (its member idle since its last turn
        for the idle time and the grace), moved on (they turned since), or, ended already
        by the turn that started their next one, let out of the index; an ended one's
        threads get their extraction first."""
        read = changed = 0
        for due in self._sessions.due(now):
            read += 1
            changed += self._settle(due, now)
        return read, changed

    def _settle(self, due: DueSession, now: datetime) -> bool:
        session = due.session
        if not session.live:
            self._extract(session)
            return self._sessions.settle(due)
        tally = self._usage.get(session.user_id, session.project_id, now).session
        if tally is not None and tally.started_at == session.started_at:
            can_end = self._sessions.due_at(tally)
            if clock.parse(can_end) > now:
                return self._sessions.postpone(due, can_end)
        ended = self._sessions.ended(session, tally, now)
        self._extract(ended)
        if not self._sessions.end(due, ended):
            return False
        logger.info("session ended", extra={"turns": ended.turns, "tokens": ended.tokens})
        return True

    def _extract(self, session: Session) -> None:
        """Queue extraction for the session's threads that hold signals no extraction read
        (each job checks its own gates: length, cooldown, the member's role)."""
        threads = self._conversations.signalled_between(
            session.user_id,
            session.project_id,
            session.started_at,
            session.last_turn_at or session.ended_at or session.started_at,
            self._settings.session_extract_max_threads,
        )
        if threads:
            self._queue.send(
                [
                    ExtractJob(
                        user_id=session.user_id,
                        project_id=session.project_id,
                        conversation_id=thread,
                    )
                    for thread in threads
                ]
            )
