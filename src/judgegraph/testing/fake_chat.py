"""A scripted fake chat model keyed by prompt content, for tests and demos.

Replies are chosen by what the prompt says, not by call order: the windows of a
conversation are judged concurrently and finish in any order. Each rule is
``(key, replies)``: ``key`` is a substring (or a compiled regex, or a callable
taking the text) matched against the prompt — or only against one tagged
section of it, e.g. ``section="reply_to_judge"`` — and ``replies`` are used in
order for that rule, the last one repeating. A reply is:

* a ``dict``: the structured answer, returned as a tool call so
  ``with_structured_output`` parses it;
* a ``str``: raw text (use it for malformed output);
* an ``Exception``: raised, as a failing provider would;
* a callable ``(prompt_text, schema) -> reply``: called with the prompt and
  the structured-output schema bound (None without one), for a model that
  answers any request (e.g. from the schema).

Usage metadata is filled in with tiktoken counts, like a real provider's.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

Key = str | re.Pattern[str] | Callable[[str], bool]


class ScriptedChatModel(GenericFakeChatModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    rules: list[tuple[Any, list[Any]]] = Field(default_factory=list)
    default: Any = None
    section: str | None = None
    model_name: str = "scripted"
    tool_name: str | None = None
    tool_schema: Any = None
    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    _state: dict[str, Any] = PrivateAttr(default_factory=lambda: {"lock": threading.Lock(), "used": {}, "prompts": []})

    @property
    def prompts(self) -> list[str]:
        """Every prompt seen, in arrival order (shared by bound copies)."""
        return self._state["prompts"]

    @property
    def call_count(self) -> int:
        return len(self.prompts)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        tool = tools[0] if tools else None
        name = getattr(tool, "__name__", None) or (tool.get("name") if isinstance(tool, dict) else None)
        copy = self.model_copy(update={"tool_name": name, "tool_schema": tool if isinstance(tool, type) else None})
        copy._state = self._state
        return copy

    def _matches(self, key: Any, text: str) -> bool:
        if isinstance(key, str):
            return key in text
        if isinstance(key, re.Pattern):
            return key.search(text) is not None
        return bool(key(text))

    def _pick(self, text: str) -> Any:
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

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        from ..judges.llm import count_tokens

        text = "\n\n".join(m.text for m in messages)
        reply = self._pick(text)
        if callable(reply) and not isinstance(reply, type):
            reply = reply(text, self.tool_schema)
        if isinstance(reply, BaseException):
            raise reply
        in_tokens, out_tokens = count_tokens(text), count_tokens(str(reply))
        usage = {"input_tokens": in_tokens, "output_tokens": out_tokens, "total_tokens": in_tokens + out_tokens}
        if isinstance(reply, dict):
            call = {"name": self.tool_name or "answer", "args": reply, "id": f"call_{uuid.uuid4().hex[:8]}"}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        else:
            message = AIMessage(content=str(reply), usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"
