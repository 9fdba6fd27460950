"""The LLM judge: a rendered prompt, any LangChain chat model, structured output,
a re-ask with the validation error. Retries, the breaker and transcripts are in
docs/judges.md; retrying here (not in the client) makes ``attempts`` true.
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import hashlib
import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Generator
from functools import lru_cache
from types import ModuleType
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, SecretStr

from ..results import JudgeAttempt, Usage
from .base import Endpoint, Judge, JudgeOutcome, JudgeRequest
from .cache_hints import SeenPrefixes, prompt_message
from .limiter import CallLimiter
from .redact import Redactor
from .replies import lenient_parse
from .tokens import ROLES as _ROLES
from .tokens import count_tokens
from .tokens import encoding as _encoding
from .transport import DEFAULT_MAX_REPLY_BYTES, ReplyTooLarge, ReplyUndecodable

DEFAULT_TIMEOUT_S = 120.0
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


class ModelConfigError(ValueError):
    pass


def split_model(spec: str) -> tuple[str, str]:
    """``"provider:name"`` → (provider, name); a bare name is OpenAI's."""
    provider, _, name = spec.partition(":") if ":" in spec else ("openai", "", spec)
    return provider, name


def server_url(model: object, base_url: str | None) -> str | None:
    """The server a judge built from ``model`` talks to: ``base_url``, else, for an OpenAI model (``openai:...`` or
    a bare name), ``$OPENAI_BASE_URL`` as the openai client itself reads it (a local server needs no key). One rule
    for the command line, ``resolve_judge`` and the pytest plugin."""
    if base_url:
        return base_url
    env = os.environ.get("OPENAI_BASE_URL", "").strip()
    if env and isinstance(model, str) and split_model(model.strip())[0] == "openai":
        return env
    return None


def api_key_for(variable: str, api_key: str | None, base_url: str | None, missing: str) -> SecretStr:
    """``api_key``, else ``$variable``, else a placeholder when ``base_url`` (a local server needs none);
    ``ModelConfigError(missing)`` when there is neither."""
    key = api_key or os.environ.get(variable)
    if not key and not base_url:
        raise ModelConfigError(missing)
    return SecretStr(key or "not-needed")


def openai_key(api_key: str | None, base_url: str | None, missing: str) -> SecretStr:
    """``api_key``, else ``OPENAI_API_KEY``, else a placeholder when ``base_url`` (a local server needs none)."""
    return api_key_for("OPENAI_API_KEY", api_key, base_url, missing)


def anthropic_model(name: str, *, base_url: str | None, api_key: str | None, temperature: float | None,
                    timeout: float | None, max_retries: int) -> BaseChatModel:
    """``langchain_anthropic.ChatAnthropic`` for Claude model ``name`` (``anthropic:NAME``), at ``base_url`` when
    given (an Anthropic Messages API server: a gateway, a proxy, a test server), else where ChatAnthropic itself
    looks (``$ANTHROPIC_BASE_URL``, else Anthropic's API). The key: ``api_key``, else ``$ANTHROPIC_API_KEY``,
    else a placeholder when ``base_url`` (a local server needs none). ``timeout`` is the Anthropic SDK's own
    (per read, not a whole-request deadline), and its replies are not size-capped: the :mod:`.transport` clients
    are built on the openai SDK's HTTP library."""
    try:
        from langchain_anthropic import ChatAnthropic
    except ImportError as exc:
        raise ModelConfigError(f"model 'anthropic:{name}' needs langchain-anthropic: pip install"
                               " 'judgegraph[anthropic]' (or pass a chat model object)") from exc
    key = api_key_for("ANTHROPIC_API_KEY", api_key, base_url,
                      f"model 'anthropic:{name}' needs ANTHROPIC_API_KEY (or --base-url for an Anthropic-compatible"
                      " server); leave the model out to use the offline judge")
    kwargs: dict[str, Any] = {"model": name, "api_key": key, "max_retries": max_retries, "timeout": timeout}
    if base_url:
        kwargs["base_url"] = base_url
    if temperature is not None:
        kwargs["temperature"] = temperature
    return ChatAnthropic(**kwargs)


