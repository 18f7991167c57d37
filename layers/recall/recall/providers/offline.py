"""A deterministic stand-in for a model: no network, same request, same reply.

It is the default for local runs and tests, so its answers are built to show what the
context assembly got right: how many memory entries and earlier messages reached it,
which entry matches the question, and whether a stated preference turns into a
`save_preference` call the way a real model's would. What counts as a stated preference is
the domain's reading (`recall.domain.memory_proposals`), the same one background
extraction uses, so both save the same things and neither saves chatter.
"""

from __future__ import annotations

from dataclasses import dataclass
import hashlib
import json
import math
import re
import time
from typing import Final

from recall.domain.memory import Category
from recall.domain.memory import MemoryEntry as HeldEntry
from recall.domain.memory_proposals import (
    MemoryProposal,
    content_words,
    for_this_conversation,
    memory_key,
    place_proposal,
    propose_memories,
)
from recall.domain.prompt import (
    ModelReply,
    ModelRequest,
    PromptMessage,
    StopReason,
    TextSink,
    ToolCall,
    ToolSpec,
    Usage,
)
from recall.domain.tools import FORGET_PREFERENCE, SAVE_PREFERENCE

_BLOCK = re.compile(r"<(project_memory|thread_memory)>(.*?)</\1>", re.DOTALL)
_CATEGORY_LINE = re.compile(r"^\[([a-z_]+)\]$")
_ENTRY_LINE = re.compile(r"^([a-z0-9_.-]{1,64}):\s*(.*)$")
# Names the key of an entry to forget: "forget that we never use X" means no_x.
_FORBIDDING = re.compile(r"\b(?:never|don't|dont|do not)\b(?!\s+forget\b)")
_FORGETTING = re.compile(
    r"(?<!never )(?<!not )(?<!n't )\b(?:forget|stop remembering)\b(?:\s+(?:about|that))?\s+(.+)"
)
_KEY_LIKE = re.compile(r"\b[a-z0-9]+(?:[_.-][a-z0-9]+)+\b")
_CHARS_PER_TOKEN: Final = 4
# A streamed chunk: a word and the blanks after it, roughly what a model's stream carries.
_CHUNK = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class MemoryEntry:
    """One `key: value` line of a memory block as the model receives it."""

    key: str
    value: str
    category: str
    scope: str


class OfflineProvider:
    """A `ModelProvider` that answers from the request alone. Streamed, it may pause
    ``chunk_seconds`` between chunks, so a local reply can be watched (and left) mid-way."""

    def __init__(self, chunk_seconds: float = 0.0) -> None:
        self._chunk_seconds = chunk_seconds

    def converse(self, request: ModelRequest) -> ModelReply:
        """Reply to the newest user message, calling memory tools when it states a rule."""
        messages = request.messages
        if messages and messages[-1].tool_results:
            return self._reply(request, _confirmation(messages), [])
        newest = _newest_user_index(messages)
        user_text = messages[newest].text if newest is not None else ""
        answered = newest is not None and any(m.tool_calls for m in messages[newest + 1 :])
        if not answered:
            calls = _memory_calls(
                user_text, request.tools, memory_entries(request.system), position=newest or 0
            )
            if calls:
                text = "I'll forget that." if calls[0].name == FORGET_PREFERENCE else "Noted."
                return self._reply(request, text, calls)
        prior = newest if newest is not None else len(messages)
        return self._reply(request, _summary(request.system, prior, user_text), [])

    def converse_stream(self, request: ModelRequest, on_text: TextSink) -> ModelReply:
        """The same reply as ``converse``, its text handed over a word at a time first."""
        reply = self.converse(request)
        for index, chunk in enumerate(stream_chunks(reply.text)):
            if index and self._chunk_seconds > 0:
                time.sleep(self._chunk_seconds)
            on_text(chunk)
        return reply

    def _reply(self, request: ModelRequest, text: str, calls: list[ToolCall]) -> ModelReply:
        stop_reason: StopReason = "tool_use" if calls else "end_turn"
        limit = request.max_tokens * _CHARS_PER_TOKEN
        if not calls and len(text) > limit:
            text, stop_reason = text[:limit], "max_tokens"
        output = text + "".join(json.dumps(call.input, sort_keys=True) for call in calls)
        return ModelReply(
            text=text,
            tool_calls=calls,
            usage=Usage(
                input_tokens=_tokens(_input_chars(request)),
                output_tokens=_tokens(len(output)),
            ),
            stop_reason=stop_reason,
        )


def stream_chunks(text: str) -> list[str]:
    """The offline model's stream of ``text``: deterministic, and joined it is ``text``."""
    return _CHUNK.findall(text)


def memory_entries(system: list[str]) -> list[MemoryEntry]:
    """Every entry of the `<project_memory>` and `<thread_memory>` blocks, in order."""
    entries: list[MemoryEntry] = []
    for match in _BLOCK.finditer("\n".join(system)):
        scope = "thread" if match.group(1) == "thread_memory" else "persistent"
        category = "context"
        for line in match.group(2).splitlines():
            line = line.strip()
            if header := _CATEGORY_LINE.match(line):
                category = header.group(1)
            elif entry := _ENTRY_LINE.match(line):
                entries.append(MemoryEntry(entry.group(1), entry.group(2), category, scope))
    return entries


