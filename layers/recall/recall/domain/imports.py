"""Export and import (backfill) of what a user holds in a project, as documents: the
import's document, its progress, and its plan.

Two documents come in: Recall's own export (``format: recall.export``, version 1 or 2) and
a plain list of threads from elsewhere (``format: threads``). Both are checked whole before
anything is written, with errors that name the thread and message index, then cut into
chunks the worker writes one at a time. The threads and presets are checked and given
their ids by ``import_threads``, the memory by ``memory_imports``, both under the bounds
and rules of ``import_rules``.

Every id an import creates is derived from the import, itself derived from the caller,
the project and the document's content, so a document sent twice, or a chunk delivered
twice, writes the same items again and creates nothing twice.

A version 2 export brings the project's presets too (written before any thread, each only
where the project has no preset of its name and room for one more) and each thread's
preset copy and settings.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
import hashlib
import json
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from recall.domain.clock import parse
from recall.domain.exports import ExportDocument
from recall.domain.ids import encode
from recall.domain.import_chunks import Chunk, cut_into_chunks
from recall.domain.import_rules import ImportLimits, Problems, digest
from recall.domain.import_threads import (
    ThreadsDocument,
    checked_presets,
    export_threads,
    plain_threads,
    with_ids,
    with_preset_ids,
)
from recall.domain.memory_imports import checked_memories
from recall.errors import Invalid

ImportDocument = Annotated[ExportDocument | ThreadsDocument, Field(discriminator="format")]
_DOCUMENT: TypeAdapter[ExportDocument | ThreadsDocument] = TypeAdapter(ImportDocument)


class ImportStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class ImportProgress(BaseModel):
    import_id: str
    user_id: str
    project_id: str
    status: ImportStatus = ImportStatus.QUEUED
    chunks_total: int
    chunks_done: int = 0
    # The numbers of the chunks counted so far: a chunk delivered again is not rerun.
    counted: frozenset[int] = frozenset()
    threads_total: int
    threads_done: int = 0
    messages_done: int = 0
    memories_done: int = 0
    presets_done: int = 0
    errors: list[str] = Field(default_factory=list)
    created_at: str
    updated_at: str

    def next_chunk(self) -> int:
        """The chunk to run next: chunks run in order, so the first not counted."""
        return min(set(range(self.chunks_total)) - self.counted, default=self.chunks_total)

    def stalled(self, now: datetime, stall_seconds: int) -> bool:
        """Not finished and unmoved for ``stall_seconds``: its chunk's job ran out of
        retries (a chunk counted, or the import taken up, moves ``updated_at``)."""
        if self.status not in (ImportStatus.QUEUED, ImportStatus.RUNNING):
            return False
        return now - parse(self.updated_at) >= timedelta(seconds=stall_seconds)


# Parsing and planning


def _where(location: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in location)


def parse_document(body: Any) -> ExportDocument | ThreadsDocument:
    """The document, or Invalid naming each offending field by its path
    (``threads.3.messages.7.createdAt``: thread 3, message 7)."""
    try:
        return _DOCUMENT.validate_python(body)
    except ValidationError as exc:
        details = [
            {
                "field": _where(tuple(error["loc"])),
                "message": str(error["msg"]),
                "type": str(error["type"]),
            }
            for error in exc.errors()[:20]
        ]
        raise Invalid("The import document is not valid.", details) from exc


def document_hash(document: ExportDocument | ThreadsDocument) -> str:
    """The content's hash, whatever the spacing or key order it was sent with."""
    canonical = json.dumps(document.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def import_id_of(user_id: str, project_id: str, content_hash: str) -> str:
    """One id per caller, project and document: sending it again finds the same import."""
    return encode(digest("import", user_id, project_id, content_hash), 26)


class ImportPlan(BaseModel):
    """A checked document cut into chunks, with the numbers its progress counts to."""

    import_id: str
    chunks: list[Chunk]
    threads_total: int


def plan_import(
    user_id: str,
    project_id: str,
    document: ExportDocument | ThreadsDocument,
    limits: ImportLimits,
    now: datetime,
) -> ImportPlan:
    """Check the whole document (Invalid names every offending thread and message, up to
    20), then cut it into chunks of at most ``chunk_max_bytes`` each."""
    problems = Problems()
    count = (
        len(document.conversations)
        if isinstance(document, ExportDocument)
        else len(document.threads)
    )
    if count > limits.threads_max:
        field = "conversations" if isinstance(document, ExportDocument) else "threads"
        problems.add(field, f"at most {limits.threads_max} threads")
        problems.raise_any()
    threads = (
        export_threads(document, limits, now, problems)
        if isinstance(document, ExportDocument)
        else plain_threads(document, limits, now, problems)
    )
    import_id = import_id_of(user_id, project_id, document_hash(document))
    checked = (
        checked_presets(document, limits, now, problems)
        if isinstance(document, ExportDocument)
        else []
    )
    presets = with_preset_ids(import_id, checked, user_id, project_id)
    preset_ids = {
        source: preset.preset_id for (source, _), preset in zip(checked, presets, strict=True)
    }
    built = [
        with_ids(import_id, index, thread, user_id, project_id, preset_ids)
        for index, thread in enumerate(threads)
    ]
    thread_ids = {
        thread.source_id: conversation.conversation_id
        for thread, (conversation, _) in zip(threads, built, strict=True)
        if thread.source_id
    }
    memories = (
        checked_memories(document, thread_ids, limits, now, problems)
        if isinstance(document, ExportDocument)
        else []
    )
    problems.raise_any()
    return ImportPlan(
        import_id=import_id,
        chunks=cut_into_chunks(presets, built, memories, limits.chunk_max_bytes),
        threads_total=len(built),
    )