def resolve_model(
    model: str | BaseChatModel,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    temperature: float | None = 0.0,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    max_retries: int = 0,
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
) -> BaseChatModel:
    """A chat model from an object or a string: ``openai:gpt-4.1-mini``, ``gpt-4.1-mini``,
    or ``provider:model`` through ``langchain``'s ``init_chat_model`` when installed;
    ``base_url`` for any OpenAI-compatible server, or for an ``anthropic:`` model an Anthropic one
    (:func:`anthropic_model`). An OpenAI model gets the :mod:`.transport` clients (``timeout`` a
    whole-request deadline, replies capped)."""
    if isinstance(model, BaseChatModel):
        return model
    if not isinstance(model, str) or not model.strip():
        raise ModelConfigError(f"model must be a chat model object or a string, got {model!r}")
    provider, name = split_model(model)
    base_url = server_url(model, base_url)
    if base_url and provider not in ("openai", "anthropic"):
        close = difflib.get_close_matches(provider, ["openai", "anthropic"], n=1)
        hint = f"did you mean '{close[0]}:{name}'? " if close else ""
        raise ModelConfigError(
            f"model {model!r}: a server at a base URL takes 'openai:NAME' (OpenAI-compatible) or 'anthropic:NAME'"
            f" models, not {provider!r}; {hint}a name holding ':' is written whole after the prefix"
            f" ('openai:{model}')")
    if provider == "anthropic":
        return anthropic_model(name, base_url=base_url, api_key=api_key, temperature=temperature, timeout=timeout,
                               max_retries=max_retries)
    if provider == "openai":
        from langchain_openai import ChatOpenAI

        key = openai_key(api_key, base_url, f"model {model!r} needs OPENAI_API_KEY, or the URL of an OpenAI-compatible"
                         " server ($OPENAI_BASE_URL; base_url= in Python, --base-url on the command line,"
                         " --judgegraph-base-url with pytest); leave the model out to use the offline judge")
        from .transport import openai_http_clients

        sync_client, async_client = openai_http_clients(base_url, timeout=timeout, max_reply_bytes=max_reply_bytes)
        kwargs: dict[str, Any] = {"model": name, "timeout": timeout, "max_retries": max_retries,
                                  "http_client": sync_client, "http_async_client": async_client}
        if temperature is not None:
            kwargs["temperature"] = temperature
        return ChatOpenAI(api_key=key, base_url=base_url, **kwargs)
    try:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise ModelConfigError(
            f"model {model!r}: only 'openai:' models are built in; install 'langchain' and the"
            f" provider's package for {provider!r}, or pass a chat model object"
        ) from exc
    return init_chat_model(model, temperature=temperature)


def _is_invalid_output(exc: BaseException) -> bool:
    from langchain_core.exceptions import OutputParserException
    from pydantic import ValidationError

    if isinstance(exc, (ValidationError, OutputParserException, json.JSONDecodeError)):
        return True
    # a reply came back, unusable (cut at max_tokens, or filtered)
    # not imported (or still being imported by another thread): none of its errors can be here
    openai = sys.modules.get("openai")
    found = (getattr(openai, name, None) for name in ("LengthFinishReasonError", "ContentFilterFinishReasonError"))
    return isinstance(exc, tuple(t for t in found if isinstance(t, type)))


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


def _cached_tokens(meta: dict[str, Any], input_tokens: int) -> int:
    """The input tokens the provider served from its prompt cache: LangChain's
    ``input_token_details.cache_read`` (OpenAI's ``prompt_tokens_details.cached_tokens``, Anthropic's
    ``cache_read_input_tokens``); 0 when absent or not a count within ``input_tokens``."""
    details = meta.get("input_token_details")
    found = _token_count(details.get("cache_read", 0)) if isinstance(details, dict) else None
    return found if found is not None and found <= input_tokens else 0


