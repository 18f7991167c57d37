"""Assembling what the model receives for a turn, in the product's order: system text, tool
instructions, the memory block, project context, the rolling summary, the preset's context
prompts, the window, the new message. The turn and the context preview both call
``assemble``, so the preview is exact.

The order is also what changes least first: a model's prompt cache reuses a request's
prefix up to the first byte that differs, so the fixed text leads, the summary (rewritten
when messages leave the window) closes the system part, the preset's context prompts (fixed
for the thread's life) open the messages, and the new message comes last.
The request marks where the parts that repeat on the next turn end (the whole system part
and the window) for providers whose model caches."""

from __future__ import annotations

import math
import re

from pydantic import BaseModel

from recall.domain.messages import Message
from recall.domain.presets import ContextPrompt, EffectiveSettings, PresetCopy
from recall.domain.projects import Project
from recall.domain.prompt import ModelRequest, PromptMessage, ToolSpec
from recall.domain.tools import MEMORY_TOOLS, TOOL_INSTRUCTIONS
from recall.domain.window import as_prompt

SYSTEM_TEXT = (
    "You are the assistant inside this product. Follow the project memory below as standing "
    "instructions for every reply: brand rules shape tone, preferences shape choices, and "
    "forbidden entries are never done. Be concise and concrete."
)

# Every control character (C0, DEL and C1, which holds U+0085 NEL) and the line and
# paragraph separators: all that ``str.splitlines()`` breaks on, and more.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _neutral(text: str) -> str:
    """One line of plain text that cannot open or close a block, whoever splits it into
    lines (``split("\\n")`` or ``str.splitlines()``)."""
    return _UNSAFE.sub(" ", text).replace("<", "‹").replace(">", "›").strip()


def render_project_context(project: Project) -> str:
    lines = [f"name: {_neutral(project.name)}"]
    lines += [f"{_neutral(key)}: {_neutral(str(value))}" for key, value in project.context.items()]
    return "<project_context>\n" + "\n".join(lines) + "\n</project_context>"


def render_summary(summary: str) -> str:
    """The rolling summary, one point a line, each line neutralised like any other value."""
    lines = [_neutral(line) for line in summary.splitlines() if line.strip()]
    if not lines:
        return ""
    return "<conversation_summary>\n" + "\n".join(lines) + "\n</conversation_summary>"


class TurnContext(BaseModel):
    """The parts of a request, kept apart so the preview can show each one."""

    system_text: str
    tool_instructions: str
    memory_block: str
    project_context: str
    summary: str
    window: list[Message]
    # The thread's preset's prompts, sent as messages ahead of the window.
    context_prompts: list[ContextPrompt] = []
    # Whether the memory tools are offered: off with the memory block (sendMemory false).
    memory_tools: bool = True

    def system(self) -> list[str]:
        parts = [
            self.system_text,
            self.tool_instructions,
            self.memory_block,
            self.project_context,
            self.summary,
        ]
        return [part for part in parts if part]


def turn_context(
    project: Project, memory_block: str, summary: str, window: list[Message]
) -> TurnContext:
    return TurnContext(
        system_text=SYSTEM_TEXT,
        tool_instructions=TOOL_INSTRUCTIONS,
        memory_block=memory_block,
        project_context=render_project_context(project),
        summary=render_summary(summary),
        window=window,
    )


def for_thread(
    context: TurnContext, settings: EffectiveSettings, preset: PresetCopy | None
) -> TurnContext:
    """The context as the thread's settings shape it: its preset's prompts; without the
    summary (exact short context) exactly the last ``window_messages`` messages; without
    memory no memory block and no memory tools, so the thread neither reads nor writes
    project memory."""
    update: dict[str, object] = {"context_prompts": preset.context_prompts if preset else []}
    if not settings.use_summary:
        size = settings.window_messages
        update |= {"summary": "", "window": context.window[-size:] if size > 0 else []}
    if not settings.send_memory:
        update |= {"memory_block": "", "tool_instructions": "", "memory_tools": False}
    return context.model_copy(update=update)


def assemble(
    context: TurnContext,
    new_message: str,
    model_id: str,
    max_tokens: int,
    temperature: float,
    tools: list[ToolSpec] | None = None,
) -> ModelRequest:
    prompts = [
        PromptMessage(role=prompt.role, text=prompt.content) for prompt in context.context_prompts
    ]
    window = [*prompts, *as_prompt(context.window)]
    system = context.system()
    offered = (MEMORY_TOOLS if context.memory_tools else []) if tools is None else tools
    return ModelRequest(
        model_id=model_id,
        system=system,
        messages=[*window, PromptMessage(role="user", text=new_message)],
        tools=offered,
        max_tokens=max_tokens,
        temperature=temperature,
        stable_system=len(system),
        stable_messages=len(window),
    )


def token_estimate(request: ModelRequest) -> int:
    """About four characters a token: enough to warn before a window grows too large."""
    characters = sum(len(part) for part in request.system)
    characters += sum(len(message.text) for message in request.messages)
    characters += sum(len(tool.description) + len(str(tool.input_schema)) for tool in request.tools)
    return math.ceil(characters / 4)
