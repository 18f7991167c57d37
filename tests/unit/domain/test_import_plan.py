"""The import's rules without any store: checking a document, the ids it derives and how
it is cut into chunks."""

from __future__ import annotations

from datetime import UTC, datetime
import json
from typing import Any

import pytest

from recall.domain.import_rules import ImportLimits
from recall.domain.imports import parse_document, plan_import
from recall.domain.memory import Source
from recall.domain.presets import PresetLimits, SettingLimits
from recall.errors import Invalid

NOW = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
LIMITS = ImportLimits(
    threads_max=100,
    messages_per_thread_max=100,
    message_max_chars=1_000,
    message_max_bytes=10_000,
    title_max_chars=80,
    memory_value_max_chars=500,
    memory_expiry_max_days=30,
    chunk_max_bytes=300_000,
    presets_max=3,
    preset=PresetLimits(name_max_chars=80, prompts_max=8, prompt_max_chars=2_000),
    settings=SettingLimits(
        allowed_models=("model-b",),
        default_model="model-a",
        max_tokens_limit=4_096,
        window_messages_max=100,
    ),
)


def threads(*stamps: list[str]) -> dict[str, Any]:
    return {
        "format": "threads",
        "threads": [
            {
                "title": f"T{n}",
                "messages": [
                    {"role": "user", "content": f"m{n}.{m}", "createdAt": at}
                    for m, at in enumerate(times)
                ],
            }
            for n, times in enumerate(stamps)
        ],
    }


def export(memories: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": "recall.export",
        "version": 1,
        "exportedAt": "2025-06-01T00:00:00.000Z",
        "projectId": "P",
        "userId": "u",
        "conversations": [
            {
                "id": "OLD1",
                "title": "Old",
                "createdAt": "2025-05-01T00:00:00.000Z",
                "updatedAt": "2025-05-01T00:00:00.000Z",
                "messages": [],
            }
        ],
        "memories": memories,
    }


def plan(body: dict[str, Any], user: str = "u", limits: ImportLimits = LIMITS) -> Any:
    return plan_import(user, "P", parse_document(body), limits, NOW)


def test_message_ids_keep_the_documents_order_even_when_stamps_repeat_or_go_back() -> None:
    # Given
    stamps = ["2025-01-01T10:00:00Z", "2025-01-01T10:00:00Z", "2025-01-01T09:00:00Z"]
    # When
    messages = plan(threads(stamps)).chunks[0].parts[0].messages
    # Then
    ids = [message.message_id for message in messages]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert [m.created_at for m in messages] == [
        "2025-01-01T10:00:00.000Z",
        "2025-01-01T10:00:00.000Z",
        "2025-01-01T09:00:00.000Z",
    ]


def test_the_same_content_is_the_same_import_and_another_caller_another() -> None:
    # Given
    body = threads(["2025-01-01T10:00:00Z"])
    respaced = json.loads(json.dumps(body, indent=3, sort_keys=True))
    # When
    first, again, other = plan(body), plan(respaced), plan(body, user="v")
    # Then
    assert first.import_id == again.import_id != other.import_id
    ids = [part.conversation_id for plan in (first, again) for part in plan.chunks[0].parts]
    assert ids[0] == ids[1]


def test_a_long_thread_spans_chunks_and_only_its_last_part_creates_it() -> None:
    # Given
    limits = LIMITS.model_copy(update={"chunk_max_bytes": 1_000})
    stamps = [f"2025-01-01T10:00:{s:02d}Z" for s in range(30)]
    # When
    chunks = plan(threads(stamps, stamps[:2]), limits=limits).chunks
    # Then
    parts = [part for chunk in chunks for part in chunk.parts]
    assert len(chunks) > 3
    assert all(len(chunk.model_dump_json()) < 2_000 for chunk in chunks)
    assert [part.conversation is not None for part in parts if part.index == 0][-1]
    assert sum(part.conversation is not None for part in parts) == 2
    assert [m.content for part in parts if part.index == 0 for m in part.messages] == [
        f"m0.{m}" for m in range(30)
    ]


def test_errors_name_each_thread_and_message_and_stop_the_whole_import() -> None:
    # Given
    body = threads(["2025-01-01T10:00:00Z", "not a time"], ["2025-01-01T10:00:00"])
    # When
    with pytest.raises(Invalid) as raised:
        plan(body)
    # Then
    assert [detail["field"] for detail in raised.value.details or []] == [
        "threads.0.messages.1.createdAt",
        "threads.1.messages.0.createdAt",
    ]


