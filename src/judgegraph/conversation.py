"""The conversation model: what every metric reads.

A :class:`Conversation` is an ordered list of :class:`Turn` objects plus the
facts a judge may need about the whole session (the chatbot's role, the
expected outcome). Loaders in :mod:`judgegraph.loaders` turn files of several
formats into these objects; metrics never see the file formats.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")


class RetrievalNode(BaseModel):
    """One retrieved text the assistant had in front of it for a turn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    context: str = Field(min_length=1)
    source: str | None = None


class ToolCall(BaseModel):
    """A tool call the assistant made (kept for display and custom judges)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    arguments: dict[str, Any] | str | None = None
    id: str | None = None
    output: Any = None


class Turn(BaseModel):
    """One message of a conversation."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    role: Role
    content: str
    retrieval_context: list[RetrievalNode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("retrieval_context", "retrievalContext"),
    )
    tool_calls: list[ToolCall] = Field(
        default_factory=list, validation_alias=AliasChoices("tool_calls", "toolsCalled", "tools_called")
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("retrieval_context", mode="before")
    @classmethod
    def _nodes_from_strings(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, (str, dict)):
            value = [value]
        if isinstance(value, list):
            return [{"context": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _no_tool_calls(cls, value: Any) -> Any:
        return [] if value is None else value


class Conversation(BaseModel):
    """A whole chat session to be judged."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    id: str = Field(default="", validation_alias=AliasChoices("id", "conversation_id", "name"))
    turns: list[Turn]
    expected_outcome: str | None = Field(
        default=None, validation_alias=AliasChoices("expected_outcome", "expectedOutcome")
    )
    chatbot_role: str | None = Field(
        default=None, validation_alias=AliasChoices("chatbot_role", "chatbotRole")
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _has_turns(self) -> Conversation:
        if not self.turns:
            raise ValueError("a conversation needs at least one turn")
        return self

    @property
    def has_retrieval_context(self) -> bool:
        return any(t.retrieval_context for t in self.turns)


def as_conversation(value: Conversation | dict[str, Any]) -> Conversation:
    """Accept a Conversation or a plain dict in judgegraph's own format."""
    if isinstance(value, Conversation):
        return value
    return Conversation.model_validate(value)
