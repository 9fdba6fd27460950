"""Fit the offline judge's decision rule from human labels (``judgegraph align --model offline``), in numpy.

:func:`label_cases` finds each labelled reply's window as the metric builds it, :func:`feature_matrix` computes
the rule's features, and :func:`fit_rule` chooses between a threshold and a logistic regression by grouped
cross-validation on the train dialogues and measures both on the held-out ones (``docs/offline_alignment.md``).
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..data.conversation import Conversation
from ..data.results import metric_key
from ..judges.offline_rule import FEATURES, OfflineRule, feature_steps
from ..judges.offline_scoring import DEFAULT_THRESHOLD
from ..stats import raters
from .labels import LabelsError, LabelSet, usable

__all__ = [
    "Case", "LabelsError", "auc", "cohen_kappa", "feature_matrix", "fit_rule", "label_cases",
    "parse_positive", "spearman", "split_groups",
]

Encode = Callable[[list[str]], np.ndarray]
#: What a label may be in the file.
LabelValue = bool | int | float | str
L2_GRID = (0.1, 1.0, 10.0, 100.0)


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq, "!=": operator.ne}


def parse_positive(rule: str | None) -> Callable[[LabelValue], bool]:
    """Which labels count as relevant. None: true/false labels, or the words
    yes/no, relevant/irrelevant, pass/fail, 1/0. ``">=2"`` and the like:
    numeric labels compared with the number; ``"==WORD"`` / ``"!=WORD"``:
    string labels. ``ValueError`` for a rule, ``TypeError`` for a label it
    cannot judge."""
    if rule is None:
        from .labels import YES_NO_WORDS, polarity

        def default(value: LabelValue) -> bool:
            if (word := polarity(value)) is not None:
                return word == "yes"
            raise TypeError(f"{json.dumps(value)} is not a yes/no word ({YES_NO_WORDS}; or pass --positive, "
                            "e.g. '>=2')")
        return default
    m = re.fullmatch(r"\s*(>=|<=|==|!=|>|<)\s*(.+?)\s*", rule)
    if not m:
        raise ValueError(f"--positive: expected an operator and a value such as '>=2' or '==good', got {rule!r}")
    op, target = _OPS[m.group(1)], m.group(2)
    try:
        number = float(target)
    except ValueError:
        if m.group(1) not in ("==", "!="):
            raise ValueError(f"--positive: {m.group(1)} needs a number, got {target!r}") from None

        def word(value: LabelValue) -> bool:
            return bool(op(str(value), target))  # type: ignore[arg-type]
        return word

    def numeric(value: LabelValue) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{value!r} is not a number (--positive {rule} compares numbers)")
        return op(float(value), number)
    return numeric


@dataclass(frozen=True)
class Case:
    """One labelled reply with what the offline judge receives for it."""

    conversation: str
    turn: int  # 1-based position of the reply's last turn
    reply: str
    latest_user: str
    context: tuple[str, ...]
    value: LabelValue
    relevant: bool


def label_cases(conversations: Iterable[Conversation], labels: LabelSet, *, labels_path: str,
                positive: Callable[[LabelValue], bool], inputs_of: Callable[[Any], dict[str, Any]],
                window_size: int = 10, metric: str | None = None, label_field: str = "label") -> list[Case]:
    """One :class:`Case` per label, from the window the aligned metric judges that reply in; ``inputs_of(window)``
    gives the inputs the metric's request carries (``reply``, ``latest_user``, ``context``). :class:`LabelsError`
    (file, line, field) for an unknown conversation, a turn that is not an assistant reply, a verdict id, a reply
    labelled twice, a label ``positive`` cannot judge, or any record :func:`~judgegraph.trust.labels.read_labels`
    could not use (each named)."""
    from ..data.windows import sliding_windows

    about = [lab for lab in usable(labels) if metric is None or metric_key(lab.metric) == metric_key(metric)]
    if not about:
        raise LabelsError(f"{labels_path}: no labels" + (f" for {metric}" if metric else ""))
    id_field = "id" if labels.formats.get(str(labels_path)) == "ids" else "conversation_id"
    by_id = {c.id: c for c in conversations}
    windows: dict[str, dict[int, Any]] = {}  # Any: Window
    seen: dict[tuple[str, int | None], str] = {}
    cases = []
    for lab in about:
        where, cid = lab.source, lab.conversation_id
        if lab.verdict_id is not None:
            raise LabelsError(f"{where}: verdict_id: the offline fit labels replies by 'turn'")
        if (cid, lab.turn) in seen:
            raise LabelsError(f"{where}: {id_field}, turn: {cid!r} turn {lab.turn} was labelled at {seen[cid, lab.turn]}")
        seen[cid, lab.turn] = where
        conv = by_id.get(cid)
        if conv is None:
            raise LabelsError(f"{where}: {id_field}: no conversation {cid!r} in the conversation files")
        if cid not in windows:
            windows[cid] = {i + 1: w for w in sliding_windows(conv, window_size) for i in w.target.reply_turn_indices}
        by_turn = windows[cid]
        turn = lab.turn if lab.turn is not None else max(by_turn, default=0)
        window = by_turn.get(turn)
        if window is None:
            raise LabelsError(f"{where}: turn: turn {turn} of {cid!r} is not an assistant reply "
                              f"(its replies are turns {sorted(by_turn) or 'none'}, 1-based)")
        try:
            relevant = positive(lab.value)
        except TypeError as exc:
            raise LabelsError(f"{where}: {label_field}: {exc}") from None
        inputs = inputs_of(window)
        cases.append(Case(cid, max(i + 1 for i in window.target.reply_turn_indices), inputs["reply"],
                          inputs["latest_user"], tuple(inputs["context"]), lab.value, relevant))
    return cases


def feature_matrix(cases: Sequence[Case], encode: Encode) -> np.ndarray:
    """``(len(cases), len(FEATURES))``; every distinct text embedded once, in one batch."""
    from ..embeddings.batching import drive

    texts: list[str] = []

    def collect(batch: list[str]) -> np.ndarray:
        texts.extend(batch)
        return np.zeros((len(batch), 1), dtype=np.float32)

    for c in cases:  # a dry run with zero vectors: only the texts are collected, to embed them in one batch
        drive(feature_steps(c.reply, c.latest_user, list(c.context)), collect)
    unique = list(dict.fromkeys(texts))
    vectors = dict(zip(unique, np.asarray(encode(unique), dtype=np.float32))) if unique else {}

    def embedded(batch: list[str]) -> np.ndarray:
        return np.stack([vectors[t] for t in batch])

    rows = [drive(feature_steps(c.reply, c.latest_user, list(c.context)), embedded) for c in cases]
    return np.array([[r[f] for f in FEATURES] for r in rows], dtype=np.float64)


# -- figures -------------------------------------------------------------------------


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve (ties count half); NaN with one class only."""
    pos = np.asarray(positive, dtype=bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if not n1 or not n0:
        return float("nan")
    r = raters.ranks(np.asarray(scores, dtype=np.float64))
    return float((r[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """:func:`judgegraph.stats.raters.spearman`, NaN when undefined."""
    value = raters.spearman(np.asarray(x, dtype=np.float64).tolist(), np.asarray(y, dtype=np.float64).tolist())
    return float("nan") if value is None else value


def cohen_kappa(pred: np.ndarray, truth: np.ndarray) -> float:
    """:func:`judgegraph.stats.raters.cohen_kappa` of two yes/no arrays, NaN when undefined."""
    value = raters.cohen_kappa(np.asarray(pred, dtype=bool).tolist(), np.asarray(truth, dtype=bool).tolist(), [False, True])
    return float("nan") if value is None else value


def balanced_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    pred, truth = np.asarray(pred, dtype=bool), np.asarray(truth, dtype=bool)
    parts = [float((pred[truth == c] == c).mean()) for c in (True, False) if (truth == c).any()]
    return sum(parts) / len(parts)


def best_threshold(values: np.ndarray, truth: np.ndarray) -> float:
    """The cut maximising balanced accuracy (midpoint between neighbouring values; ties: the lowest)."""
    v = np.unique(values)
    cuts = np.concatenate([[v[0] - 1e-6], (v[:-1] + v[1:]) / 2, [v[-1] + 1e-6]])
    scores = [balanced_accuracy(values >= c, truth) for c in cuts]
    return float(cuts[int(np.argmax(scores))])


def figures(values: np.ndarray, truth: np.ndarray, threshold: float, ordinal: np.ndarray | None = None) -> dict[str, float]:
    pred = values >= threshold
    out = {"n": int(len(truth)), "auc": auc(values, truth), "accuracy": float((pred == truth).mean()),
           "balanced_accuracy": balanced_accuracy(pred, truth), "kappa": cohen_kappa(pred, truth),
           "threshold": float(threshold)}
    if ordinal is not None:
        out["spearman"] = spearman(values, ordinal)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


# -- fitting -------------------------------------------------------------------------


def split_groups(groups: Sequence[str], *, test_fraction: float = 0.3, seed: int = 0) -> np.ndarray:
    """True for the cases whose group (dialogue) falls in the held-out part; seeded."""
    names = sorted(set(groups))
    rng = np.random.default_rng(seed)
    rng.shuffle(names)
    held = set(names[: max(1, round(len(names) * test_fraction))]) if len(names) > 1 else set()
    return np.array([g in held for g in groups], dtype=bool)


def _logistic(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Weights, bias, mean and scale of an L2-regularised logistic regression (Newton steps, bounded)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -500, 500)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w[1:], float(w[0]), mean, scale


def _predict(x: np.ndarray, w: np.ndarray, b: float, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(b + ((x - mean) / scale) @ w, -500, 500)))


def _folds(groups: Sequence[str], k: int, seed: int) -> np.ndarray:
    names = sorted(set(groups))
    np.random.default_rng(seed + 1).shuffle(names)
    fold_of = {g: i % k for i, g in enumerate(names)}
    return np.array([fold_of[g] for g in groups])


def fit_rule(x: np.ndarray, truth: np.ndarray, groups: Sequence[str], *, seed: int = 0, test_fraction: float = 0.3,
             folds: int = 5, ordinal: np.ndarray | None = None,
             provenance: Mapping[str, object] | None = None) -> OfflineRule:
    """The rule chosen and fitted on the train dialogues; its ``fit`` holds the
    cross-validation table and the held-out figures of the default and fitted rules."""
    truth = np.asarray(truth, dtype=bool)
    if len(set(truth.tolist())) < 2:
        raise ValueError("the labels are all of one class: nothing to fit (check --positive)")
    test = split_groups(groups, test_fraction=test_fraction, seed=seed)
    train = ~test
    xt, yt = x[train], truth[train]
    gt = [g for g, t in zip(groups, train) if t]
    k = max(2, min(folds, len(set(gt))))
    fold = _folds(gt, k, seed)
    score_col = FEATURES.index("score")
    candidates: list[tuple[str, float | None, np.ndarray]] = [("threshold:score", None, xt[:, score_col])]
    for l2 in L2_GRID:
        oof = np.zeros(len(yt))
        for f in range(k):
            inner, outer = fold != f, fold == f
            if len(set(yt[inner].tolist())) < 2:
                oof[outer] = yt[inner].mean()
                continue
            oof[outer] = _predict(xt[outer], *_logistic(xt[inner], yt[inner].astype(float), l2))
        candidates.append((f"logistic:l2={l2:g}", l2, oof))
    cv = {name: round(auc(values, yt), 4) for name, _, values in candidates}
    best = max(range(len(candidates)), key=lambda i: (np.nan_to_num(cv[candidates[i][0]], nan=-1.0), -i))
    name, chosen_l2, oof = candidates[best]
    threshold = best_threshold(oof, yt)
    if chosen_l2 is None:
        rule = OfflineRule("threshold", ("score",), round(threshold, 4))
    else:
        w, b, mean, scale = _logistic(xt, yt.astype(float), chosen_l2)
        rule = OfflineRule("logistic", FEATURES, round(threshold, 4), tuple(round(float(v), 6) for v in w),
                           round(b, 6), tuple(round(float(v), 6) for v in mean), tuple(round(float(v), 6) for v in scale))
    held: dict[str, dict[str, float]] = {}  # rule -> its held-out figures
    if test.any():
        xs, ys = x[test], truth[test]
        ords = ordinal[test] if ordinal is not None else None
        values = np.array([rule.value(dict(zip(FEATURES, row))) for row in xs])
        held = {
            "default_rule": figures(xs[:, score_col], ys, DEFAULT_THRESHOLD, ords),
            "default_score_fitted_threshold": figures(xs[:, score_col], ys, best_threshold(xt[:, score_col], yt), ords),
            "fitted_rule": figures(values, ys, rule.threshold, ords),
        }
    fit = {**(provenance or {}), "seed": seed, "test_fraction": test_fraction, "folds": k,
           "n_train": int(train.sum()), "n_test": int(test.sum()),
           "dialogues_train": len(set(gt)), "dialogues_test": len({g for g, t in zip(groups, test) if t}),
           "positives_train": int(yt.sum()), "cv_auc": cv, "chosen": name, "held_out": held}
    return OfflineRule(rule.kind, rule.features, rule.threshold, rule.weights, rule.bias, rule.mean, rule.scale, fit)


def group_of(conversation_id: str, pattern: str | None) -> str:
    """The dialogue a conversation belongs to: ``pattern``'s first group (or whole match), else the id."""
    if not pattern:
        return conversation_id
    m = re.search(pattern, conversation_id)
    if not m:
        return conversation_id
    return m.group(1) if m.groups() else m.group(0)


def file_sha256(path: str | os.PathLike[str]) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
