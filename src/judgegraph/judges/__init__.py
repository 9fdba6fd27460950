"""Judges: who makes each judgement (an LLM, or the offline embedding judge)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, Union, cast

from pydantic import BaseModel, ConfigDict, Field

from .._lazy import lazy_exports
from .base import Endpoint, Judge, JudgeOutcome, JudgeRequest
from .cache import DiskCache, JudgeCache, default_cache_path
from .limiter import CallLimiter, RateBucket

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from .aligned import AlignedJudge, Alignment
    from .jury import Jury

__all__ = [
    "CallLimiter", "DiskCache", "Endpoint", "Judge", "JudgeCache", "JudgeConfig", "JudgeOutcome", "JudgeRequest", "Jury",
    "ModelLike", "NeedsLLMJudge", "NoModel", "RateBucket", "default_cache_path", "load_aligned", "require_tasks",
    "resolve_judge",
]

#: What every metric factory's ``model`` takes: a ready :class:`Judge`, a chat
#: model, a model string (``openai:gpt-4.1-mini``), or None (the offline judge).
ModelLike: TypeAlias = Union[str, "BaseChatModel", Judge, None]


class JudgeConfig(BaseModel):
    """A judge's settings, typed (docs/judges.md): what :func:`resolve_judge` builds a judge from. ``model``: a
    :class:`Judge` as it is, a chat model or ``provider:name`` string for an LLM judge, None for the offline judge,
    a list of them for a jury. ``client``: the chat model's own keyword arguments (``base_url``, ``api_key``,
    ``temperature``...), given to its provider (:mod:`judgegraph.providers`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    model: Any = None
    repeat: int | None = None
    aggregate: str | None = None
    quorum: int | None = None
    max_concurrency: int = 16
    max_tries: int = 3
    #: True caches in memory, and on disk at temperature 0; a path caches in that file; False neither.
    cache: Any = True
    timeout: float | None = None
    max_retries: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    max_prompt_tokens: int | None = None
    max_reply_bytes: int | None = None
    #: The offline judge's fitted decision rule or its file (docs/offline_alignment.md).
    rule: Any = None
    #: An LLM judge's alignment or its ``aligned-….json`` file (docs/alignment.md).
    aligned: Any = None
    client: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, model: Any = None, **settings: Any) -> JudgeConfig:
        """The configuration of ``resolve_judge(model, **settings)``: the settings it names are its fields,
        the rest the chat model's own (:attr:`client`)."""
        own = {k: v for k, v in settings.items() if k in cls.model_fields and k not in ("model", "client")}
        return cls(model=model, **own, client={k: v for k, v in settings.items() if k not in own})

    def juror(self, model: Any) -> JudgeConfig:
        """The configuration of one juror (or of the judge a repeat repeats): these settings, ``model``."""
        return self.model_copy(update={"model": model, "repeat": None, "aggregate": None, "quorum": None,
                                       "aligned": None})


def resolve_judge(model: ModelLike | Sequence[ModelLike] | JudgeConfig = None, **settings: Any) -> Judge:
    """The judge for a :class:`JudgeConfig`, or for ``model`` and the settings as keywords (its fields; any other
    keyword is the chat model's own, e.g. ``base_url``): a :class:`Judge` as it is, an
    :class:`~judgegraph.judges.llm.LLMJudge` for a chat model or string, the offline judge for None, a
    :class:`~judgegraph.judges.jury.Jury` for a list of models or ``repeat`` N > 1 (docs/juries.md), an
    :class:`~judgegraph.judges.aligned.AlignedJudge` with ``aligned``. Settings: docs/judges.md; ValueError for
    settings that do not fit the judge (``rule`` for an LLM judge, ``aligned`` without one, a tampered file)."""
    if isinstance(model, JudgeConfig):
        if settings:
            raise TypeError(f"a JudgeConfig holds every setting: {', '.join(sorted(settings))} given beside it")
        return _build(model)
    return _build(JudgeConfig.of(model, **settings))


def load_aligned(path: str | os.PathLike[str] | Alignment, model: Any = None, **settings: Any) -> AlignedJudge:
    """The aligned judge of an ``aligned-….json`` file (or an :class:`Alignment`), ready as any metric's
    ``model=``. ``model``: the base judge (a model string, a chat model or a Judge; default: the file's model,
    an OpenAI model); ``settings``: :func:`~judgegraph.judges.resolve_judge`'s (``base_url``, ``timeout``...).
    ``ValueError``: an unreadable or tampered file, or a model other than the one it was made for."""
    from .aligned import AlignedJudge, Alignment, read_alignment

    alignment = path if isinstance(path, Alignment) else read_alignment(path)
    return AlignedJudge(resolve_judge(alignment.model if model is None else model, **settings), alignment)


