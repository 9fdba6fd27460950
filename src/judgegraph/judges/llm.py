"""The LLM judge: a rendered prompt, any LangChain chat model, structured output,
a re-ask with the validation error. Retries, the breaker and transcripts are in
docs/judges.md; retrying here (not in the client) makes ``attempts`` true.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Generator
from functools import lru_cache
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, UsageMetadata
from pydantic import BaseModel

from .. import providers
from ..data.results import JudgeAttempt, Usage
from ..providers import DEFAULT_TIMEOUT_S, ModelConfigError, resolve_model
from .base import Endpoint, Judge, JudgeOutcome, JudgeRequest, key_of
from .cache_hints import SeenPrefixes, first_message
from .limiter import CallLimiter
from .redact import Redactor
from .replies import lenient_parse
from .tokens import ROLES as _ROLES
from .tokens import count_tokens
from .tokens import encoding as _encoding
from .transport import DEFAULT_MAX_REPLY_BYTES, ReplyTooLarge, ReplyUndecodable

DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_PROMPT_TOKENS = 120_000  # fits the common 128k context windows with room for the reply
MAX_RETRY_AFTER_S = 120.0
#: Generation settings recorded in transcripts and keyed in the cache (never keys or headers).
SETTING_NAMES = ("temperature", "max_tokens", "max_completion_tokens", "top_p", "seed", "frequency_penalty",
                 "presence_penalty", "reasoning_effort", "n", "stop", "top_k", "num_predict")

REASK = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with only the structured answer, following the schema exactly."
)


__all__ = ["DEFAULT_TIMEOUT_S", "LLMJudge", "ModelConfigError", "resolve_model"]


def _is_invalid_output(exc: BaseException) -> bool:
    from langchain_core.exceptions import OutputParserException
    from pydantic import ValidationError

    if isinstance(exc, (ValidationError, OutputParserException, json.JSONDecodeError)):
        return True
    # a reply came back, unusable (cut at max_tokens, or filtered): the providers' SDKs say which
    return isinstance(exc, providers.error_types("invalid_output"))


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


#: The most tokens one request or reply is believed to report (10^8: past any context window); more is not usage.
MAX_REPORTED_TOKENS = 100_000_000


def _token_count(value: object) -> int | None:
    """``value`` when it is a whole number from 0 to :data:`MAX_REPORTED_TOKENS`, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 0 <= value <= MAX_REPORTED_TOKENS else None


def _cached_tokens(meta: UsageMetadata, input_tokens: int) -> int:
    """The input tokens served from the provider's prompt cache (LangChain's ``input_token_details.cache_read``);
    0 when absent or not a count within ``input_tokens``."""
    details = meta.get("input_token_details")
    found = _token_count(details.get("cache_read", 0)) if isinstance(details, dict) else None
    return found if found is not None and found <= input_tokens else 0


def _usage(raw: BaseMessage | None, prompt_messages: list[BaseMessage], *, reported: bool = True) -> Usage:
    """The reply's reported usage, else counted with tiktoken and ``estimated``: a reply's
    accounting never ends a run nor costs its verdict."""
    meta: UsageMetadata | None = getattr(raw, "usage_metadata", None) if reported else None
    if meta and isinstance(meta, dict):
        counts = _token_count(meta.get("input_tokens", 0)), _token_count(meta.get("output_tokens", 0))
        if counts[0] is not None and counts[1] is not None:
            return Usage(calls=1, input_tokens=counts[0], output_tokens=counts[1],
                         cached_input_tokens=_cached_tokens(meta, counts[0]))
    out_text = raw.text if isinstance(raw, AIMessage) else ""
    if isinstance(raw, AIMessage) and raw.tool_calls:
        out_text += "".join(str(tc.get("args")) for tc in raw.tool_calls)
    return Usage(calls=1, input_tokens=sum(count_tokens(m.text) for m in prompt_messages),
                 output_tokens=count_tokens(out_text), estimated=True)


def _error_summary(exc: BaseException) -> str:
    """One line for the re-ask; a ValidationError as ``field: message`` pairs (its
    ``str`` starts by naming the model, not what is wrong)."""
    from pydantic import ValidationError

    cause = next((e for e in _chain(exc)[:6] if isinstance(e, ValidationError)), None)
    if cause is not None:
        parts = []
        for err in cause.errors(include_url=False):
            loc = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
        return "; ".join(parts)[:500]
    text = str(exc)
    return text.splitlines()[0][:500] if text else text


