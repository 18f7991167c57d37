"""Request and response bodies of the HTTP API (camelCase on the wire). A response is read
from its domain model's attributes (``model_validate(domain, from_attributes=True)``),
its fields named as the API names them (``id`` for a ``conversation_id``); it is never a
raw DynamoDB item."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from recall.domain import clock
from recall.domain.access import Role
from recall.domain.conversations import Conversation, Period, period_of
from recall.domain.messages import Message
from recall.domain.presets import ThreadSettings
from recall.domain.projects import Member, Project
from recall.domain.prompt import Usage
from recall.domain.usage import Budget

ContextValue = str | int | float | bool


class Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class View(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# Settings (of a project, a preset, a thread)


class SettingsBody(Body):
    """Settings to set; a setting left out (or, in a thread's PATCH, null) is not set here
    and follows the layer under it."""

    model: str | None = Field(default=None, max_length=200)
    # Strict, as budgets are: true is not 1 and "7" is not 7.
    temperature: StrictFloat | None = Field(default=None, description="0 to 1.")
    max_tokens: StrictInt | None = Field(default=None, description="1 to MODEL_MAX_TOKENS_LIMIT.")
    window_messages: StrictInt | None = Field(
        default=None, description="Messages of the thread sent; 1 to WINDOW_MESSAGES_MAX."
    )
    use_summary: StrictBool | None = Field(
        default=None,
        description="false: no rolling summary, exactly windowMessages messages (exact short "
        "context).",
    )
    send_memory: StrictBool | None = Field(
        default=None, description="false: no project memory block and no memory tools."
    )

    def settings(self) -> ThreadSettings:
        return ThreadSettings(**self.model_dump())

    def changes(self) -> dict[str, object]:
        """Only the settings the body names, null ones included (a merge patch)."""
        return self.model_dump(include=self.model_fields_set)


class SettingsView(View):
    """The settings this layer sets; null follows the layer under it."""

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    window_messages: int | None = None
    use_summary: bool | None = None
    send_memory: bool | None = None

    @classmethod
    def of(cls, settings: ThreadSettings) -> SettingsView:
        return cls.model_validate(settings, from_attributes=True)


class EffectiveSettingsView(View):
    model: str
    temperature: float
    max_tokens: int
    window_messages: int
    use_summary: bool
    send_memory: bool


# Projects


class CreateProjectRequest(Body):
    name: str = Field(min_length=1, max_length=500)
    context: dict[str, ContextValue] = Field(default_factory=dict)


class UpdateProjectRequest(Body):
    name: str | None = Field(default=None, min_length=1, max_length=500)
    context: dict[str, ContextValue] | None = None
    settings: SettingsBody | None = Field(
        default=None,
        description="The project's default settings, replacing the previous ones: every "
        "thread follows them unless its preset or itself sets a setting. {} or null sets "
        "none, as null drops a thread's overrides.",
    )

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateProjectRequest:
        if "settings" in self.model_fields_set and self.settings is None:
            self.settings = SettingsBody()
        if self.name is None and self.context is None and self.settings is None:
            raise ValueError("give a name, a context or settings to change")
        return self


class ProjectView(View):
    id: str = Field(validation_alias=AliasChoices("id", "project_id"))
    name: str
    context: dict[str, Any]
    settings: SettingsView
    role: Role
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, project: Project, role: Role) -> ProjectView:
        """The project's fields, and the caller's ``role`` on it."""
        return cls.model_validate({**dict(project), "role": role}, from_attributes=True)


class ProjectList(View):
    projects: list[ProjectView]
    next_cursor: str | None = None


class SetMemberRequest(Body):
    role: Role


class BudgetView(View):
    """A member's limits (null: none)."""

    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    turns_per_day: int | None = None
    turns_per_month: int | None = None

    @classmethod
    def of(cls, budget: Budget | None) -> BudgetView | None:
        shown = _limits(budget)
        return None if shown is None else cls.model_validate(shown, from_attributes=True)


def _limits(budget: Any) -> Any:
    """A budget that sets no limit shows as none."""
    return None if isinstance(budget, Budget) and budget.empty() else budget


# A member's budget as the API shows it: null when it sets no limit.
MemberBudget = Annotated[BudgetView | None, BeforeValidator(_limits)]


class MemberView(View):
    user_id: str
    role: Role
    added_at: str
    budget: MemberBudget = Field(
        default=None, description="The member's limits (PUT …/members/{userId}/budget)."
    )

    @classmethod
    def of(cls, member: Member) -> MemberView:
        return cls.model_validate(member, from_attributes=True)


class ErasureView(View):
    """A 202's body: the erasure goes on in the background; the caller already holds no
    role, and a later DELETE answers 204 once it is done."""

    project_id: str
    status: Literal["erasing"] = "erasing"


class MemberList(View):
    members: list[MemberView]


# Conversations


class CreateConversationRequest(Body):
    title: str | None = Field(default=None, max_length=1000)
    preset_id: str | None = Field(
        default=None, description="Start the thread from this preset of the project."
    )


class UpdateConversationRequest(Body):
    title: str | None = Field(default=None, max_length=1000)
    archived: StrictBool | None = None
    settings: SettingsBody | None = Field(
        default=None,
        description="Overrides merged into the thread's (a null setting stops overriding "
        "it); null drops them all, so the thread follows its preset and the project again.",
    )

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateConversationRequest:
        if self.title is None and self.archived is None and "settings" not in self.model_fields_set:
            raise ValueError("give a title, archived or settings to change")
        return self


class ConversationView(View):
    id: str = Field(validation_alias=AliasChoices("id", "conversation_id"))
    title: str
    model: str | None
    archived: bool
    message_count: int
    turn_count: int
    created_at: str
    updated_at: str
    period: Period = Field(
        # Read from a thread, it is its updatedAt's group (``_group_of``).
        validation_alias=AliasChoices("period", "updated_at"),
        description="The list's group for the thread, by its last update: today, "
        "yesterday, previous7Days, previous30Days or older.",
    )
    preset_id: str | None = Field(
        default=None,
        validation_alias=AliasChoices("preset_id", AliasPath("preset", "preset_id")),
        description="The preset the thread started from (kept if deleted).",
    )
    preset_name: str | None = Field(
        default=None, validation_alias=AliasChoices("preset_name", AliasPath("preset", "name"))
    )
    settings: SettingsView | None = Field(
        default=None, description="The thread's own overrides; null: it follows."
    )
    cleared_after: str | None = Field(
        default=None,
        description="The last message id before the latest clear-context: the model no "
        "longer sees it or anything older.",
    )

    @field_validator("period", mode="before")
    @classmethod
    def _group_of(cls, value: Any, info: ValidationInfo) -> Any:
        """A period given is kept; a thread's ``updated_at`` gives the group it falls in: the
        list's (``period`` in the context, computed once for its page) or as of now."""
        if value in set(Period):
            return value
        return (info.context or {}).get("period") or period_of(value, clock.now())

    @classmethod
    def of(cls, conversation: Conversation, period: Period | None = None) -> ConversationView:
        """``period``: the list's, computed once for its page; otherwise as of now."""
        return cls.model_validate(conversation, from_attributes=True, context={"period": period})


class ConversationList(View):
    conversations: list[ConversationView]
    next_cursor: str | None = None


class ToolCallView(View):
    id: str
    name: str
    input: dict[str, Any]


class ToolResultView(View):
    tool_call_id: str
    content: str
    is_error: bool


class UsageView(View):
    input_tokens: int = Field(
        description="Input tokens neither read from nor written to the model's prompt cache."
    )
    output_tokens: int
    cache_read_input_tokens: int = Field(
        description="Input tokens read from the model's prompt cache (0 when it has none)."
    )
    cache_write_input_tokens: int = Field(
        description="Input tokens written to the model's prompt cache (0 when it has none)."
    )

    @classmethod
    def of(cls, usage: Usage) -> UsageView:
        return cls.model_validate(usage, from_attributes=True)


class MessageView(View):
    id: str = Field(validation_alias=AliasChoices("id", "message_id"))
    role: str
    content: str
    tool_calls: list[ToolCallView]
    tool_results: list[ToolResultView]
    model: str | None
    status: str
    error: str | None
    usage: UsageView | None
    created_at: str

    @classmethod
    def of(cls, message: Message) -> MessageView:
        return cls.model_validate(message, from_attributes=True)


class ConversationDetail(View):
    conversation: ConversationView
    messages: list[MessageView]
    next_cursor: str | None = Field(
        default=None, description="Cursor for the next older page of messages."
    )
