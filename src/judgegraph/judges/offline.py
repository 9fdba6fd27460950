"""The offline judge (docs/offline_judge.md): relevance from sentence embeddings, no LLM, no key. It answers
``turn_relevance`` (:mod:`.offline_scoring`) and ``statement_relevance`` (each retrieved statement against the
user's message, :func:`statement_scores`); any other task is a judge error saying it needs an LLM judge.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from ..data.results import Usage
from .base import Judge, JudgeOutcome, JudgeRequest

if TYPE_CHECKING:
    import numpy as np

    from ..embeddings.batching import BatchingEncoder
    from ..embeddings.runner import EmbeddingRunner
    from .offline_rule import OfflineRule

OFFLINE_TASKS = frozenset({"turn_relevance", "statement_relevance"})

#: ``statement_relevance``: a statement is relevant from this score. Roughly calibrated on 36 labelled pairs
#: (tests/unit/test_contextual.py: 0.28 to 0.32 classify 89 % right; 0.28 keeps more borderline-relevant
#: conditions); an approximation: docs/turn_contextual_relevancy.md.
STATEMENT_THRESHOLD = 0.28
#: A user message of at most this many words is a short follow-up ("and sale
#: items?"): the statement may also match the previous user message + it.
STATEMENT_FOLLOWUP_MAX_WORDS = 5
STATEMENT_CONTEXT_WEIGHT = 0.8
STATEMENT_RULE = (
    f"cos(statement, user message); for follow-ups of <= {STATEMENT_FOLLOWUP_MAX_WORDS} words "
    f"max(cos(statement, user), {STATEMENT_CONTEXT_WEIGHT:g}*cos(statement, previous user message + user))"
)


def statement_steps(
    statements: list[str], user_message: str, context: list[str]
) -> Generator[list[str], np.ndarray, list[float]]:
    """:func:`statement_scores` as a generator: yields the texts to embed (at
    most once), receives their vectors, returns the scores."""
    import numpy as np

    from .offline_scoring import previous_message

    user_message = user_message.strip()
    if not user_message:
        raise ValueError("no user message to judge the statements against")
    if not statements:
        return []
    previous = previous_message(context, "user") if len(user_message.split()) <= STATEMENT_FOLLOWUP_MAX_WORDS else ""
    queries = [user_message] + ([f"{previous}\n{user_message}"] if previous else [])
    vectors = np.asarray((yield [*queries, *statements]), dtype=np.float32)
    if vectors.shape[0] != len(queries) + len(statements):
        raise ValueError(f"encode returned {vectors.shape[0]} vectors for {len(queries) + len(statements)} texts")
    sims = vectors[len(queries):] @ vectors[: len(queries)].T  # (statements, queries)
    scores = sims[:, 0]
    if previous:
        scores = np.maximum(scores, STATEMENT_CONTEXT_WEIGHT * sims[:, 1])
    return [float(x) for x in scores]


def statement_scores(encode: Callable[[list[str]], np.ndarray], statements: list[str], user_message: str, context: list[str]) -> list[float]:
    """One similarity per statement (about -1..1, higher is more relevant), all
    texts in ONE ``encode`` call. ``context`` holds the window's earlier messages
    as ``"user: ..."`` / ``"assistant: ..."`` strings, oldest first. Raises
    ``ValueError`` when there is no user message to compare with."""
    from ..embeddings.batching import drive

    return drive(statement_steps(statements, user_message, context), encode)


class EmbeddingJudge(Judge):
    """The offline judge, embedding through a batching embeddings runner (the process-wide one for the default
    MiniLM, its own for ``embeddings``) or ``encoder`` (anything with ``encode`` and ``aencode``); :meth:`judge`
    and :meth:`ajudge` drive the same scoring generator."""

    kind = "offline"

    # embeddings Any: a LangChain ``Embeddings`` or any object with ``encode`` (see encode_function)
    # ``rule``: a fitted decision rule (docs/offline_alignment.md), or the path of its file
    def __init__(self, embeddings: Any = None, *, threshold: float | None = None,
                 encoder: EmbeddingRunner | BatchingEncoder | None = None,
                 rule: OfflineRule | str | os.PathLike[str] | None = None) -> None:
        if rule is not None and threshold is not None:
            raise ValueError("give a threshold or a fitted rule, not both (the rule has its own threshold)")
        if rule is not None:
            from .offline_rule import OfflineRule, load_rule

            rule = rule if isinstance(rule, OfflineRule) else load_rule(rule)
        self._rule = rule
        self._embeddings = embeddings
        self._threshold = threshold
        self._encoder = encoder
        self._encoder_lock = threading.Lock()
        self.name = "offline:all-MiniLM-L6-v2" if embeddings is None else f"offline:{type(embeddings).__name__}"
        if self._rule is not None:
            self.name += f"+rule-{self._rule.short}"  # every result names the rule that decided it

    @property
    def fitted_rule(self) -> OfflineRule | None:
        """The fitted decision rule in use, if any."""
        return self._rule

    @property
    def embeddings(self) -> Any:
        if self._embeddings is None:
            from ..embeddings.minilm import get_default_embeddings

            self._embeddings = get_default_embeddings()
        return self._embeddings

    @property
    def encoder(self) -> EmbeddingRunner | BatchingEncoder:
        """The batching :class:`~judgegraph.embeddings.runner.EmbeddingRunner` this judge embeds with (made on first use)."""
        if self._encoder is None:
            with self._encoder_lock:
                if self._encoder is None:
                    from ..embeddings.runner import EmbeddingRunner, get_default_runner

                    if self._embeddings is None:
                        self._encoder = get_default_runner()
                    else:
                        self._encoder = EmbeddingRunner(self._embeddings, batching=True)
        return self._encoder

    @property
    def threshold(self) -> float:
        from .offline_scoring import DEFAULT_THRESHOLD

        return DEFAULT_THRESHOLD if self._threshold is None else self._threshold

    @property
    def rule(self) -> str:  # type: ignore[override]
        from .offline_scoring import RULE

        if self._rule is not None:
            return self._rule.describe()
        return f"{RULE}; relevant when >= {self.threshold:.2f}"

    @property
    def statement_rule(self) -> str:
        return f"{STATEMENT_RULE}; relevant when >= {STATEMENT_THRESHOLD:.2f}"

    def supports(self, task: str) -> bool:
        return task in OFFLINE_TASKS

    # ---- one scoring generator per request, driven sync or async ----------------

    def _steps(self, request: JudgeRequest) -> Generator[list[str], np.ndarray, JudgeOutcome]:
        """Yields the texts to embed, receives their vectors, returns the outcome."""
        inputs = request.inputs
        if request.task == "statement_relevance":
            scores = yield from statement_steps(
                list(inputs["statements"]), inputs["user_message"], list(inputs.get("context", []))
            )
            return self._statement_outcome(request, scores)
        if self._rule is not None:
            return (yield from self._rule_outcome(request, self._rule))
        from .offline_scoring import relevance_steps

        score = float((yield from relevance_steps(inputs["reply"], inputs["latest_user"], list(inputs["context"]))))
        value = request.schema.model_validate(_verdict("embedding similarity", score, self.threshold))
        return JudgeOutcome(value, None, 1, Usage(), score=score)

    @staticmethod
    def _rule_outcome(request: JudgeRequest, rule: OfflineRule) -> Generator[list[str], np.ndarray, JudgeOutcome]:
        from .offline_rule import feature_steps

        inputs = request.inputs
        value = rule.value((yield from feature_steps(inputs["reply"], inputs["latest_user"], list(inputs["context"]))))
        what = rule.features[0] if rule.kind == "threshold" else "p(relevant)"
        verdict = request.schema.model_validate(_verdict(f"rule {rule.short}: {what}", value, rule.threshold))
        return JudgeOutcome(verdict, None, 1, Usage(), score=value)

    @staticmethod
    def _statement_outcome(request: JudgeRequest, scores: list[float]) -> JudgeOutcome:
        """``statement_relevance``'s value: ``request.schema`` validated from
        ``{"verdicts": [{"statement": n, "reason", "verdict", "similarity"}]}``."""
        verdicts = [{"statement": n, **_verdict("embedding similarity", score, STATEMENT_THRESHOLD), "similarity": score}
                    for n, score in enumerate(scores, 1)]
        return JudgeOutcome(request.schema.model_validate({"verdicts": verdicts}), None, 1, Usage())

    @staticmethod
    def _needs_llm(request: JudgeRequest) -> JudgeOutcome:
        return JudgeOutcome(None, f"{request.step} needs an LLM judge (pass --model)", 0)

    def _error(self, exc: Exception) -> JudgeOutcome:
        describe = getattr(self._encoder, "describe", None)  # the runner's: credentials taken out
        text = describe(exc) if callable(describe) else f"{type(exc).__name__}: {exc}"
        return JudgeOutcome(None, text, 1)  # a judge error, reported and counted

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        if not self.supports(request.task):
            return self._needs_llm(request)
        from ..embeddings.batching import drive

        try:
            return drive(self._steps(request), lambda texts: self.encoder.encode(texts))
        except Exception as exc:  # noqa: BLE001 - reported and counted by the metric
            return self._error(exc)

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        if not self.supports(request.task):
            return self._needs_llm(request)
        from ..embeddings.batching import adrive

        try:
            return await adrive(self._steps(request), lambda texts: self.encoder.aencode(texts))
        except Exception as exc:  # noqa: BLE001 - reported and counted by the metric
            return self._error(exc)


def _verdict(what: str, value: float, threshold: float) -> dict[str, str]:
    """``{"reason", "verdict"}``: yes when ``value`` is at least ``threshold``, the reason saying so."""
    relevant = value >= threshold
    return {"reason": f"{what} {value:.2f} {'>=' if relevant else '<'} {threshold:.2f}", "verdict": "yes" if relevant else "no"}
