"""The offline judge: relevance from sentence embeddings, no LLM, no API key.

It answers two tasks:

* ``turn_relevance``: is the reply about what the user just asked, given the
  window's earlier messages? (:mod:`.offline_scoring`);
* ``statement_relevance`` (turn contextual relevancy): is each retrieved
  statement relevant to the user's message? Cosine similarity of the
  statement and the message, with the same short-follow-up rule, against
  :data:`STATEMENT_THRESHOLD` (:func:`statement_scores`).

Every other task (statement extraction, session judges, custom judges) returns
a clear judge error saying it needs an LLM judge, and the rest of the run goes on.
"""

from __future__ import annotations

import threading
from typing import Any

from ..results import Usage
from .base import Judge, JudgeOutcome, JudgeRequest

OFFLINE_TASKS = frozenset({"turn_relevance", "statement_relevance"})

#: ``statement_relevance``: a statement is relevant when its score is at least
#: this. A rough calibration on 36 labelled (message, statement) pairs written
#: for it (tests/unit/test_contextual.py): every threshold from 0.28 to 0.32
#: classifies 89 % of them right; 0.28 keeps more borderline-relevant
#: conditions. An approximation: see docs/turn_contextual_relevancy.md.
STATEMENT_THRESHOLD = 0.28
#: A user message of at most this many words is a short follow-up ("and sale
#: items?"): the statement may also match the previous user message + it.
STATEMENT_FOLLOWUP_MAX_WORDS = 5
STATEMENT_CONTEXT_WEIGHT = 0.8
STATEMENT_RULE = (
    f"cos(statement, user message); for follow-ups of <= {STATEMENT_FOLLOWUP_MAX_WORDS} words "
    f"max(cos(statement, user), {STATEMENT_CONTEXT_WEIGHT:g}*cos(statement, previous user message + user))"
)


def statement_scores(encode: Any, statements: list[str], user_message: str, context: list[str]) -> list[float]:
    """One similarity per statement (about -1..1, higher is more relevant), all
    texts in ONE ``encode`` call. ``context`` holds the window's earlier messages
    as ``"user: ..."`` / ``"assistant: ..."`` strings, oldest first. Raises
    ``ValueError`` when there is no user message to compare with."""
    import numpy as np

    from .offline_scoring import previous_message

    user_message = user_message.strip()
    if not user_message:
        raise ValueError("no user message to judge the statements against")
    if not statements:
        return []
    previous = previous_message(context, "user") if len(user_message.split()) <= STATEMENT_FOLLOWUP_MAX_WORDS else ""
    queries = [user_message] + ([f"{previous}\n{user_message}"] if previous else [])
    vectors = np.asarray(encode([*queries, *statements]), dtype=np.float32)
    if vectors.shape[0] != len(queries) + len(statements):
        raise ValueError(f"encode returned {vectors.shape[0]} vectors for {len(queries) + len(statements)} texts")
    sims = vectors[len(queries):] @ vectors[: len(queries)].T  # (statements, queries)
    scores = sims[:, 0]
    if previous:
        scores = np.maximum(scores, STATEMENT_CONTEXT_WEIGHT * sims[:, 1])
    return [float(x) for x in scores]


class EmbeddingJudge(Judge):
    kind = "offline"

    def __init__(self, embeddings: Any = None, *, threshold: float | None = None) -> None:
        self._embeddings = embeddings
        self._threshold = threshold
        self._lock = threading.Lock()  # numpy BERT is CPU-bound: one at a time
        self.name = "offline:all-MiniLM-L6-v2" if embeddings is None else f"offline:{type(embeddings).__name__}"

    @property
    def embeddings(self) -> Any:
        if self._embeddings is None:
            from ..embeddings.minilm import get_default_embeddings

            self._embeddings = get_default_embeddings()
        return self._embeddings

    @property
    def threshold(self) -> float:
        if self._threshold is None:
            from .offline_scoring import DEFAULT_THRESHOLD

            return DEFAULT_THRESHOLD
        return self._threshold

    @property
    def rule(self) -> str:
        from .offline_scoring import RULE

        return f"{RULE}; relevant when >= {self.threshold:.2f}"

    def supports(self, task: str) -> bool:
        return task in OFFLINE_TASKS

    def _encode(self, texts: list[str]) -> Any:
        import numpy as np

        enc = getattr(self.embeddings, "encode", None)
        if enc is not None:
            return enc(texts)
        vecs = np.asarray(self.embeddings.embed_documents(texts), dtype="float32")
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    @property
    def statement_rule(self) -> str:
        return f"{STATEMENT_RULE}; relevant when >= {STATEMENT_THRESHOLD:.2f}"

    def _judge_statements(self, request: JudgeRequest) -> JudgeOutcome:
        """``statement_relevance``: inputs ``statements`` (list of str),
        ``user_message``, ``context``; the value is ``request.schema`` validated
        from ``{"verdicts": [{"statement": n, "reason", "verdict", "similarity"}]}``."""
        inputs = request.inputs
        try:
            with self._lock:
                scores = statement_scores(
                    self._encode, list(inputs["statements"]), inputs["user_message"], list(inputs.get("context", []))
                )
            verdicts = []
            for n, score in enumerate(scores, 1):
                relevant = score >= STATEMENT_THRESHOLD
                sign = ">=" if relevant else "<"
                verdicts.append({
                    "statement": n,
                    "reason": f"embedding similarity {score:.2f} {sign} {STATEMENT_THRESHOLD:.2f}",
                    "verdict": "yes" if relevant else "no",
                    "similarity": score,
                })
            value = request.schema.model_validate({"verdicts": verdicts})
        except Exception as exc:  # noqa: BLE001 - a judge error, reported and counted
            return JudgeOutcome(None, f"{type(exc).__name__}: {exc}", 1)
        return JudgeOutcome(value, None, 1, Usage())

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        if not self.supports(request.task):
            return JudgeOutcome(None, f"{request.step} needs an LLM judge (pass --model)", 0)
        if request.task == "statement_relevance":
            return self._judge_statements(request)
        from .offline_scoring import relevance_score

        inputs = request.inputs
        try:
            with self._lock:
                score = float(
                    relevance_score(self._encode, inputs["reply"], inputs["latest_user"], list(inputs["context"]))
                )
        except Exception as exc:  # noqa: BLE001 - a judge error, reported and counted
            return JudgeOutcome(None, f"{type(exc).__name__}: {exc}", 1)
        relevant = score >= self.threshold
        sign = ">=" if relevant else "<"
        reason = f"embedding similarity {score:.2f} {sign} {self.threshold:.2f}"
        value = request.schema.model_validate({"reason": reason, "verdict": "yes" if relevant else "no"})
        return JudgeOutcome(value, None, 1, Usage(), score=score)
