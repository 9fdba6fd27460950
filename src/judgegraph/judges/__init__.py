"""Judges: who makes each judgement (an LLM, or the offline embedding judge)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias, Union

from .base import Judge, JudgeCache, JudgeOutcome, JudgeRequest
from .limiter import CallLimiter

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "CallLimiter", "Judge", "JudgeCache", "JudgeOutcome", "JudgeRequest", "ModelLike", "NeedsLLMJudge", "NoModel", "require_tasks",
    "resolve_judge",
]

#: What every metric factory's ``model`` takes: a ready :class:`Judge`, a chat
#: model, a model string (``openai:gpt-4.1-mini``), or None (the offline judge).
ModelLike: TypeAlias = Union[str, "BaseChatModel", Judge, None]


def resolve_judge(
    model: Any = None,
    *,
    max_concurrency: int = 16,
    max_tries: int = 3,
    cache: bool = True,
    **client: Any,
) -> Judge:
    """The judge for ``model``, with the client settings every judge call uses.

    ``model``: a :class:`Judge` (returned as it is; give no settings then), a
    LangChain chat model or a string such as ``openai:gpt-4.1-mini`` (an
    :class:`~judgegraph.judges.llm.LLMJudge`), or None for the offline embedding
    judge. ``max_concurrency`` bounds calls in flight, ``max_tries`` asks per
    judgement when the output is invalid; ``client`` goes to the model
    (``base_url``, ``timeout``, ``temperature`` ...). With ``cache`` (default),
    identical requests through this judge are made once (:class:`JudgeCache`).

    Metric factories take the same ``model`` and call this with no settings; to
    share one judge (one limit on calls in flight, one cache) between metrics,
    or to change its settings, build it here and pass it as ``model``."""
    if isinstance(model, Judge):
        if client:
            raise TypeError(f"settings for a ready judge: {', '.join(sorted(client))} (give them when it is built)")
        return model
    if model is None:
        from .offline import EmbeddingJudge

        if client:
            raise TypeError(f"the offline judge takes no model settings: {', '.join(sorted(client))}")
        made: Judge = EmbeddingJudge()
    else:
        from .llm import LLMJudge

        made = LLMJudge(model, max_tries=max_tries, limiter=CallLimiter(max_concurrency), **client)
    made.cache = JudgeCache() if cache else None
    return made


class NeedsLLMJudge(ValueError):
    """A metric only an LLM judge can run was built with another judge (the
    offline one). Raised when the metric is built, never mid-run: the runner
    turns it into that metric's error result and the rest of the run goes on."""


def require_tasks(judge: Judge, tasks: Any, metric: str) -> Judge:
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