def _build(config: JudgeConfig) -> Judge:
    model, repeat = config.model, config.repeat
    if config.aligned is not None:
        from .aligned import AlignedJudge, Alignment, read_alignment

        if model is None:
            raise ValueError("an aligned judge (--aligned) wraps an LLM judge: give its model (--model)")
        alignment = config.aligned if isinstance(config.aligned, Alignment) else read_alignment(config.aligned)
        return AlignedJudge(_build(config.model_copy(update={"aligned": None})), alignment)
    several = isinstance(model, (list, tuple)) or (repeat is not None and repeat != 1)
    if not several and (config.aggregate is not None or config.quorum is not None):
        raise ValueError(f"{'aggregate' if config.aggregate is not None else 'quorum'} is a jury's setting: give"
                         " several models (--model a --model b) or repeat=N (--repeat N)")
    aggregate, quorum = config.aggregate or "majority", config.quorum
    if several:
        from .jury import Jury

        if not isinstance(model, (list, tuple)):
            return Jury.repeat(_build(config.juror(model)), cast(int, repeat), aggregate=aggregate, quorum=quorum)
        jurors = [_build(config.juror(m)) for m in model]
        if repeat is not None and repeat > 1:
            return Jury.repeat(Jury(jurors), repeat, aggregate=aggregate, quorum=quorum)
        return Jury(jurors, aggregate=aggregate, quorum=quorum)
    made = _single(config)
    if not isinstance(model, Judge):  # a ready judge keeps its own cache
        made.cache = _make_cache(made, config.cache)
    return made


def _single(config: JudgeConfig) -> Judge:
    """One judge (no jury, no alignment) for ``config``; its cache is set by the caller."""
    model, client, rule = config.model, config.client, config.rule
    settings = {k: v for k in ("timeout", "max_retries", "rpm", "tpm", "max_prompt_tokens", "max_reply_bytes")
                if (v := getattr(config, k)) is not None}
    if isinstance(model, Judge):
        given = {**client, **settings, **({"rule": rule} if rule is not None else {})}
        if given:
            raise TypeError(f"settings for a ready judge: {', '.join(sorted(given))} (give them when it is built)")
        return model
    if model is None:
        from .offline import EmbeddingJudge

        if client or settings:
            raise TypeError(f"the offline judge takes no model settings: {', '.join(sorted({**client, **settings}))}")
        return EmbeddingJudge(rule=rule)
    if rule is not None:
        raise ValueError("a fitted offline rule (--offline-rule) is for the offline judge: give no --model with it")
    from .llm import DEFAULT_MAX_PROMPT_TOKENS, DEFAULT_TIMEOUT_S, LLMJudge

    for name, rate in (("rpm", config.rpm), ("tpm", config.tpm)):
        if rate is not None and not rate > 0:
            raise ValueError(f"{name} must be > 0, got {rate}")
    return LLMJudge(cast("Union[str, BaseChatModel]", model), max_tries=config.max_tries,
                    limiter=CallLimiter(config.max_concurrency, rpm=config.rpm, tpm=config.tpm),
                    timeout=config.timeout if config.timeout is not None else DEFAULT_TIMEOUT_S,
                    max_retries=config.max_retries,
                    max_prompt_tokens=config.max_prompt_tokens or DEFAULT_MAX_PROMPT_TOKENS,
                    max_reply_bytes=config.max_reply_bytes, **client)


_, __getattr__ = lazy_exports(__name__, {"jury": ("Jury",)})  # jury imports LangGraph: on first use


def _make_cache(judge: Judge, cache: bool | str | os.PathLike[str] | None) -> JudgeCache | None:
    if cache is False or cache is None:
        return None
    if cache is not True:
        return JudgeCache(disk=DiskCache(Path(cache)))
    # $JUDGEGRAPH_JUDGE_CACHE=off (or 0/false/none) turns the default disk cache off
    off = os.environ.get("JUDGEGRAPH_JUDGE_CACHE", "").strip().lower() in ("off", "0", "false", "none")
    on_disk = judge.kind == "llm" and getattr(judge, "deterministic", False) and not off
    return JudgeCache(disk=DiskCache() if on_disk else None)


class NeedsLLMJudge(ValueError):
    """A metric only an LLM judge can run was built with another judge (the
    offline one). Raised when the metric is built, never mid-run: the runner
    turns it into that metric's error result and the rest of the run goes on."""


def require_tasks(judge: Judge, tasks: Iterable[str], metric: str) -> Judge:
    """``judge`` when it answers every task of ``metric``; otherwise :class:`NeedsLLMJudge`."""
    missing = [t for t in tasks if not judge.supports(t)]
    if missing:
        raise NeedsLLMJudge(f"{metric} needs an LLM judge (pass --model; with pytest --judgegraph-model;"
                            f" in Python model=...): the {judge.kind} judge"
                            f" cannot answer {', '.join(missing)}")
    return judge


class NoModel(Judge):
    """An LLM judge with no model: it builds any metric's graph (to draw it, or
    to inspect its nodes) and answers every judgement with an error, making no call."""

    kind = "llm"
    name = "llm:(no model)"

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        return JudgeOutcome(None, f"{request.step}: no model was given (pass --model; with pytest"
                            " --judgegraph-model; in Python model=...)")