def _fingerprint(raw: BaseMessage | None) -> str | None:
    """The ``system_fingerprint`` the provider sent with the reply (a LangChain chat model puts it in the
    message's ``response_metadata``): which backend configuration answered, beside the seed."""
    found = (getattr(raw, "response_metadata", None) or {}).get("system_fingerprint")
    return found if isinstance(found, str) and found else None


def _raw_text(raw: BaseMessage | None) -> str:
    if raw is None:
        return ""
    if isinstance(raw, AIMessage) and raw.tool_calls:
        return json.dumps(raw.tool_calls[0].get("args"), ensure_ascii=False, default=str)
    extra = getattr(raw, "additional_kwargs", {}) or {}
    calls = extra.get("tool_calls") or []
    if calls:
        return str(calls[0].get("function", {}).get("arguments", ""))
    return raw.text


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or during, at most 8 deep."""
    out = [exc]
    while len(out) < 8 and (cause := out[-1].__cause__ or out[-1].__context__) is not None:
        out.append(cause)
    return out


def _types(name: str) -> tuple[type[BaseException], ...]:
    """The class ``name`` of every HTTP library imported (``httpx``, or ``httpx2`` a newer SDK is built on)."""
    found = (getattr(sys.modules.get(module), name, None) for module in ("httpx", "httpx2"))
    return tuple(cls for cls in found if isinstance(cls, type) and issubclass(cls, BaseException))


def _status(exc: BaseException) -> int | None:
    """The HTTP status of an error reply (httpx's, or an SDK's ``status_code``)."""
    http_status = _types("HTTPStatusError")
    if http_status and isinstance(exc, http_status):
        return int(exc.response.status_code)  # type: ignore[attr-defined]
    code = getattr(exc, "status_code", None)
    if code is None:  # requests' HTTPError and the like: the reply on the exception
        code = getattr(getattr(exc, "response", None), "status_code", None)
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _in_chain(exc: BaseException, *types: type[BaseException]) -> bool:
    return any(isinstance(e, types) for e in _chain(exc))


def _refused(exc: BaseException) -> bool:
    """A connection that could not be made at all (refused, unknown host)."""
    return _in_chain(exc, ConnectionRefusedError, *_types("ConnectError"))


def _timed_out(exc: BaseException) -> bool:
    """A timeout anywhere in the chain (a provider SDK's, httpx's or the socket's)."""
    return _in_chain(exc, TimeoutError, *providers.error_types("timeout"), *_types("TimeoutException"))


def _too_large(exc: BaseException) -> BaseException | None:
    """The reply-size or -encoding refusal behind ``exc``, if that is what it is."""
    return next((e for e in _chain(exc) if isinstance(e, (ReplyTooLarge, ReplyUndecodable))), None)


def _is_fatal(exc: BaseException) -> bool:
    """Retrying cannot help: wrong key, no access, wrong URL or model, nothing listening."""
    return _status(exc) in (401, 403, 404) or (_refused(exc) and not _timed_out(exc))


def _is_transient(exc: BaseException) -> bool:
    """Worth sending again: 408/409/429/5xx, a timeout, a dropped connection (never a
    reply refused for its size: it would come again)."""
    status = _status(exc)
    if status is not None:
        return status in (408, 409, 429) or status >= 500
    if _too_large(exc) is not None:
        return False
    return _timed_out(exc) or _in_chain(exc, ConnectionError, *providers.error_types("connection"),
                                        *_types("TransportError"))


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return float(ms) / 1000
        return None if (s := headers.get("retry-after")) is None else float(s)
    except (TypeError, ValueError):
        return None


def _url(exc: BaseException, fallback: str) -> str:
    urls = (getattr(getattr(e, "request", None), "url", None) for e in _chain(exc))
    return next((str(url) for url in urls if url is not None), fallback)


def describe_request_error(exc: BaseException, deadline: float | None, redact: Redactor) -> str:
    """One line for a failed request (the embeddings runner's too), credentials taken out before the cut to 300
    characters (which could leave half a key); a timeout names its ``deadline``."""
    status = _status(exc)
    if (refusal := _too_large(exc)) is not None:
        return f"{type(refusal).__name__}: {refusal}"
    text = redact(" ".join(str(exc).split()))[:300]
    if _refused(exc) and not text.lower().startswith("connection refused"):
        text = f"{text} (connection refused)" if text else "connection refused"
    elif deadline is not None and _timed_out(exc):
        text = f"{text} (deadline of {deadline:g} s for the whole request)"
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {text}"


class Breaker:
    """Shared by every judgement of a judge (of a run): after the first failure
    that retrying cannot fix, it holds the reason and nothing more is sent."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._lock = threading.Lock()

    def trip(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason


def _model_settings(model: BaseChatModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SETTING_NAMES:
        value = getattr(model, name, None)
        if isinstance(value, (str, int, float, bool, list, tuple)):
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


#: A judgement in steps (see :meth:`LLMJudge._attempts`).
_Steps = Generator[tuple[float, list[BaseMessage]], "tuple[Any, float]", JudgeOutcome]


class LLMJudge(Judge):
    """Judges with a LangChain chat model (see :func:`resolve_model` and
    :func:`~judgegraph.judges.resolve_judge`). ``max_retries`` defaults to 3 for a model
    built from a string (its client does not retry), 0 for a model object (its client
    keeps its own). Every error and transcript entry goes through ``self.redact``."""

    kind = "llm"

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        max_tries: int = 3,
        limiter: CallLimiter | None = None,
        method: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        max_retries: int | None = None,
        max_prompt_tokens: int | None = DEFAULT_MAX_PROMPT_TOKENS,
        breaker: Breaker | None = None,
        max_reply_bytes: int | None = None,
        **model_kwargs: Any,
    ) -> None:
        for name, value, least in (("max_tries", max_tries, 1), ("max_retries", max_retries, 0),
                                   ("max_prompt_tokens", max_prompt_tokens, 1), ("max_reply_bytes", max_reply_bytes, 1)):
            if value is not None and value < least:
                raise ValueError(f"{name} must be >= {least}, got {value}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        built = not isinstance(model, BaseChatModel)
        if built:
            model_kwargs["max_reply_bytes"] = max_reply_bytes or DEFAULT_MAX_REPLY_BYTES
        self.model: BaseChatModel = (
            resolve_model(model, timeout=timeout, max_retries=0, **model_kwargs) if built else model  # type: ignore[assignment]
        )
        self.redact = Redactor.for_model(self.model)
        #: The provider whose chat model this is (None: another LangChain chat model).
        self.provider = providers.of_model(self.model)
        self.max_tries = max_tries
        self.max_retries = max_retries if max_retries is not None else (DEFAULT_MAX_RETRIES if built else 0)
        self.timeout = timeout if built else getattr(model, "request_timeout", None)
        # enforced by the clients a provider gives a model it builds, when it can (Provider.bounded)
        bounded = built and self.provider is not None and self.provider.bounded(self.model)
        self.deadline = timeout if bounded else None
        self.max_reply_bytes = (max_reply_bytes or DEFAULT_MAX_REPLY_BYTES) if bounded else None
        self.max_prompt_tokens = max_prompt_tokens
        self.limiter = limiter or CallLimiter(16)
        self.breaker = breaker or Breaker()
        self.method = method
        model_name = getattr(self.model, "model_name", None) or getattr(self.model, "model", None)
        self.model_name = str(model_name or type(self.model).__name__)
        self.name = f"llm:{self.model_name}"
        self.base_url = str((self.provider.base_url_of(self.model) if self.provider else None)
                            or getattr(self.model, "base_url", None) or "")
        self.settings: dict[str, Any] = _model_settings(self.model)
        if self.timeout is not None:
            self.settings["timeout"] = self.timeout
        self.settings["max_retries"] = self.max_retries
        if method:
            self.settings["method"] = method
        self._runnables: dict[type, Any] = {}
        #: The stable prompt parts sent, shared by the repeats: for a provider's cache marks (cache_hints).
        self.seen_prefixes = SeenPrefixes()
        self.repeat: int | None = None  # set on the repeats :meth:`with_seed` makes
        #: What each request is sent through instead of the bound model, when set (batch mode:
        #: judgegraph.batch answers from a batch's output file, same parsing as a live reply).
        self.via: Callable[[Any], Any] | None = None

    @property
    def seedable(self) -> bool:
        """Whether the chat model sends a ``seed`` (it has a ``seed`` field)."""
        return "seed" in (getattr(type(self.model), "model_fields", None) or {})

    def with_seed(self, seed: int, repeat: int) -> LLMJudge:
        """This judge as repeat ``repeat`` of a jury (``--repeat``), its model sending ``seed`` when it can; the
        limiter, breaker and cache are shared, but the cache key holds the repeat, so repeats never share an entry."""
        twin = copy.copy(self)
        twin.__dict__.pop("_prepared", None)
        twin.settings = dict(self.settings)
        if self.seedable:
            twin.model = self.model.model_copy(update={"seed": seed})
            twin.settings["seed"] = seed
        twin._runnables = {}
        twin.repeat = repeat
        return twin

    @property
    def endpoint(self) -> Endpoint | None:
        """Where this judge's model is served (its provider's :meth:`~judgegraph.providers.Provider.endpoint`),
        or None."""
        return self.provider.endpoint(self.model, self.deadline, self.max_reply_bytes) if self.provider else None

    @property
    def deterministic(self) -> bool:
        """Temperature 0: answers may be kept on disk (the persistent cache's default)."""
        return self.settings.get("temperature") == 0

    def _structured(self, schema: type) -> Any:
        """What a request is sent through: the provider's own structured path when it has one
        (:meth:`~judgegraph.providers.Provider.structured`), else ``with_structured_output``."""
        if schema not in self._runnables:
            own = self.provider.structured(self.model, schema, self.method) if self.provider else None
            if own is None and not self.method and _scripted(self.model):
                # the scripted model answers by a tool call: bound to the schema and read here (the same
                # answer as with_structured_output's, without its parser chain and worker threads per call)
                own = _ToolAnswer(self.model.bind_tools([schema]), schema)
            if own is None:
                kw = {"method": self.method} if self.method else {}
                own = self.model.with_structured_output(schema, include_raw=True, **kw)
            self._runnables[schema] = own
        return self._runnables[schema] if self.via is None else self.via(self._runnables[schema])

    def cache_key(self, request: JudgeRequest) -> str:
        """Model, settings, template text, rendered request and output schema, hashed."""
        model = type(self.model)
        payload = [
            f"{model.__module__}.{model.__qualname__}", self.model_name, self.base_url, self.method,
            {k: v for k, v in self.settings.items() if k not in ("timeout", "max_retries")},
            request.task, request.step, request.template.template, request.rendered, _schema_id(request.schema),
        ]
        if self.repeat is not None:  # a repeat of a jury (``--repeat``): its own entry, seed or no seed
            payload.append({"repeat": self.repeat})
        return key_of(payload)

    def first_request(self, request: JudgeRequest) -> BaseMessage | str:
        """The first message of ``request`` as sent (with the provider's cache marks: judges.cache_hints), or why
        it cannot be sent (the stopped judge's reason, a prompt over ``max_prompt_tokens``); the dry run's too."""
        if self.breaker.reason:
            return self.breaker.reason
        text = request.rendered
        if (too_long := self._too_long(text)) is not None:
            return too_long
        return first_message(self.provider, request.template, request.values, text, self.seen_prefixes)

    def _too_long(self, text: str) -> str | None:
        limit = self.max_prompt_tokens
        if limit is None or len(text) * 4 <= limit or len(text.encode("utf-8", "surrogatepass")) <= limit:
            return None  # a token is at least one UTF-8 byte
        n = count_tokens(text)
        if n <= limit:
            return None
        return f"prompt too long: {n} tokens, over the limit of {limit} (max_prompt_tokens); not sent"

    def _attempt(self, request: JudgeRequest, messages: list[BaseMessage], latency: float | None, *,
                 reply: str | None = None, error: str | None = None, usage: Usage | None = None,
                 raw: BaseMessage | None = None) -> JudgeAttempt:
        """A transcript entry (the one place they are made), credentials taken out; ``raw``: the
        reply message, whose ``system_fingerprint`` is recorded."""
        redact = self.redact
        sent = [{"role": _ROLES.get(m.type, m.type), "content": redact(m.text)} for m in messages]
        return JudgeAttempt(step=request.step, messages=sent, reply=redact(reply) if reply else reply,
                            error=redact(error) if error else error, latency_s=latency, usage=usage or Usage(),
                            model=self.model_name, settings=self.settings, system_fingerprint=_fingerprint(raw))

    def _attempts(self, request: JudgeRequest) -> _Steps:
        """The one implementation of a judgement, sync or async: yields ``(wait, messages)``,
        receives ``(result or exception, latency)``."""
        first = self.first_request(request)
        if isinstance(first, str):
            return JudgeOutcome(None, first, 0)
        messages: list[BaseMessage] = [first]
        usage = Usage()
        transcript: list[JudgeAttempt] = []
        sent = asks = retries = 0
        wait = 0.0
        while True:
            result, latency = yield wait, messages
            wait = 0.0
            if result is None:  # the breaker tripped while this request waited for its slot: not sent
                return JudgeOutcome(None, self.breaker.reason, sent, usage, transcript=transcript)
            sent += 1
            if isinstance(result, BaseException) and not _is_invalid_output(result):
                error = describe_request_error(result, self.deadline, self.redact)
                transcript.append(self._attempt(request, messages, latency, error=error))
                if _is_fatal(result):
                    url = self.redact(_url(result, self.base_url))
                    self.breaker.trip(f"judge stopped: {error} at {url} (no further requests are sent)")
                    return JudgeOutcome(None, f"{error} at {url}", sent, usage, transcript=transcript)
                if _is_transient(result) and retries < self.max_retries:
                    retries += 1
                    after = _retry_after(result)
                    if after is None:
                        after = min(30.0, 0.5 * 2 ** (retries - 1)) * (0.5 + random.random() / 2)
                    wait = min(max(after, 0.0), MAX_RETRY_AFTER_S)
                    continue
                suffix = f" ({sent} requests)" if sent > 1 else ""
                return JudgeOutcome(None, f"{error}{suffix}", sent, usage, transcript=transcript)
            if isinstance(result, BaseMessage):  # a provider's own structured path: validated here
                result = _read_reply(result, request.schema)
            if isinstance(result, BaseException):  # a client that parses in the call (json_schema) raised
                result = {"raw": AIMessage(_invalid_input(result)), "parsed": None, "parsing_error": result}
                used = _usage(result["raw"], messages, reported=False)
            else:
                used = _usage(result.get("raw"), messages)
            usage = usage + used
            if self.limiter.tpm is not None:
                self.limiter.settle(_estimate_tokens(messages), used.total_tokens)
            asks += 1
            raw, parsed, parsing_error = result.get("raw"), result.get("parsed"), result.get("parsing_error")
            reply = _raw_text(raw)
            if parsed is None or parsing_error is not None:
                parsed = lenient_parse(reply, request.schema)  # fenced JSON, "No, this is off-topic."
                if parsed is not None:
                    parsing_error = None
            if parsed is not None and parsing_error is None:
                if not isinstance(parsed, request.schema):
                    parsed = request.schema.model_validate(parsed)
                parsed = self._without_credentials(parsed)
                transcript.append(self._attempt(request, messages, latency, reply=reply, usage=used, raw=raw))
                return JudgeOutcome(parsed, None, sent, usage, transcript=transcript)
            error = _error_summary(parsing_error) if parsing_error else "the reply held no structured answer"
            transcript.append(self._attempt(request, messages, latency, reply=reply, error=error, usage=used,
                                            raw=raw))
            if asks >= self.max_tries:
                return JudgeOutcome(None, f"invalid output after {self.max_tries} tries: {error}", sent, usage,
                                    transcript=transcript)
            messages = [*messages, AIMessage(reply or "(empty reply)"), HumanMessage(REASK.format(error=error))]

    def _without_credentials(self, parsed: BaseModel) -> BaseModel:
        """The answer with every credential the judge holds taken out of its text (a proxy may echo the request's
        headers inside a successful reply); the answer itself when nothing was taken out."""
        def scrub(value: Any) -> Any:
            if isinstance(value, str):
                return self.redact(value)
            if isinstance(value, dict):
                return {k: scrub(v) for k, v in value.items()}
            if isinstance(value, list):
                return [scrub(v) for v in value]
            return value

        dumped = parsed.model_dump()
        clean = scrub(dumped)
        return parsed if clean == dumped else type(parsed).model_validate(clean)

    def _advance(self, steps: _Steps, sent: tuple[Any, float] | None) -> tuple[float, list[BaseMessage]] | JudgeOutcome:
        """The next request after ``sent``, or the outcome (its error redacted)."""
        try:
            return next(steps) if sent is None else steps.send(sent)
        except StopIteration as done:
            outcome: JudgeOutcome = done.value
            if outcome.error:
                outcome.error = self.redact(outcome.error)
            return outcome

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        steps, runnable = self._attempts(request), self._structured(request.schema)
        step = self._advance(steps, None)
        while not isinstance(step, JudgeOutcome):
            wait, messages = step
            if wait:
                time.sleep(wait)
            with self.limiter.slot(_estimate_tokens(messages) if self.limiter.tpm is not None else 0):
                start = time.perf_counter()
                try:  # None: the breaker tripped while this request waited for its slot
                    result: Any = None if self.breaker.reason else runnable.invoke(messages)
                except Exception as exc:  # noqa: BLE001 - reported as a judge error
                    result = exc
                latency = time.perf_counter() - start
                # read in the slot: a fatal error trips the breaker before a request waiting for the slot looks
                step = self._advance(steps, (result, latency))
        return step

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        """:meth:`judge`'s loop, awaiting the wait, the slot and the call."""
        steps, runnable = self._attempts(request), self._structured(request.schema)
        step = self._advance(steps, None)
        while not isinstance(step, JudgeOutcome):
            wait, messages = step
            if wait:
                await asyncio.sleep(wait)
            async with self.limiter.aslot(_estimate_tokens(messages) if self.limiter.tpm is not None else 0):
                start = time.perf_counter()
                try:
                    result: Any = None if self.breaker.reason else await runnable.ainvoke(messages)
                except Exception as exc:  # noqa: BLE001 - reported as a judge error
                    result = exc
                latency = time.perf_counter() - start
                step = self._advance(steps, (result, latency))  # in the slot, as in judge()
        return step

    def prepare(self, request: JudgeRequest) -> None:
        """The prompt file and the tokenizer (re-asks and unreported usage count tokens)."""
        if request.prompt is None:
            from ..data.prompts import load_prompt

            load_prompt(request.step)
        _encoding()


@lru_cache(maxsize=256)
def _schema_id(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), sort_keys=True)


