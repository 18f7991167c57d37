"""Request and response bodies of the HTTP API (camelCase on the wire). Responses are
mapped explicitly from domain models; a response is never a raw DynamoDB item."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator
from pydantic.alias_generators import to_camel

from recall.domain.access import Role
from recall.domain.conversations import Conversation, Period
from recall.domain.messages import Message
from recall.domain.projects import Member, Project
from recall.domain.prompt import Usage

ContextValue = str | int | float | bool


class Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class View(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


# Projects


class CreateProjectRequest(Body):
    name: str = Field(min_length=1, max_length=500)
    context: dict[str, ContextValue] = Field(default_factory=dict)


class UpdateProjectRequest(Body):
    name: str | None = Field(default=None, min_length=1, max_length=500)
    context: dict[str, ContextValue] | None = None

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateProjectRequest:
        if self.name is None and self.context is None:
            raise ValueError("give a name or a context to change")
        return self


class ProjectView(View):
    id: str
    name: str
    context: dict[str, Any]
    role: Role
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, project: Project, role: Role) -> ProjectView:
        return cls(
            id=project.project_id,
            name=project.name,
            context=project.context,
            role=role,
            created_at=project.created_at,
            updated_at=project.updated_at,
        )


class ProjectList(View):
    projects: list[ProjectView]
    next_cursor: str | None = None


class SetMemberRequest(Body):
    role: Role


class MemberView(View):
    user_id: str
    role: Role
    added_at: str

    @classmethod
    def of(cls, member: Member) -> MemberView:
        return cls(user_id=member.user_id, role=member.role, added_at=member.added_at)


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


class UpdateConversationRequest(Body):
    title: str | None = Field(default=None, max_length=1000)
    archived: StrictBool | None = None

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateConversationRequest:
        if self.title is None and self.archived is None:
            raise ValueError("give a title or archived to change")
        return self


class ConversationView(View):
    id: str
    title: str
    model: str | None
    archived: bool
    message_count: int
    turn_count: int
    created_at: str
    updated_at: str
    period: Period | None = None

    @classmethod
    def of(cls, conversation: Conversation, period: Period | None = None) -> ConversationView:
        return cls(
            id=conversation.conversation_id,
            title=conversation.title,
            model=conversation.model,
            archived=conversation.archived,
            message_count=conversation.message_count,
            turn_count=conversation.turn_count,
            created_at=conversation.created_at,
            updated_at=conversation.updated_at,
            period=period,
        )


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
        return cls(**usage.model_dump())


class MessageView(View):
    id: str
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
        return cls(
            id=message.message_id,
            role=message.role,
            content=message.content,
            tool_calls=[ToolCallView(**call.model_dump()) for call in message.tool_calls],
            tool_results=[ToolResultView(**result.model_dump()) for result in message.tool_results],
            model=message.model,
            status=message.status,
            error=message.error,
            usage=UsageView.of(message.usage) if message.usage else None,
            created_at=message.created_at,
        )


class ConversationDetail(View):
    conversation: ConversationView
    messages: list[MessageView]
    next_cursor: str | None = Field(
        default=None, description="Cursor for the next older page of messages."
    )
