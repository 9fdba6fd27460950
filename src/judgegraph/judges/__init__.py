"""Judges: who makes each judgement (an LLM, or the offline embedding judge)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import Judge, JudgeOutcome, JudgeRequest
from .cache import DiskCache, JudgeCache, default_cache_path
from .limiter import CallLimiter, RateBucket

__all__ = ["CallLimiter", "DiskCache", "Judge", "JudgeCache", "JudgeOutcome", "JudgeRequest", "RateBucket",
           "default_cache_path", "resolve_judge"]


def resolve_judge(
    *,
    model: Any = None,
    judge: Judge | None = None,
    max_concurrency: int = 16,
    max_tries: int = 3,
    cache: bool | str | os.PathLike[str] = True,
    timeout: float | None = None,
    max_retries: int | None = None,
    rpm: float | None = None,
    tpm: float | None = None,
    max_prompt_tokens: int | None = None,
    **model_kwargs: Any,
) -> Judge:
    """``judge`` if given; an :class:`~judgegraph.judges.llm.LLMJudge` for
    ``model`` (a chat model object or a string such as ``openai:gpt-4.1-mini``);
    otherwise the offline embedding judge.

    Client settings (LLM judges): ``max_concurrency`` calls in flight and
    ``rpm``/``tpm`` requests/tokens per minute, for everything this judge
    judges (one limiter per judge, so per run); ``max_tries`` asks per
    judgement when the reply is unusable; ``timeout`` seconds per request and
    ``max_retries`` re-sends after a transport failure; ``max_prompt_tokens``
    the largest prompt sent (default 120,000 tokens).

    ``cache``: True (default) makes identical requests through this judge once
    (:class:`JudgeCache`, in memory) and, for an LLM judge whose generation is
    deterministic (temperature 0), keeps valid answers on disk
    (:class:`DiskCache` at :func:`default_cache_path`); a path keeps them in
    that SQLite file whatever the temperature; False turns both off."""
    if judge is not None:
        if model is not None:
            raise ValueError("pass either model= or judge=, not both")
        return judge
    if rpm is not None and not rpm > 0:
        raise ValueError(f"rpm must be > 0, got {rpm}")
    if tpm is not None and not tpm > 0:
        raise ValueError(f"tpm must be > 0, got {tpm}")
    if model is None:
        from .offline import EmbeddingJudge

        made: Judge = EmbeddingJudge()
    else:
        from .llm import DEFAULT_MAX_PROMPT_TOKENS, DEFAULT_TIMEOUT_S, LLMJudge

        made = LLMJudge(model, max_tries=max_tries, limiter=CallLimiter(max_concurrency, rpm=rpm, tpm=tpm),
                        timeout=timeout if timeout is not None else DEFAULT_TIMEOUT_S, max_retries=max_retries,
                        max_prompt_tokens=max_prompt_tokens or DEFAULT_MAX_PROMPT_TOKENS, **model_kwargs)
    made.cache = _make_cache(made, cache)
    return made


def _make_cache(judge: Judge, cache: bool | str | os.PathLike[str]) -> JudgeCache | None:
    if cache is False or cache is None:
        return None
    disk = None
    if cache is not True:
        disk = DiskCache(Path(cache))
    elif judge.kind == "llm" and getattr(judge, "deterministic", False) and _disk_default_on():
        disk = DiskCache()
    return JudgeCache(disk=disk)


def _disk_default_on() -> bool:
    """``$JUDGEGRAPH_JUDGE_CACHE=off`` (or 0/false/none) turns the default disk cache off."""
    return os.environ.get("JUDGEGRAPH_JUDGE_CACHE", "").strip().lower() not in ("off", "0", "false", "none")