def test_a_thread_entry_must_name_a_thread_of_the_document() -> None:
    # Given
    entry = {"key": "k", "value": "v", "category": "context", "scope": "thread"}
    body = export([{**entry, "conversationId": "OLD1"}, {**entry, "conversationId": "ELSE"}])
    # When
    with pytest.raises(Invalid) as raised:
        plan(body)
    # Then
    assert [d["field"] for d in raised.value.details or []] == ["memories.1.conversationId"]


def test_imported_entries_are_imported_under_the_new_thread_and_expired_ones_are_left() -> None:
    # Given
    entry = {"key": "k", "value": "v", "category": "context", "source": "explicit"}
    body = export(
        [
            {**entry, "scope": "thread", "conversationId": "OLD1"},
            {**entry, "key": "gone", "expiresAt": "2025-06-01T00:00:00Z"},
        ]
    )
    # When
    built = plan(body)
    # Then
    memories = [memory for chunk in built.chunks for memory in chunk.memories]
    thread_id = built.chunks[0].parts[0].conversation_id
    assert [(m.entry.key, m.entry.source, m.entry.conversation_id) for m in memories] == [
        ("k", Source.IMPORTED, thread_id)
    ]


def export_with_presets(*names: str, thread_preset: str = "SRC1") -> dict[str, Any]:
    at = "2025-06-01T10:00:00Z"
    return {
        "format": "recall.export",
        "version": 2,
        "exportedAt": at,
        "projectId": "OLD",
        "userId": "u",
        "conversations": [
            {
                "id": "T1",
                "title": "From a preset",
                "createdAt": at,
                "updatedAt": at,
                "preset": {
                    "presetId": thread_preset,
                    "name": names[0] if names else "Gone",
                    "contextPrompts": [{"role": "user", "content": "Be brief."}],
                    "settings": {"temperature": 0.2},
                },
                "settings": {"model": "model-b"},
                "messages": [{"id": "M1", "role": "user", "content": "hi", "createdAt": at}],
            }
        ],
        "memories": [],
        "presets": [
            {"id": f"SRC{n + 1}", "name": name, "createdAt": at, "updatedAt": at}
            for n, name in enumerate(names)
        ],
    }


def test_presets_come_first_under_derived_ids_and_their_threads_name_the_new_ones() -> None:
    first = plan(export_with_presets("Voice", "Editor"))
    again = plan(export_with_presets("Voice", "Editor"))
    [chunk] = first.chunks
    assert [preset.name for preset in chunk.presets] == ["Voice", "Editor"]
    assert [p.preset_id for p in chunk.presets] == [p.preset_id for p in again.chunks[0].presets]
    assert {(p.project_id, p.created_by) for p in chunk.presets} == {("P", "u")}
    conversation = chunk.parts[0].conversation
    assert conversation is not None and conversation.preset is not None
    assert conversation.preset.preset_id == chunk.presets[0].preset_id
    assert conversation.settings is not None and conversation.settings.model == "model-b"


def test_a_thread_whose_preset_the_document_lacks_keeps_its_preset_id() -> None:
    [chunk] = plan(export_with_presets(thread_preset="ELSEWHERE")).chunks
    conversation = chunk.parts[0].conversation
    assert conversation is not None and conversation.preset is not None
    assert conversation.preset.preset_id == "ELSEWHERE"
    assert [prompt.content for prompt in conversation.preset.context_prompts] == ["Be brief."]


def test_more_presets_than_presets_max_are_refused_up_front() -> None:
    with pytest.raises(Invalid) as refused:
        plan(export_with_presets("A", "B", "C", "D"))
    assert refused.value.details == [{"field": "presets", "message": "at most 3 presets"}]


@pytest.mark.parametrize(
    "at",
    [
        "0999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+14:00",
        "1969-12-31T23:59:59.999Z",
    ],
)
def test_a_time_before_1970_is_refused_naming_its_field(at: str) -> None:
    # Given
    body = threads(["2025-01-01T10:00:00Z", at])
    # When
    with pytest.raises(Invalid) as refused:
        plan(body)
    # Then
    assert refused.value.details == [
        {"field": "threads.0.messages.1.createdAt", "message": "not before 1970-01-01T00:00:00Z"}
    ]


def test_the_first_moment_of_1970_is_taken() -> None:
    # When
    messages = plan(threads(["1970-01-01T00:00:00Z"])).chunks[0].parts[0].messages
    # Then
    assert [message.created_at for message in messages] == ["1970-01-01T00:00:00.000Z"]


