"""The conversation model every metric reads: loaders turn every file format into it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from .toolref import check_metadata

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

Role = Literal["user", "assistant", "system", "tool"]
ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
#: a conversation's or a turn's metadata: a bad ``expected_tools`` in it is an input error naming its field
#: (docs/agents.md)
Metadata = Annotated[dict[str, Any], AfterValidator(check_metadata)]


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
    metadata: Metadata = Field(default_factory=dict)

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
    metadata: Metadata = Field(default_factory=dict)

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
    return value if isinstance(value, Conversation) else Conversation.model_validate(value)


#: Where a message may carry the retrieval context its reply was written from.
RETRIEVAL_KEYS = ("retrieval_context", "retrievalContext")

_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool",
                 "HumanMessageChunk": "user", "AIMessageChunk": "assistant"}


def _message_objects(messages: Iterable[object]) -> list[BaseMessage]:
    """BaseMessage objects from objects, ``messages_to_dict`` dumps (``{"type", "data"}``), and whatever
    ``MessagesState`` accepts (LangChain's ``convert_to_messages``: ``model_dump()`` and OpenAI-style
    ``{"role", "content"}`` dicts, the ``("user", "...")`` shorthand, a bare string as a user message)."""
    from langchain_core.messages import BaseMessage, convert_to_messages, messages_from_dict

    out: list[BaseMessage] = []
    for i, message in enumerate(messages):
        if isinstance(message, BaseMessage):
            out.append(message)
        elif isinstance(message, dict) and set(message) == {"type", "data"} and isinstance(message["data"], dict):
            out.extend(messages_from_dict([message]))
        else:
            try:
                out.extend(convert_to_messages([message]))  # type: ignore[list-item]  # checked by LangChain
            except (NotImplementedError, ValueError, TypeError, KeyError) as exc:
                raise ValueError(f"messages[{i}]: expected a LangChain message, a dict or a (role, content) pair,"
                                 f" got {type(message).__name__}: {exc}") from None
    return out


def _retrieval(message: BaseMessage) -> list[Any]:  # strings or dicts, as given: Turn validates them
    for where in (message.additional_kwargs, message.response_metadata):
        for key in RETRIEVAL_KEYS:
            if where.get(key):
                return list(where[key]) if isinstance(where[key], (list, tuple)) else [where[key]]
    return []


def from_messages(messages: Iterable[BaseMessage | dict[str, Any]], **fields: Any) -> Conversation:
    """A :class:`Conversation` from LangChain messages (objects, dumps, ``{"role", "content"}`` dicts, pairs), tool
    calls with their outputs, retrieval context from ``additional_kwargs`` / ``response_metadata``; ``fields``: ``id``..."""
    objs = _message_objects(list(messages))
    outputs = {call_id: m.text for m in objs if (call_id := getattr(m, "tool_call_id", None))}
    turns: list[Turn] = []
    for i, m in enumerate(objs):
        role = _ROLE_OF_TYPE.get(m.type)
        if role is None:
            raise ValueError(f"messages[{i}]: a {m.type!r} message has no conversation role"
                             " (human, ai, system and tool messages do)")
        calls = [
            ToolCall(name=c["name"], arguments=c.get("args"), id=c.get("id"), output=outputs.get(c.get("id")))
            for c in getattr(m, "tool_calls", None) or []
        ]
        meta = {k: v for k, v in (("id", m.id), ("name", m.name), ("tool_call_id", getattr(m, "tool_call_id", None)))
                if v}
        turns.append(Turn(role=role, content=m.text, tool_calls=calls,  # type: ignore[arg-type]
                          retrieval_context=_retrieval(m), metadata=meta))
    return Conversation(turns=turns, **fields)
