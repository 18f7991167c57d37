"""What a turn's memory tools change, held until the turn saves. The model reads each
call's result at once, but the entries land in the turn's own transaction: a turn that
fails, or is told 409, leaves no memory behind."""

from __future__ import annotations

from dataclasses import dataclass

from recall.domain.memory import MemoryEntry
from recall.errors import Conflict, Invalid


@dataclass(frozen=True)
class MemoryChange:
    """One entry's change: ``entry`` to write, or ``None`` to forget ``key`` in its scope
    (a thread's with ``conversation_id``, else persistent)."""

    key: str
    conversation_id: str | None
    entry: MemoryEntry | None

    @property
    def place(self) -> tuple[str, str | None]:
        return self.key, self.conversation_id


class TurnMemory:
    """The caller's active entries as the turn read them, and the changes its tools ask
    for: one per entry, the last call winning. Caps are judged against what the turn
    read; the transaction judges them again against what is stored when it lands.

    A save says nothing of expiry (the tool has no such field), so saving over an entry
    the turn read keeps that entry's expiry: restating a rule the user meant to end on
    Sunday does not make it permanent."""

    def __init__(
        self,
        persistent: list[MemoryEntry],
        thread: list[MemoryEntry],
        persistent_cap: int,
        thread_cap: int,
        changes_max: int,
    ) -> None:
        self._held = {(e.key, e.conversation_id) for e in (*persistent, *thread)}
        self._expiry = {(e.key, e.conversation_id): e.expires_at for e in (*persistent, *thread)}
        self._persistent_cap = persistent_cap
        self._thread_cap = thread_cap
        self._changes_max = changes_max
        self._changes: dict[tuple[str, str | None], MemoryChange] = {}

    def save(self, entry: MemoryEntry) -> None:
        place = (entry.key, entry.conversation_id)
        self._room_for(place)
        if entry.expires_at is None and self._holds(place):
            entry = entry.model_copy(update={"expires_at": self._expiry.get(place)})
        if place not in self._held and not self._holds(place):
            cap = self._cap(entry.conversation_id)
            if self._count(entry.conversation_id) >= cap:
                where = (
                    "your memory in this project"
                    if entry.conversation_id is None
                    else "this conversation"
                )
                raise Conflict(
                    f"Memory is full: {where} already holds {cap} {entry.scope} entries. "
                    f"Update or forget one before adding {entry.key!r}."
                )
        self._changes[place] = MemoryChange(entry.key, entry.conversation_id, entry)

    def forget(self, key: str, conversation_id: str | None) -> bool:
        """Whether there was an entry to forget: one the turn read, or one it saved."""
        place = (key, conversation_id)
        if not self._holds(place):
            return False
        if place in self._held:
            self._room_for(place)
            self._changes[place] = MemoryChange(key, conversation_id, None)
        else:
            del self._changes[place]
        return True

    def changes(self) -> list[MemoryChange]:
        return list(self._changes.values())

    def drop(self, change: MemoryChange) -> None:
        """Give up one change the store could not make (its scope filled meanwhile)."""
        self._changes.pop(change.place, None)

    def _holds(self, place: tuple[str, str | None]) -> bool:
        change = self._changes.get(place)
        if change is not None:
            return change.entry is not None
        return place in self._held

    def _room_for(self, place: tuple[str, str | None]) -> None:
        if place not in self._changes and len(self._changes) >= self._changes_max:
            raise Invalid(f"A turn changes at most {self._changes_max} memory entries.")

    def _cap(self, conversation_id: str | None) -> int:
        return self._persistent_cap if conversation_id is None else self._thread_cap

    def _count(self, conversation_id: str | None) -> int:
        """Entries the scope will hold once the turn's changes land."""
        in_scope = {p for p in self._held if (p[1] is None) == (conversation_id is None)}
        for place, change in self._changes.items():
            if (place[1] is None) != (conversation_id is None):
                continue
            if change.entry is None:
                in_scope.discard(place)
            else:
                in_scope.add(place)
        return len(in_scope)
