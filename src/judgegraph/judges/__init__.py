"""Judges: who makes each judgement (an LLM, or the offline embedding judge)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, Union, cast

from .base import Endpoint, Judge, JudgeOutcome, JudgeRequest
from .cache import DiskCache, JudgeCache, default_cache_path
from .limiter import CallLimiter, RateBucket

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from .aligned import Alignment
    from .jury import Jury
    from .offline_rule import OfflineRule

__all__ = [
    "CallLimiter", "DiskCache", "Endpoint", "Judge", "JudgeCache", "JudgeOutcome", "JudgeRequest", "Jury", "ModelLike",
    "NeedsLLMJudge",
    "NoModel", "RateBucket", "default_cache_path", "require_tasks", "resolve_judge",
]

#: What every metric factory's ``model`` takes: a ready :class:`Judge`, a chat
#: model, a model string (``openai:gpt-4.1-mini``), or None (the offline judge).
ModelLike: TypeAlias = Union[str, "BaseChatModel", Judge, None]


def resolve_judge(
    model: ModelLike | Sequence[ModelLike] = None,
    *,
    repeat: int | None = None,
    aggregate: str | None = None,
    quorum: int | None = None,
    max_concurrency: int = 16,
    max_tries: int = 3,
    cache: bool | str | os.PathLike[str] = True,
    timeout: float | None = None,
    max_retries: int | None = None,
    rpm: float | None = None,
    tpm: float | None = None,
    max_prompt_tokens: int | None = None,
    max_reply_bytes: int | None = None,
    rule: OfflineRule | str | os.PathLike[str] | None = None,
    aligned: Alignment | str | os.PathLike[str] | None = None,
    **client: Any,  # Any: the chat model's own keyword arguments (base_url, temperature ...)
) -> Judge:
    """The judge for ``model`` (settings and defaults: docs/judges.md): a :class:`Judge` as it
    is, a chat model or string for an :class:`~judgegraph.judges.llm.LLMJudge`, None for the
    offline judge. ``cache``: True caches in memory, and on disk at temperature 0; a path
    caches in that file; False neither. Build one here and pass it as several metrics'
    ``model`` to share its limits and cache. ``rule``: the offline judge's fitted decision
    rule or its file (docs/offline_alignment.md); ValueError with another judge. ``aligned``: an LLM judge's
    alignment or its ``aligned-….json`` file (docs/alignment.md): an :class:`~judgegraph.judges.aligned.AlignedJudge`
    around ``model``'s judge (ValueError: no LLM model, another model than the file's, a tampered file).

    A list of models is a jury (:class:`~judgegraph.judges.jury.Jury`, docs/juries.md): each built
    with these settings, their answers aggregated by ``aggregate`` (``majority`` by default, ``mean``,
    ``unanimous``, ``any``) while ``quorum`` of them answer (default: a majority). ``repeat`` N > 1
    judges each request N times with distinct seeds (a jury of repeats, majority by default)."""
    if aligned is not None:
        from .aligned import AlignedJudge, Alignment, read_alignment

        if model is None:
            raise ValueError("an aligned judge (--aligned) wraps an LLM judge: give its model (--model)")
        alignment = aligned if isinstance(aligned, Alignment) else read_alignment(aligned)
        base = resolve_judge(model, repeat=repeat, aggregate=aggregate, quorum=quorum, max_concurrency=max_concurrency,
                             max_tries=max_tries, cache=cache, timeout=timeout, max_retries=max_retries, rpm=rpm,
                             tpm=tpm, max_prompt_tokens=max_prompt_tokens, max_reply_bytes=max_reply_bytes, rule=rule,
                             **client)
        return AlignedJudge(base, alignment)
    several = isinstance(model, (list, tuple)) or (repeat is not None and repeat != 1)
    if not several and (aggregate is not None or quorum is not None):
        raise ValueError(f"{'aggregate' if aggregate is not None else 'quorum'} is a jury's setting: give several"
                         " models (--model a --model b) or repeat=N (--repeat N)")
    aggregate = aggregate or "majority"
    if isinstance(model, (list, tuple)):
        from .jury import Jury

        jurors = [resolve_judge(m, max_concurrency=max_concurrency, max_tries=max_tries, cache=cache, timeout=timeout,
                                max_retries=max_retries, rpm=rpm, tpm=tpm, max_prompt_tokens=max_prompt_tokens,
                                max_reply_bytes=max_reply_bytes, rule=rule, **client) for m in model]
        if repeat is not None and repeat > 1:
            return Jury.repeat(Jury(jurors), repeat, aggregate=aggregate, quorum=quorum)
        return Jury(jurors, aggregate=aggregate, quorum=quorum)
    if repeat is not None and repeat != 1:
        from .jury import Jury

        one = resolve_judge(model, max_concurrency=max_concurrency, max_tries=max_tries, cache=cache, timeout=timeout,
                            max_retries=max_retries, rpm=rpm, tpm=tpm, max_prompt_tokens=max_prompt_tokens,
                            max_reply_bytes=max_reply_bytes, rule=rule, **client)
        return Jury.repeat(one, repeat, aggregate=aggregate, quorum=quorum)
    settings = {k: v for k, v in {"timeout": timeout, "max_retries": max_retries, "rpm": rpm, "tpm": tpm,
                                   "max_prompt_tokens": max_prompt_tokens,
                                   "max_reply_bytes": max_reply_bytes}.items() if v is not None}
    if isinstance(model, Judge):
        client = {**client, **settings, **({"rule": rule} if rule is not None else {})}
        if client:
            raise TypeError(f"settings for a ready judge: {', '.join(sorted(client))} (give them when it is built)")
        return model
    if model is None:
        from .offline import EmbeddingJudge

        if client or settings:
            raise TypeError(f"the offline judge takes no model settings: {', '.join(sorted({**client, **settings}))}")
        made: Judge = EmbeddingJudge(rule=rule)
    elif rule is not None:
        raise ValueError("a fitted offline rule (--offline-rule) is for the offline judge: give no --model with it")
    else:
        from .llm import DEFAULT_MAX_PROMPT_TOKENS, DEFAULT_TIMEOUT_S, LLMJudge

        for name, rate in (("rpm", rpm), ("tpm", tpm)):
            if rate is not None and not rate > 0:
                raise ValueError(f"{name} must be > 0, got {rate}")
        made = LLMJudge(cast("Union[str, BaseChatModel]", model), max_tries=max_tries, limiter=CallLimiter(max_concurrency, rpm=rpm, tpm=tpm),
                        timeout=timeout if timeout is not None else DEFAULT_TIMEOUT_S, max_retries=max_retries,
                        max_prompt_tokens=max_prompt_tokens or DEFAULT_MAX_PROMPT_TOKENS,
                        max_reply_bytes=max_reply_bytes, **client)
    made.cache = _make_cache(made, cache)
    return made


def __getattr__(name: str) -> Any:
    """``Jury`` (:mod:`.jury`, which imports LangGraph) on first use."""
    if name == "Jury":
        from .jury import Jury

        return Jury
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        raise NeedsLLMJudge(f"{metric} needs an LLM judge (pass --model, or model=...): the {judge.kind} judge"
                            f" cannot answer {', '.join(missing)}")
    return judge


class NoModel(Judge):
    """An LLM judge with no model: it builds any metric's graph (to draw it, or
    to inspect its nodes) and answers every judgement with an error, making no call."""

    kind = "llm"
    name = "llm:(no model)"

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        return JudgeOutcome(None, f"{request.step}: no model was given (pass --model, or model=...)")
