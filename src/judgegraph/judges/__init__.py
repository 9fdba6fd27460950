"""Judges: who makes each judgement (an LLM, or the offline embedding judge)."""

from __future__ import annotations

from typing import Any

from .base import Judge, JudgeCache, JudgeOutcome, JudgeRequest
from .limiter import CallLimiter

__all__ = ["CallLimiter", "Judge", "JudgeCache", "JudgeOutcome", "JudgeRequest", "resolve_judge"]


def resolve_judge(
    *,
    model: Any = None,
    judge: Judge | None = None,
    max_concurrency: int = 16,
    max_tries: int = 3,
    cache: bool = True,
    **model_kwargs: Any,
) -> Judge:
    """``judge`` if given; an :class:`~judgegraph.judges.llm.LLMJudge` for
    ``model`` (a chat model object or a string such as ``openai:gpt-4.1-mini``);
    otherwise the offline embedding judge. With ``cache`` (default), identical
    requests through this judge are made once (:class:`JudgeCache`)."""
    if judge is not None:
        if model is not None:
            raise ValueError("pass either model= or judge=, not both")
        return judge
    if model is None:
        from .offline import EmbeddingJudge

        made: Judge = EmbeddingJudge()
    else:
        from .llm import LLMJudge

        made = LLMJudge(model, max_tries=max_tries, limiter=CallLimiter(max_concurrency), **model_kwargs)
    made.cache = JudgeCache() if cache else None
    return made
