"""How an import plan is cut for the worker: chunks that each fit one DynamoDB item as
DynamoDB counts it (UTF-8 bytes, whatever the script), in the order the worker writes
them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from recall.domain.conversations import Conversation
from recall.domain.memory import HistoryRecord, MemoryEntry
from recall.domain.messages import Message
from recall.domain.presets import Preset
from recall.domain.sizes import stored_size


class ThreadPart(BaseModel):
    """Some of one thread's messages; the part that ends the thread carries the thread."""

    index: int
    conversation_id: str
    first: int
    messages: list[Message]
    conversation: Conversation | None = None


class ImportedMemory(BaseModel):
    """An entry and its history. A history too long for one chunk (an entry changed by
    thousands of turns) is cut into pieces that hold records only (``history_only``); the
    last piece writes the entry, after all of its history."""

    entry: MemoryEntry
    history: list[HistoryRecord]
    history_only: bool = False


class Chunk(BaseModel):
    """What one worker job writes: well under DynamoDB's 400 KB item. Presets come first
    in the first chunks, so a thread's ``presetId`` may already name one when it lands."""

    number: int
    # Every preset of the import, by id: two of one name in the document are both imported,
    # while a preset of that name the project held before keeps the name for itself.
    import_presets: list[str] = Field(default_factory=list)
    presets: list[Preset] = Field(default_factory=list)
    parts: list[ThreadPart] = Field(default_factory=list)
    memories: list[ImportedMemory] = Field(default_factory=list)

    def message_count(self) -> int:
        return sum(len(part.messages) for part in self.parts)

    def thread_count(self) -> int:
        return sum(1 for part in self.parts if part.conversation is not None)


def _stored_bytes(value: BaseModel) -> int:
    """What ``value`` adds to a chunk's body as DynamoDB counts it: its JSON's UTF-8
    bytes ("é" is 2 of them, "😀" 4), and one more for the comma after it."""
    return stored_size(value.model_dump_json()) + 1


def cut_into_chunks(
    presets: list[Preset],
    built: list[tuple[Conversation, list[Message]]],
    memories: list[ImportedMemory],
    max_bytes: int,
) -> list[Chunk]:
    """Chunks in document order: presets first, then threads (a thread's messages may span
    chunks, and the chunk with its last message creates the thread); memory entries come
    last, after their threads. Each chunk's body is at most ``max_bytes`` as DynamoDB
    counts it, whatever the text's script: an entry's long history is cut across chunks."""
    chunks: list[Chunk] = []
    ours = [preset.preset_id for preset in presets]
    current = Chunk(number=0, import_presets=ours)
    used = _stored_bytes(current)

    def holds() -> bool:
        return bool(current.presets or current.parts or current.memories)

    def close() -> None:
        nonlocal current, used
        if holds():
            chunks.append(current)
            current = Chunk(number=len(chunks), import_presets=ours)
            used = _stored_bytes(current)

    def make_room(size: int) -> None:
        if used + size > max_bytes:
            close()

    for preset in presets:
        size = _stored_bytes(preset)
        make_room(size)
        current.presets.append(preset)
        used += size
    for index, (conversation, messages) in enumerate(built):
        thread_id = conversation.conversation_id
        part = ThreadPart(index=index, conversation_id=thread_id, first=0, messages=[])
        # The thread goes with its last message, so the two are counted together.
        last = _stored_bytes(conversation)
        if not messages:
            make_room(_stored_bytes(part) + last)
            used += last
        used += _stored_bytes(part)
        for number, message in enumerate(messages):
            size = _stored_bytes(message) + (last if number == len(messages) - 1 else 0)
            if used + size > max_bytes and (part.messages or holds()):
                if part.messages:
                    current.parts.append(part)
                close()
                part = ThreadPart(index=index, conversation_id=thread_id, first=number, messages=[])
                used += _stored_bytes(part)
            part.messages.append(message)
            used += size
        part.conversation = conversation
        current.parts.append(part)
    room = max_bytes - _stored_bytes(Chunk(number=_CHUNKS_MAX, import_presets=ours))
    for memory in memories:
        for piece in _pieces(memory, room):
            size = _stored_bytes(piece)
            make_room(size)
            current.memories.append(piece)
            used += size
    close()
    return chunks


# More chunks than an import can have: a chunk's number never takes more digits than it.
_CHUNKS_MAX = 10**9


def _pieces(memory: ImportedMemory, room: int) -> list[ImportedMemory]:
    """``memory`` whole when it fits ``room`` bytes, else its history cut in order into
    pieces that each fit, the last one writing the entry."""
    if _stored_bytes(memory) <= room:
        return [memory]
    bare = ImportedMemory(entry=memory.entry, history=[], history_only=True)
    base = max(_stored_bytes(bare), _stored_bytes(memory.model_copy(update={"history": []})))
    pieces: list[ImportedMemory] = []
    taken: list[HistoryRecord] = []
    used = base
    for record in memory.history:
        size = _stored_bytes(record)
        if taken and used + size > room:
            pieces.append(bare.model_copy(update={"history": taken}))
            taken, used = [], base
        taken.append(record)
        used += size
    pieces.append(memory.model_copy(update={"history": taken}))
    return pieces