def _usage(raw: BaseMessage | None, prompt_messages: list[BaseMessage], *, reported: bool = True) -> Usage:
    """The reply's reported usage, else counted with tiktoken and ``estimated``: a reply's
    accounting never ends a run nor costs its verdict."""
    meta = getattr(raw, "usage_metadata", None) if reported else None
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
    """The ``system_fingerprint`` the provider sent with the reply (langchain-openai puts it in the
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


@lru_cache(maxsize=1)
def _openai() -> ModuleType:
    """The openai SDK (imported on the first failure, not with this module)."""
    import openai

    return openai


def _types(name: str) -> tuple[type[BaseException], ...]:
    """The class ``name`` of every HTTP library imported (``httpx``, ``httpx2`` under openai 3)."""
    found = (getattr(sys.modules.get(module), name, None) for module in ("httpx", "httpx2"))
    return tuple(cls for cls in found if isinstance(cls, type) and issubclass(cls, BaseException))


def _status(exc: BaseException) -> int | None:
    """The HTTP status of an error reply (openai's, httpx's, or another SDK's ``status_code``)."""
    if isinstance(exc, _openai().APIStatusError):
        return int(exc.status_code)
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
    """A timeout anywhere in the chain (openai's, httpx's or the socket's)."""
    return _in_chain(exc, TimeoutError, _openai().APITimeoutError, *_types("TimeoutException"))


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
    return _timed_out(exc) or _in_chain(exc, ConnectionError, _openai().APIConnectionError, *_types("TransportError"))


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


def _transport_error(exc: BaseException, deadline: float | None, redact: Redactor) -> str:
    """One line for a failed request, credentials taken out before the cut to 300
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


#: The one line for a failed request, public for the other clients built on the
#: judge's transport (the embeddings runner describes its errors with it).
describe_request_error = _transport_error


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
        self.max_tries = max_tries
        self.max_retries = max_retries if max_retries is not None else (DEFAULT_MAX_RETRIES if built else 0)
        self.timeout = timeout if built else getattr(model, "request_timeout", None)
        # enforced by the clients resolve_model gives a built OpenAI-compatible model (not ChatAnthropic's)
        bounded = built and hasattr(self.model, "openai_api_base")
        self.deadline = timeout if bounded else None
        self.max_reply_bytes = (max_reply_bytes or DEFAULT_MAX_REPLY_BYTES) if bounded else None
        self.max_prompt_tokens = max_prompt_tokens
        self.limiter = limiter or CallLimiter(16)
        self.breaker = breaker or Breaker()
        self.method = method
        model_name = getattr(self.model, "model_name", None) or getattr(self.model, "model", None)
        self.model_name = str(model_name or type(self.model).__name__)
        self.name = f"llm:{self.model_name}"
        self.base_url = str(getattr(self.model, "openai_api_base", None) or getattr(self.model, "anthropic_api_url", None)
                            or getattr(self.model, "base_url", None) or "")
        self.settings: dict[str, Any] = _model_settings(self.model)
        if self.timeout is not None:
            self.settings["timeout"] = self.timeout
        self.settings["max_retries"] = self.max_retries
        if method:
            self.settings["method"] = method
        self._runnables: dict[type, Any] = {}
        #: The stable prompt parts sent, shared by the repeats: for Anthropic's cache marks (cache_hints).
        self.seen_prefixes = SeenPrefixes()
        self.repeat: int | None = None  # set on the repeats :meth:`with_seed` makes
        #: What each request is sent through instead of the bound model, when set (batch mode:
        #: judgegraph.batch answers from a batch's output file, same parsing as a live reply).
        self.via: Callable[[Any], Any] | None = None

    @property
    def seedable(self) -> bool:
        """Whether the chat model sends a ``seed`` (an OpenAI-compatible model does)."""
        return "seed" in (getattr(type(self.model), "model_fields", None) or {})

    def with_seed(self, seed: int, repeat: int) -> LLMJudge:
        """This judge as repeat ``repeat`` of a jury (``--repeat``): its model sends ``seed`` when it
        can (:attr:`seedable`), the temperature stays as set; the limiter, breaker and cache are
        shared, and the cache key holds the repeat (and the seed, in the settings), so repeats are
        never served from one entry."""
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
        """The OpenAI-compatible server of this judge's model, or None for another kind."""
        key = getattr(self.model, "openai_api_key", None)
        if not hasattr(self.model, "openai_api_base") and key is None:
            return None
        return Endpoint(getattr(self.model, "openai_api_base", None), key if isinstance(key, SecretStr) else None,
                        self.deadline, self.max_reply_bytes)

    @property
    def deterministic(self) -> bool:
        """Temperature 0: answers may be kept on disk (the persistent cache's default)."""
        return self.settings.get("temperature") == 0

    def _structured(self, schema: type) -> Any:
        """What a request is sent through: for ``ChatOpenAI`` with ``json_schema``, the model
        bound once to the strict ``response_format`` (the same request on the wire as
        ``with_structured_output``, without its per-call cost, docs/judges.md); else
        ``with_structured_output``."""
        if schema not in self._runnables:
            if self.method in (None, "json_schema") and _is_openai_chat(self.model):
                fmt = {"type": "json_schema",
                       "json_schema": {"name": schema.__name__, "schema": strict_json_schema(schema), "strict": True}}
                extra = dict(getattr(self.model, "extra_body", None) or {})
                self._runnables[schema] = self.model.bind(extra_body={**extra, "response_format": fmt})
            else:
                kw = {"method": self.method} if self.method else {}
                self._runnables[schema] = self.model.with_structured_output(schema, include_raw=True, **kw)
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
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

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
        if self.breaker.reason:
            return JudgeOutcome(None, self.breaker.reason, 0)
        text = request.rendered
        if (too_long := self._too_long(text)) is not None:
            return JudgeOutcome(None, too_long, 0)
        # one string, or for ChatAnthropic the stable part marked for its cache (cache_hints)
        messages: list[BaseMessage] = [prompt_message(self.model, request.template, request.values, text,
                                                                  self.seen_prefixes)]
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
                error = _transport_error(result, self.deadline, self.redact)
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
            if isinstance(result, BaseMessage):  # the bound OpenAI path: validated here
                result = _read_reply(result, request.schema)
            if isinstance(result, BaseException):
                # Some clients parse inside the call (OpenAI's json_schema path)
                # and raise instead of returning a parsing error.
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
        """The answer with every credential the judge holds taken out of its text: a server or proxy may echo
        the request's headers inside a successful reply, and its reason would carry them into results, reports
        and the cache. The answer itself when nothing was taken out."""
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
        """The next request after ``sent``, or the outcome (the one place it leaves the
        judge: its error redacted)."""
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
            step = self._advance(steps, (result, latency))
        return step

    def prepare(self, request: JudgeRequest) -> None:
        """The prompt file and the tokenizer (re-asks and unreported usage count tokens)."""
        if request.prompt is None:
            from ..prompts import load_prompt

            load_prompt(request.step)
        _encoding()


@lru_cache(maxsize=256)
def _schema_id(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), sort_keys=True)


