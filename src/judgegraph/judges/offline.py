"""The offline judge: relevance from sentence embeddings, no LLM, no API key.

It answers the ``turn_relevance`` task only (is the reply about what the user
just asked, given the window's earlier messages?). Every other task (statement
extraction, session judges, custom judges) returns a clear judge error saying
it needs an LLM judge, and the rest of the run goes on.
"""

from __future__ import annotations

import threading
from typing import Any

from ..results import Usage
from .base import Judge, JudgeOutcome, JudgeRequest

OFFLINE_TASKS = frozenset({"turn_relevance"})


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

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        if not self.supports(request.task):
            return JudgeOutcome(None, f"{request.step} needs an LLM judge (pass --model)", 0)
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