def _memory_calls(
    text: str, tools: list[ToolSpec], entries: list[MemoryEntry], *, position: int
) -> list[ToolCall]:
    """The tool calls a newest user message asks for, if the request offers those tools.

    `position` (the message's index in the thread) goes into the call ids, so a rule
    repeated later in a thread still gets an id of its own.
    """
    offered = {tool.name for tool in tools}
    forget = _FORGETTING.search(_normalised(text))
    if forget:
        call = _forget_call(text, forget.group(1), entries, position=position)
        return [call] if call and FORGET_PREFERENCE in offered else []
    if SAVE_PREFERENCE not in offered:
        return []
    return [_save_call(proposal, entries, position=position) for proposal in propose_memories(text)]


def _save_call(proposal: MemoryProposal, entries: list[MemoryEntry], *, position: int) -> ToolCall:
    """A save under the key the domain places it at among the entries of its scope, so a
    changed value updates its entry and a different rule keeps its own."""
    scope = _scope(proposal.value)
    held = [
        HeldEntry(key=entry.key, value=entry.value, category=Category(entry.category))
        for entry in entries
        if entry.scope == scope and entry.category in set(Category)
    ]
    return ToolCall(
        id=_call_id(SAVE_PREFERENCE, proposal.value, position),
        name=SAVE_PREFERENCE,
        input={
            "key": place_proposal(proposal, held),
            "value": proposal.value,
            "category": proposal.category.value,
            "scope": scope,
        },
    )


def _forget_call(
    text: str, phrase: str, entries: list[MemoryEntry], *, position: int
) -> ToolCall | None:
    """Forget the entry the phrase names, or else the saved entry it resembles most."""
    named = _KEY_LIKE.search(phrase)
    known = {entry.key: entry for entry in entries}
    if named:
        key = named.group(0)[:64]
    elif (match := _most_relevant(entries, phrase, fallback=False)) is not None:
        key = match.key
    elif significant := content_words(phrase):
        key = memory_key(" ".join(significant), forbidden=bool(_FORBIDDING.search(phrase)))
    else:
        return None
    scope = known[key].scope if key in known else _scope(text)
    return ToolCall(
        id=_call_id(FORGET_PREFERENCE, text, position),
        name=FORGET_PREFERENCE,
        input={"key": key, "scope": scope},
    )


def _confirmation(messages: list[PromptMessage]) -> str:
    """What the last tool round did, named by the keys the calls carried."""
    calls = {call.id: call for message in messages for call in message.tool_calls}
    saved: list[str] = []
    forgotten: list[str] = []
    failed: list[str] = []
    for result in messages[-1].tool_results:
        call = calls.get(result.tool_call_id)
        key = str(call.input.get("key", result.tool_call_id)) if call else result.tool_call_id
        if result.is_error:
            failed.append(f"{key} ({result.content})" if result.content else key)
        elif call and call.name == FORGET_PREFERENCE:
            forgotten.append(key)
        else:
            saved.append(key)
    parts = [
        f"{label}: {', '.join(keys)}."
        for label, keys in (("Saved", saved), ("Forgot", forgotten), ("Could not save", failed))
        if keys
    ]
    return " ".join(parts) or "Done."


def _summary(system: list[str], prior: int, user_text: str) -> str:
    entries = memory_entries(system)
    text = (
        f"I can see {_count(len(entries), 'memory entry', 'memory entries')} and "
        f"{_count(prior, 'earlier message', 'earlier messages')} in this window."
    )
    best = _most_relevant(entries, user_text)
    if best:
        text += f' From memory: "{best.key}: {best.value}".'
    return text


def _most_relevant(
    entries: list[MemoryEntry], text: str, *, fallback: bool = True
) -> MemoryEntry | None:
    """The first entry sharing most words with the text; else the last one, if `fallback`."""
    if not entries:
        return None
    asked = set(content_words(text))
    scores = [len(asked & set(content_words(f"{e.key} {e.value}"))) for e in entries]
    best = max(scores)
    if best:
        return entries[scores.index(best)]
    return entries[-1] if fallback else None


def _newest_user_index(messages: list[PromptMessage]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user" and messages[index].text.strip():
            return index
    return None


def _scope(text: str) -> str:
    return "thread" if for_this_conversation(text) else "persistent"


def _normalised(text: str) -> str:
    return text.lower().replace("\u2019", "'")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _call_id(name: str, text: str, position: int) -> str:
    return "tool-" + _digest(f"{name}\n{position}\n{text.strip()}")[:12]


def _input_chars(request: ModelRequest) -> int:
    parts: list[str] = [*request.system]
    for message in request.messages:
        parts.append(message.text)
        parts.extend(json.dumps(call.input, sort_keys=True) for call in message.tool_calls)
        parts.extend(result.content for result in message.tool_results)
    parts.extend(json.dumps(tool.input_schema, sort_keys=True) for tool in request.tools)
    return sum(len(part) for part in parts)


def _tokens(chars: int) -> int:
    return math.ceil(chars / _CHARS_PER_TOKEN)