def _is_openai_chat(model: object) -> bool:
    """A ``langchain_openai.ChatOpenAI`` (checked without importing the package)."""
    cls = getattr(sys.modules.get("langchain_openai"), "ChatOpenAI", None)
    return cls is not None and type(model) is cls


def _read_reply(raw: BaseMessage, schema: type[BaseModel]) -> dict[str, Any]:
    """``with_structured_output(include_raw=True)``'s shape for a JSON reply."""
    text = raw.text
    refusal = (getattr(raw, "additional_kwargs", None) or {}).get("refusal")
    if refusal and not text.strip():
        return {"raw": raw, "parsed": None, "parsing_error": ValueError(f"the model refused: {refusal}")}
    try:
        return {"raw": raw, "parsed": schema.model_validate_json(text), "parsing_error": None}
    except ValueError as exc:  # pydantic's ValidationError, invalid JSON included
        return {"raw": raw, "parsed": None, "parsing_error": exc}


def strict_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema in OpenAI's strict form, by the SDK's own function."""
    from openai.lib._pydantic import to_strict_json_schema

    return to_strict_json_schema(schema)


def _estimate_tokens(messages: list[BaseMessage]) -> int:
    """About 4 characters a token, for pacing; settled with the real count after the reply."""
    return sum(len(m.text) for m in messages) // 4 + 1