@pytest.mark.parametrize("text", ["é", "中", "😀", "x"])
def test_every_chunk_fits_its_bound_in_utf8_bytes_whatever_the_script(text: str) -> None:
    # Given: long threads of 2, 3 and 4 byte characters, and their ASCII twin
    limits = LIMITS.model_copy(update={"message_max_chars": 5_000, "chunk_max_bytes": 100_000})
    body = threads(*[["2025-01-01T10:00:00Z"] * 30 for _ in range(3)])
    for thread in body["threads"]:
        for message in thread["messages"]:
            message["content"] = text * 5_000
    # When
    chunks = plan(body, limits=limits).chunks
    # Then
    assert all(len(chunk.model_dump_json().encode()) <= 100_000 for chunk in chunks)
    kept = [message for chunk in chunks for part in chunk.parts for message in part.messages]
    assert len(kept) == 90
    assert len(chunks) >= 90 * 5_000 * len(text.encode()) // 100_000


def test_a_thread_is_counted_with_its_last_message_in_the_chunk_that_creates_it() -> None:
    # Given: four 20 KB messages and a thread whose preset copy is 64 KB
    limits = LIMITS.model_copy(update={"message_max_chars": 5_000, "chunk_max_bytes": 100_000})
    prompts = [{"role": "user", "content": "😀" * 2_000} for _ in range(8)]
    body = export([])
    body["version"] = 2
    body["conversations"][0]["preset"] = {
        "presetId": "P1",
        "name": "Big",
        "contextPrompts": prompts,
    }
    body["conversations"][0]["messages"] = [
        {
            "id": f"M{n}",
            "role": "user",
            "content": "😀" * 5_000,
            "createdAt": "2025-05-01T00:00:00Z",
        }
        for n in range(4)
    ]
    # When
    chunks = plan(body, limits=limits).chunks
    # Then
    assert all(len(chunk.model_dump_json().encode()) <= 100_000 for chunk in chunks)
    assert [len(part.messages) for chunk in chunks for part in chunk.parts] == [3, 1]
    assert chunks[-1].parts[-1].conversation is not None


@pytest.mark.parametrize(("marker", "hidden"), [("01B", 2), ("01Z", 3), ("00A", 0), (None, 0)])
def test_the_clear_context_marker_lands_after_the_same_message_under_new_ids(
    marker: str | None, hidden: int
) -> None:
    # Given: messages 01A, 01B, 01C, cleared after `marker`
    body = export([])
    conversation = body["conversations"][0]
    conversation["messages"] = [
        {"id": f"01{n}", "role": "user", "content": n, "createdAt": "2025-05-01T00:00:00Z"}
        for n in "ABC"
    ]
    if marker:
        conversation["clearedAfter"] = marker
    # When
    part = plan(body).chunks[0].parts[0]
    # Then
    assert part.conversation is not None
    ids = [message.message_id for message in part.messages]
    assert part.conversation.cleared_after == (ids[hidden - 1] if hidden else None)
    assert [
        i
        for i in ids
        if part.conversation.cleared_after is None or i > part.conversation.cleared_after
    ] == ids[hidden:]


def test_an_entry_whose_history_outgrows_a_chunk_is_cut_across_chunks_and_written_last() -> None:
    # Given an entry changed 600 times, each change about 1 KB: 600 KB of history
    limits = LIMITS.model_copy(update={"chunk_max_bytes": 100_000})
    changes = [
        {
            "action": "updated",
            "oldValue": f"{n:03d}" + "o" * 497,
            "newValue": f"{n + 1:03d}" + "n" * 497,
            "source": "extracted",
            "at": f"2025-05-{1 + n // 60:02d}T{n % 60 // 3:02d}:{n % 60:02d}:00.000Z",
        }
        for n in range(600)
    ]
    body = export([{"key": "tone", "value": "warm", "category": "brand", "history": changes}])
    # When
    chunks = plan(body, limits=limits).chunks
    # Then every chunk fits, and the pieces hold the history once, in order
    assert all(len(chunk.model_dump_json().encode()) <= 100_000 for chunk in chunks)
    pieces = [memory for chunk in chunks for memory in chunk.memories]
    assert len(pieces) >= 6
    kept = [record.old_value for piece in pieces for record in piece.history]
    assert kept == [change["oldValue"] for change in changes]
    # And only the last piece writes the entry, after all of its history
    assert [piece.history_only for piece in pieces] == [True] * (len(pieces) - 1) + [False]
    assert {piece.entry.key for piece in pieces} == {"tone"}


def test_an_entry_whose_history_fits_stays_whole() -> None:
    # Given
    change = {"action": "created", "newValue": "warm", "source": "explicit"}
    body = export(
        [
            {
                "key": "tone",
                "value": "warm",
                "category": "brand",
                "history": [{**change, "at": "2025-05-01T00:00:00.000Z"}],
            }
        ]
    )
    # When
    [chunk] = plan(body).chunks
    # Then
    [whole] = chunk.memories
    assert (whole.history_only, len(whole.history)) == (False, 1)
