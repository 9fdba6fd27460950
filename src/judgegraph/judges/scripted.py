"""A scripted chat model (docs/judges.md, "Testing a judge with no model"): answers chosen by what the prompt
says, not by call order (windows are judged concurrently); also the base of the dry run's recorder.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, Union

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from .tokens import count_tokens, prompt_tokens

__all__ = ["Key", "Reply", "ScriptedChatModel", "ScriptedRequest"]

#: What a rule matches the prompt (or its ``section``) with.
Key: TypeAlias = Union[str, re.Pattern[str], Callable[[str], bool]]
#: One scripted answer (see the module doc).
Reply: TypeAlias = Union[dict[str, Any], str, BaseException, Callable[["ScriptedRequest"], Any]]


@dataclass(frozen=True)
class ScriptedRequest:
    """One request, as a callable reply sees it."""

    text: str
    """Every message's text, joined by blank lines (what the rules match)."""
    messages: list[BaseMessage]
    schema: Any = None
    """The output schema the caller bound (a pydantic class or a tool dict), or None."""

    @property
    def schema_name(self) -> str | None:
        """The schema's name (``TurnVerdict``...): which step of a judge is asking."""
        return _tool_name(self.schema)


def _tool_name(tool: object) -> str | None:
    return getattr(tool, "__name__", None) or (tool.get("name") if isinstance(tool, dict) else None)


class ScriptedChatModel(GenericFakeChatModel):
    """A chat model answering from ``rules`` and ``default`` (see the module doc)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # Any: Key and Reply values (see above), kept as given (a pydantic type here would validate and copy them)
    rules: list[tuple[Any, list[Any]]] = Field(default_factory=list)
    default: Any = None
    section: str | None = None
    model_name: str = "scripted"
    tool: Any = None
    """The output schema bound by ``bind_tools`` (``with_structured_output``), or None."""
    tool_name: str | None = None
    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))  # GenericFakeChatModel's: unused
    _state: dict[str, Any] = PrivateAttr(default_factory=lambda: {"lock": threading.Lock(), "used": {}, "prompts": []})

    @property
    def prompts(self) -> list[str]:
        """Every prompt seen, in arrival order (shared by bound copies)."""
        return self._state["prompts"]

    @property
    def call_count(self) -> int:
        return len(self.prompts)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """A copy answering for ``tools[0]``; its prompts, counts (and a
        subclass's private state) are shared with this model."""
        tool = tools[0] if tools else None
        return self.model_copy(update={"tool": tool, "tool_name": _tool_name(tool)})  # private attrs: same objects

    def respond(self, request: ScriptedRequest) -> Any:
        """The first matching rule's next reply, else ``default`` (the dry run's recorder overrides it)."""
        reply = self._pick(request.text)
        if callable(reply) and not isinstance(reply, type):
            reply = reply(request)
        return reply

    def _matches(self, key: Key, text: str) -> bool:
        if isinstance(key, str):
            return key in text
        if isinstance(key, re.Pattern):
            return key.search(text) is not None
        return bool(key(text))

    def _pick(self, text: str) -> Any:
        """The rule-chosen reply for a prompt (recorded in :attr:`prompts`)."""
        target = text
        if self.section:
            m = re.search(rf"<{self.section}>(.*?)</{self.section}>", text, re.S)
            target = m.group(1) if m else ""
        with self._state["lock"]:
            self._state["prompts"].append(text)
            for i, (key, replies) in enumerate(self.rules):
                if self._matches(key, target):
                    n = self._state["used"].get(i, 0)
                    self._state["used"][i] = n + 1
                    return replies[min(n, len(replies) - 1)]
        if self.default is None:
            raise LookupError(f"ScriptedChatModel: no rule matches prompt: {target[:200]!r}")
        return self.default

    def _usage(self, request: ScriptedRequest, reply: object) -> dict[str, int]:
        """The reply's ``usage_metadata``, counted as OpenAI counts."""
        in_tokens = prompt_tokens(request.messages)
        out_tokens = count_tokens(json.dumps(reply, ensure_ascii=False, default=str) if isinstance(reply, dict) else str(reply))
        return {"input_tokens": in_tokens, "output_tokens": out_tokens, "total_tokens": in_tokens + out_tokens}

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any,
    ) -> ChatResult:
        request = ScriptedRequest(text="\n\n".join(m.text for m in messages), messages=list(messages), schema=self.tool)
        reply = self.respond(request)
        if isinstance(reply, BaseException):
            raise reply
        usage = self._usage(request, reply)
        if isinstance(reply, dict):
            call = {"name": self.tool_name or "answer", "args": reply, "id": f"call_{uuid.uuid4().hex[:8]}"}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        else:
            message = AIMessage(content=str(reply), usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"
