"""The two memory tools a model may call during a chat turn.

They are declared once here so every provider (native tool calling, the JSON reply
protocol, the offline model) offers the model the same contract, and the chat service
validates calls against the same rules.
"""

from __future__ import annotations

from typing import Any, Final

from recall.domain.prompt import ToolSpec
from recall.settings import Settings

SAVE_PREFERENCE: Final = "save_preference"
FORGET_PREFERENCE: Final = "forget_preference"

MEMORY_CATEGORIES: Final = ("brand", "preferences", "forbidden", "context", "history")
MEMORY_SCOPES: Final = ("persistent", "thread")
DEFAULT_SCOPE: Final = "persistent"
KEY_PATTERN: Final = r"^[a-z0-9_.-]{1,64}$"
# The tool schema is static, so it carries the default limit; the store enforces the setting.
MAX_VALUE_LENGTH: Final[int] = Settings.model_fields["memory_value_max_chars"].default

_KEY_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "pattern": KEY_PATTERN,
    "description": "Short snake_case name for the entry, e.g. header_color or no_stock_photos.",
}
_SCOPE_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "enum": list(MEMORY_SCOPES),
    "default": DEFAULT_SCOPE,
    "description": "persistent: every conversation in the project; thread: this one only.",
}

SAVE_PREFERENCE_SPEC: Final = ToolSpec(
    name=SAVE_PREFERENCE,
    description=(
        "Save or update one durable memory entry for this project: a brand rule, a "
        "preference, something forbidden, or a fact worth keeping. Writing an existing "
        "key replaces its value."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "key": _KEY_SCHEMA,
            "value": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_VALUE_LENGTH,
                "description": "The rule or fact itself, in one short sentence.",
            },
            "category": {
                "type": "string",
                "enum": list(MEMORY_CATEGORIES),
                "description": (
                    "brand: tone, voice, audience, sector; preferences: design and working "
                    "choices; forbidden: things never to do; context: facts about the "
                    "project; history: decisions already taken."
                ),
            },
            "scope": _SCOPE_SCHEMA,
        },
        "required": ["key", "value", "category"],
        "additionalProperties": False,
    },
)

FORGET_PREFERENCE_SPEC: Final = ToolSpec(
    name=FORGET_PREFERENCE,
    description="Delete one memory entry the user no longer wants kept, by its key.",
    input_schema={
        "type": "object",
        "properties": {"key": _KEY_SCHEMA, "scope": _SCOPE_SCHEMA},
        "required": ["key"],
        "additionalProperties": False,
    },
)

MEMORY_TOOLS: Final[list[ToolSpec]] = [SAVE_PREFERENCE_SPEC, FORGET_PREFERENCE_SPEC]

TOOL_INSTRUCTIONS: Final = (
    "You can keep project memory with two tools. Call save_preference when the user "
    "states something that should hold beyond this message: a durable preference "
    '("always…", "I prefer…"), a brand rule (tone, voice, audience, sector), or a thing '
    'that is forbidden ("never…", "don\'t…"). Use scope "thread" only when the user says '
    "it applies to this conversation alone. Call forget_preference when the user asks you "
    "to forget or stop applying an entry. The entries already saved are listed in the "
    "project memory and thread memory blocks; reuse their keys when updating them. The "
    "calls cost the user nothing, so save whenever a rule is stated, then answer the "
    "user normally."
)
