"""An imported document's memory: its entries still active, under the import's thread
ids, with their own times and history, and which history records are not held yet."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
import json

from recall.domain.clock import stamp
from recall.domain.exports import ExportDocument, ExportedMemory
from recall.domain.import_chunks import ImportedMemory
from recall.domain.import_rules import (
    ImportLimits,
    Problems,
    derived_id,
    moment_of,
    ms_of,
    stamp_of,
)
from recall.domain.memory import (
    HistoryRecord,
    MemoryEntry,
    Scope,
    Source,
    check_key,
    check_value,
    expiry_too_far,
)
from recall.errors import Invalid


def checked_memories(
    document: ExportDocument,
    thread_ids: dict[str, str],
    limits: ImportLimits,
    now: datetime,
    problems: Problems,
) -> list[ImportedMemory]:
    """The document's entries still active, as ``imported`` entries under the new thread
    ids, each with its history as it was."""
    memories = []
    # An entry with no times of its own was said by the time the document was exported, as
    # far as anyone knows: a time of the document, not of this request, so the same
    # document sent again plans the same entries and a chunk run again writes nothing new.
    exported = stamp_of(document.exported_at, "exportedAt", now, Problems()) or stamp(now)
    for index, sent in enumerate(document.memories):
        where = f"memories.{index}"
        conversation_id = None
        if sent.scope == Scope.THREAD:
            conversation_id = thread_ids.get(sent.conversation_id or "")
            if conversation_id is None:
                problems.add(f"{where}.conversationId", "a conversation of this document")
                continue
        try:
            key = check_key(sent.key)
            value = check_value(sent.value, limits.memory_value_max_chars)
        except Invalid as exc:
            problems.add(f"{where}", exc.message)
            continue
        expires = None
        if sent.expires_at is not None:
            moment = moment_of(sent.expires_at, f"{where}.expiresAt", problems)
            if moment is None:
                continue
            if moment <= now:
                continue  # gone for every reader already: nothing to bring back
            too_far = expiry_too_far(moment, now, limits.memory_expiry_max_days)
            if too_far is not None:
                problems.add(f"{where}.expiresAt", too_far)
                continue
            expires = stamp(moment)
        times = _entry_times(sent, where, exported, now, problems)
        if times is None:
            continue
        created, updated = times
        entry = MemoryEntry(
            key=key,
            value=value,
            category=sent.category,
            scope=sent.scope,
            conversation_id=conversation_id,
            source=Source.IMPORTED,
            confidence=sent.confidence,
            created_at=created,
            updated_at=updated,
            expires_at=expires,
        )
        history = []
        for number, record in enumerate(sent.history):
            at = stamp_of(record.at, f"{where}.history.{number}.at", now, problems)
            if at is not None:
                history.append(
                    HistoryRecord(
                        key=key,
                        scope=sent.scope,
                        conversation_id=conversation_id,
                        **record.model_dump(exclude={"at"}),
                        at=at,
                    )
                )
        memories.append(ImportedMemory(entry=entry, history=history))
    return memories


def _entry_times(
    sent: ExportedMemory, where: str, exported: str, now: datetime, problems: Problems
) -> tuple[str, str] | None:
    """An entry's ``createdAt`` and ``updatedAt``, under the rules of every other imported
    time (``None`` once a problem is noted). The entry keeps them: consolidation tells
    the newer of two entries by when each was said, not by when it was imported. Each is
    optional: one left out is the other, both left out the document's ``exported``."""
    created = sent.created_at and stamp_of(sent.created_at, f"{where}.createdAt", now, problems)
    updated = sent.updated_at and stamp_of(sent.updated_at, f"{where}.updatedAt", now, problems)
    if (sent.created_at and not created) or (sent.updated_at and not updated):
        return None
    if created and updated and updated < created:
        # Consolidation orders entries by updatedAt: one changed before it was made would
        # sort wrong (stamps of one format compare as text).
        problems.add(f"{where}.updatedAt", "not before createdAt")
        return None
    either = created or updated or exported
    return created or either, updated or either


def _said(record: HistoryRecord) -> str:
    """All a history record says, as one text: two records saying the same are identical."""
    return json.dumps(record.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)


def history_record_id(record: HistoryRecord, said: str) -> str:
    """A history record's ULID at its own time, derived from all it says (``_said``): the
    same record, from this import or any other, is always the same item."""
    return derived_id(ms_of(record.at), "history", said)


def history_to_add(
    memory: ImportedMemory, held: Sequence[HistoryRecord]
) -> list[tuple[HistoryRecord, str]]:
    """The imported records not already held (an identical one is never appended again,
    whatever import or turn wrote it), each with its id."""
    seen = {_said(record) for record in held}
    added = []
    for record in memory.history:
        said = _said(record)
        if said not in seen:
            seen.add(said)
            added.append((record, history_record_id(record, said)))
    return added