def _answer(raw: BaseMessage, parse: Callable[[], BaseModel | None]) -> dict[str, Any]:
    """``with_structured_output(include_raw=True)``'s shape: ``parse()``'s answer, or its ValueError (pydantic's
    ValidationError and invalid JSON included) as ``parsing_error``."""
    try:
        return {"raw": raw, "parsed": parse(), "parsing_error": None}
    except ValueError as exc:
        return {"raw": raw, "parsed": None, "parsing_error": exc}


def _read_reply(raw: BaseMessage, schema: type[BaseModel]) -> dict[str, Any]:
    """A JSON reply read as ``with_structured_output`` reads it; an empty reply with a refusal is its error."""
    refusal = (getattr(raw, "additional_kwargs", None) or {}).get("refusal")
    if refusal and not raw.text.strip():
        return {"raw": raw, "parsed": None, "parsing_error": ValueError(f"the model refused: {refusal}")}
    return _answer(raw, lambda: schema.model_validate_json(raw.text))


def _scripted(model: BaseChatModel) -> bool:
    """The scripted chat model (judges/scripted.py), whose structured answers are tool calls."""
    scripted = sys.modules.get("judgegraph.judges.scripted")
    return scripted is not None and isinstance(model, scripted.ScriptedChatModel)


class _ToolAnswer:
    """A chat model bound to one schema as a tool, its reply read as ``with_structured_output(include_raw=True)``
    reads it (``PydanticToolsParser``, first tool only): the first tool call's arguments validated by the
    schema, a validation error as ``parsing_error``, no tool call as no answer."""

    def __init__(self, bound: Any, schema: type[BaseModel]) -> None:
        self.bound, self.schema = bound, schema

    def _read(self, raw: BaseMessage) -> dict[str, Any]:
        calls = raw.tool_calls if isinstance(raw, AIMessage) else []

        def parse() -> BaseModel | None:
            if not calls:
                return None
            if not isinstance(args := calls[0]["args"], dict):
                raise ValueError(f"Tool arguments must be specified as a dict, received: {args}")
            return self.schema(**args)

        return _answer(raw, parse)

    def invoke(self, messages: list[BaseMessage]) -> dict[str, Any]:
        return self._read(self.bound.invoke(messages))

    async def ainvoke(self, messages: list[BaseMessage]) -> dict[str, Any]:
        return self._read(await self.bound.ainvoke(messages))


def _estimate_tokens(messages: list[BaseMessage]) -> int:
    """About 4 characters a token, for pacing; settled with the real count after the reply."""
    return sum(len(m.text) for m in messages) // 4 + 1
