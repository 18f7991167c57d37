"""Sessions: a member's periods of activity in a project.

A session starts with a turn that comes ``SESSION_IDLE_SECONDS`` (24 h) or more after the
member's last turn in the project (or with their first), and ends when that long passes
with no turn: it ends at its last turn plus the idle time. Its item is written once, when
it starts. What it adds up to while it runs (its turns, its tokens, its last turn) rides on
the member's monthly usage item, which every turn writes anyway, as a ``SessionTally``;
whoever ends the session (the prune-sessions job, or the turn that starts the next one)
copies the tally onto the session's item.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel

from recall.domain import clock


class Session(BaseModel):
    """One session as stored. A live one has no ``ended_at``; its counts are on the tally."""

    user_id: str
    project_id: str
    started_at: str
    ended_at: str | None = None
    last_turn_at: str | None = None
    turns: int = 0
    tokens: int = 0

    @property
    def live(self) -> bool:
        return self.ended_at is None


@dataclass(frozen=True)
class SessionTally:
    """The member's current session as their usage item counts it."""

    started_at: str
    last_turn_at: str
    turns: int
    tokens: int

    def ends_at(self, idle: timedelta) -> str:
        """When the session ends unless another turn comes first."""
        return clock.stamp(clock.parse(self.last_turn_at) + idle)

    def idle_at(self, now: datetime, idle: timedelta) -> bool:
        return now - clock.parse(self.last_turn_at) >= idle

    def ended(self, session: Session, idle: timedelta) -> Session:
        """``session`` (this tally's) as ended: its counts, and its end at the last turn
        plus the idle time."""
        return session.model_copy(
            update={
                "ended_at": self.ends_at(idle),
                "last_turn_at": self.last_turn_at,
                "turns": self.turns,
                "tokens": self.tokens,
            }
        )


@dataclass(frozen=True)
class SessionStep:
    """What one turn does to the member's sessions: the tally it leaves, over the one it
    read (``read``; ``carried`` when that was last month's, so this month's item starts
    it); with ``started`` it begins a session, and ``ends`` is the previous one it ends
    (``None``: none, or it ended already)."""

    tally: SessionTally
    read: SessionTally | None
    carried: bool
    started: bool
    ends: SessionTally | None


def session_step(
    read: SessionTally | None,
    carried: bool,
    at: datetime,
    turns: int,
    tokens: int,
    idle: timedelta,
    previous_ended: bool = False,
) -> SessionStep:
    """A turn at ``at`` adding ``turns`` and ``tokens``: it continues the session the member
    is in, or, when there is none or the last turn was ``idle`` or more ago, starts one and
    ends that one (unless ``previous_ended``: the prune job ended it already)."""
    stamp = clock.stamp(at)
    if read is not None and not read.idle_at(at, idle):
        tally = SessionTally(read.started_at, stamp, read.turns + turns, read.tokens + tokens)
        return SessionStep(tally, read, carried, started=False, ends=None)
    tally = SessionTally(stamp, stamp, turns, tokens)
    ends = None if read is None or previous_ended else read
    return SessionStep(tally, read, carried, started=True, ends=ends)
