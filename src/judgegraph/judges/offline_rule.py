"""A fitted decision rule for the offline judge, kept as ``offline-rule-<hash12>.json`` (docs/offline_alignment.md):
a threshold on one feature or a logistic regression over :data:`FEATURES` (that page's table), fitted from people's
labels by ``judgegraph align --model offline``. Its hash covers only the decision fields, and is part of the judge's
name, so every result says which rule produced it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from .base import FittedFile
from .offline_scoring import relevance_steps

__all__ = ["FEATURES", "FORMAT", "OfflineRule", "feature_steps", "load_rule"]

FORMAT = "judgegraph-offline-rule"
FEATURES = (
    "score", "cos_user", "cos_prev_assistant", "cos_context", "max_cos_earlier_reply", "repeats_earlier_reply",
    "log_reply_words", "log_user_words", "reply_has_question",
)
Kind = Literal["threshold", "logistic"]


def _split(context: Sequence[str]) -> list[tuple[str, str]]:
    parts = (entry.partition(":") for entry in context)
    return [(who.strip().lower(), content.strip()) for who, sep, content in parts if sep and content.strip()]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def feature_steps(reply: str, latest_user: str, context: list[str]) -> Generator[list[str], np.ndarray, dict[str, float]]:
    """Every feature of :data:`FEATURES` for one reply, as a generator: yields
    the texts to embed (at most twice: the default score's, then the rest),
    receives their vectors, returns ``{feature: value}``. ``context`` is the
    window's earlier messages as ``"role: content"`` strings, oldest first."""
    score = float((yield from relevance_steps(reply, latest_user, context)))
    reply, latest_user = reply.strip(), latest_user.strip()
    earlier = _split(context)
    previous = next((c for r, c in reversed(earlier) if r == "assistant"), "")
    replies = [c for r, c in earlier if r == "assistant"]
    feats = {
        "score": score,
        "cos_user": 0.0, "cos_prev_assistant": 0.0, "cos_context": 0.0, "max_cos_earlier_reply": 0.0,
        "repeats_earlier_reply": float(bool(reply) and _norm(reply) in {_norm(c) for c in replies}),
        "log_reply_words": math.log1p(len(reply.split())),
        "log_user_words": math.log1p(len(latest_user.split())),
        "reply_has_question": float("?" in reply),
    }
    if not reply:
        return feats
    texts = [reply, latest_user or reply, *[c for _, c in earlier]]
    vectors = np.asarray((yield texts), dtype=np.float32)
    if vectors.shape[0] != len(texts):
        raise ValueError(f"encode returned {vectors.shape[0]} vectors for {len(texts)} texts")
    sims = vectors[1:] @ vectors[0]
    feats["cos_user"] = float(sims[0]) if latest_user else 0.0
    if earlier:
        rest = sims[1:]
        mean = vectors[2:].mean(axis=0)
        feats["cos_context"] = float(mean @ vectors[0] / max(float(np.linalg.norm(mean)), 1e-9))
        reply_sims = [float(s) for (r, _), s in zip(earlier, rest) if r == "assistant"]
        if reply_sims:
            feats["max_cos_earlier_reply"] = max(reply_sims)
            feats["cos_prev_assistant"] = reply_sims[-1] if previous else 0.0
    return feats


@dataclass(frozen=True)
class OfflineRule(FittedFile):
    """A decision rule over :data:`FEATURES`. ``threshold`` kind: relevant when
    ``features[features_used[0]] >= threshold``. ``logistic`` kind: relevant when
    ``sigmoid(bias + sum(weights * (x - mean) / scale)) >= threshold``.
    ``fit`` holds what it was fitted on and its figures (not part of the hash)."""

    FORMAT: ClassVar[str] = FORMAT
    WHAT: ClassVar[str] = "offline rule"

    kind: Kind
    features: tuple[str, ...]
    threshold: float
    weights: tuple[float, ...] = ()
    bias: float = 0.0
    mean: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    fit: dict[str, Any] = field(default_factory=dict, compare=False)  # Any: JSON figures and provenance

    def __post_init__(self) -> None:
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature(s) {', '.join(unknown)} (known: {', '.join(FEATURES)})")
        if self.kind == "threshold" and len(self.features) != 1:
            raise ValueError("a threshold rule uses exactly one feature")
        if self.kind == "logistic" and not (len(self.weights) == len(self.mean) == len(self.scale) == len(self.features)):
            raise ValueError("a logistic rule needs one weight, mean and scale per feature")
        if self.kind not in ("threshold", "logistic"):
            raise ValueError(f"kind must be 'threshold' or 'logistic', got {self.kind!r}")
        numbers = (self.threshold, self.bias, *self.weights, *self.mean, *self.scale)
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in numbers):
            raise ValueError("every number of the rule must be finite")
        if any(s <= 0 for s in self.scale):
            raise ValueError("every scale must be > 0")

    def decision(self) -> dict[str, Any]:  # Any: JSON values
        """The fields that decide verdicts (what the hash covers)."""
        return {"kind": self.kind, "features": list(self.features), "threshold": self.threshold,
                "weights": list(self.weights), "bias": self.bias, "mean": list(self.mean), "scale": list(self.scale)}

    @property
    def filename(self) -> str:
        return f"offline-rule-{self.short}.json"

    def value(self, feats: dict[str, float]) -> float:
        """The number compared with the threshold: the feature, or the probability."""
        x = np.array([feats[f] for f in self.features], dtype=np.float64)
        if self.kind == "threshold":
            return float(x[0])
        z = self.bias + float(np.dot(self.weights, (x - np.asarray(self.mean)) / np.asarray(self.scale)))
        return float(1.0 / (1.0 + math.exp(-max(min(z, 500.0), -500.0))))

    def describe(self) -> str:
        if self.kind == "threshold":
            return f"fitted rule {self.short}: {self.features[0]} >= {self.threshold:.3f}"
        return f"fitted rule {self.short}: logistic over {', '.join(self.features)}; p(relevant) >= {self.threshold:.3f}"



def load_rule(path: str | os.PathLike[str]) -> OfflineRule:
    """Read a rule file; ``ValueError`` naming the file and field when it is not one
    (a ``sha256`` that does not match its numbers, e.g. after a hand edit, included)."""
    data = OfflineRule.read_json(path)
    try:
        rule = OfflineRule(kind=data["kind"], features=tuple(data["features"]), threshold=data["threshold"],
                           weights=tuple(data.get("weights", ())), bias=data.get("bias", 0.0),
                           mean=tuple(data.get("mean", ())), scale=tuple(data.get("scale", ())),
                           fit=data.get("fit") or {})
    except KeyError as exc:
        raise ValueError(f"{path}: field {exc.args[0]!r} is missing") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if "sha256" in data and data["sha256"] != rule.hash:
        raise ValueError(f"{path}: field 'sha256' does not match the rule's numbers (edited by hand? "
                         f"remove the field to accept the edit; its hash is then {rule.short})")
    return rule
