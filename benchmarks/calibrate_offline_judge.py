"""Choose and calibrate the offline judge's relevance rule.

Reads ``benchmarks/data/relevance_labelled.jsonl`` (conversations in
judgegraph's own format; every assistant turn carries ``metadata.label``
"relevant"/"irrelevant" and ``metadata.case``, the hard-case category; every
conversation carries ``metadata.split`` "dev"/"test"), builds the same windows
the turn-relevancy metric builds, scores every window with a few candidate
rules using all-MiniLM-L6-v2 embeddings, and prints per rule the threshold that
maximises balanced accuracy on dev plus dev/test accuracy, balanced accuracy
and precision/recall of the "irrelevant" class. The rule with the best dev
balanced accuracy (ties: the simpler one, i.e. earlier in CANDIDATES) is the
chosen one; it must be the rule implemented in
``judgegraph.judges.offline_scoring`` and its rounded dev threshold is
``DEFAULT_THRESHOLD`` there.

Run:  python benchmarks/calibrate_offline_judge.py  [--data PATH]
Output is deterministic (same data + same model -> same text).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from judgegraph.judges import offline_scoring as rule

DATA = Path(__file__).resolve().parent / "data" / "relevance_labelled.jsonl"
WINDOW_SIZE = 10
THRESHOLDS = np.round(np.arange(-1.0, 1.0001, 0.01), 2)

Encode = Callable[[list[str]], np.ndarray]


# -- data ------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    conversation: str
    domain: str
    split: str
    case: str
    relevant: bool
    reply: str
    latest_user: str
    context: tuple[str, ...]


def load_conversations(path: Path = DATA) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{path}:{n}: {exc}") from exc
    return rows


def windows(conversation: dict, window_size: int = WINDOW_SIZE) -> list[Item]:
    """One item per exchange; mirrors ``judgegraph.data.windows.sliding_windows``.

    An exchange is the user turn(s) followed by the assistant turn(s) answering
    them (consecutive user turns / assistant turns are joined with a blank
    line); system turns are skipped; tool turns stay in their exchange as
    context. Window i = the last min(i + 1, window_size) exchanges; the target
    is the last exchange's reply, ``latest_user`` its user text, ``context`` the
    earlier messages of the window as "role: content" strings, oldest first
    (what the turn-relevancy metric passes to the offline judge). A reply made
    of several assistant turns is irrelevant if any of them is labelled so.
    """
    exchanges: list[tuple[list[dict], list[dict], list[dict]]] = []
    user: list[dict] = []
    assistant: list[dict] = []
    tool: list[dict] = []  # (kept in order with the others via "all" below)
    order: list[dict] = []
    for turn in conversation["turns"]:
        role = turn["role"]
        if role == "system":
            continue
        if role == "user" and assistant:
            exchanges.append((user, assistant, order))
            user, assistant, tool, order = [], [], [], []
        {"user": user, "assistant": assistant}.get(role, tool).append(turn)
        order.append(turn)
    if assistant:  # a trailing user turn with no reply is dropped
        exchanges.append((user, assistant, order))

    meta = conversation.get("metadata", {})
    items = []
    for i, (user, assistant, _) in enumerate(exchanges):
        window = exchanges[max(0, i - window_size + 1) : i + 1]
        context = tuple(f"{t['role']}: {t['content']}" for _, _, turns in window[:-1] for t in turns)
        labels = [t.get("metadata", {}).get("label") for t in assistant]
        if any(label not in ("relevant", "irrelevant") for label in labels):
            raise SystemExit(f"{conversation['id']}: an assistant turn has no valid metadata.label")
        items.append(
            Item(
                conversation=conversation["id"],
                domain=meta.get("domain", "?"),
                split=meta.get("split", "?"),
                case=assistant[-1].get("metadata", {}).get("case", "direct"),
                relevant=all(label == "relevant" for label in labels),
                reply="\n\n".join(t["content"] for t in assistant),
                latest_user="\n\n".join(t["content"] for t in user),
                context=context,
            )
        )
    return items


def load_items(path: Path = DATA) -> list[Item]:
    return [item for conv in load_conversations(path) for item in windows(conv)]


# -- embeddings --------------------------------------------------------------------


class CachedEncode:
    """Wraps an ``encode`` callable; each distinct text is embedded once."""

    def __init__(self, encode: Encode) -> None:
        self._encode = encode
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if new:
            for text, vec in zip(new, np.asarray(self._encode(new), dtype=np.float32)):
                self._cache[text] = vec
        return np.stack([self._cache[t] for t in texts])

    def prefetch(self, fns: Sequence[Callable[..., float]], items: Sequence[Item], dim: int = 384) -> None:
        """Embed, in large batches, every text ``fns`` will ask for on ``items``.

        The rules embed 2-4 texts per call; batching them up front makes the
        run several times faster. A dry run with dummy unit vectors records the
        texts (the rules' choice of texts never depends on the vectors).
        """
        wanted: dict[str, None] = {}

        def record(texts: list[str]) -> np.ndarray:
            wanted.update(dict.fromkeys(texts))
            out = np.zeros((len(texts), dim), dtype=np.float32)
            out[:, 0] = 1.0
            return out

        for fn in fns:
            score_items(fn, record, items)
        self(list(wanted))


# -- candidate rules ------------------------------------------------------------------
# Each takes (encode, reply, latest_user, context) like rule.relevance_score.


def _strip(entry: str) -> tuple[str, str]:
    role, _, content = entry.partition(":")
    return role.strip().lower(), content.strip()


def cos_user(encode, reply, user, context) -> float:
    v = encode([reply, user])
    return float(v[1] @ v[0])


def ctx_always(encode, reply, user, context) -> float:
    prev = rule.previous_assistant(context)
    if not prev:
        return cos_user(encode, reply, user, context)
    v = encode([reply, user, rule.followup_query(prev, user)])
    return max(float(v[1] @ v[0]), rule.CONTEXT_WEIGHT * float(v[2] @ v[0]))


def followup_prev_exchange(encode, reply, user, context) -> float:
    prev = rule.previous_assistant(context)
    if not (prev and rule.is_short_followup(user)):
        return cos_user(encode, reply, user, context)
    users = [c for r, c in map(_strip, context) if r == "user"]
    query = "\n".join(users[-1:] + [rule.followup_query(prev, user)])
    v = encode([reply, user, query])
    return max(float(v[1] @ v[0]), rule.CONTEXT_WEIGHT * float(v[2] @ v[0]))


def followup_earlier_penalty(encode, reply, user, context, alpha: float = 0.25) -> float:
    """Chosen rule minus alpha * how much closer the reply is to an earlier user message."""
    base = rule.relevance_score(encode, reply, user, list(context))
    users = [c for r, c in map(_strip, context) if r == "user"]
    if not users:
        return base
    v = encode([reply, user, *users])
    to_latest = float(v[1] @ v[0])
    to_earlier = float(np.max(v[2:] @ v[0]))
    return base - alpha * max(0.0, to_earlier - to_latest)


def followup_repeat_penalty(encode, reply, user, context, alpha: float = 0.5) -> float:
    """Chosen rule minus alpha * how far cos(reply, previous assistant) exceeds 0.5."""
    base = rule.relevance_score(encode, reply, user, list(context))
    prev = rule.previous_assistant(context)
    if not prev:
        return base
    v = encode([reply, prev])
    return base - alpha * max(0.0, float(v[1] @ v[0]) - 0.5)


CHOSEN = "followup"
CANDIDATES: list[tuple[str, str, Callable[..., float]]] = [
    ("cos", "cos(reply, user)", cos_user),
    ("ctx-always", "max(cos(r,u), 0.8*cos(r, prevA+u)) for every message", ctx_always),
    (CHOSEN, "offline_scoring.relevance_score: " + rule.RULE, rule.relevance_score),
    ("followup-prevx", "as followup, query = prevU+prevA+u", followup_prev_exchange),
    ("followup-pen-earlier", "followup - 0.25*max(0, max_j cos(r,earlier u_j) - cos(r,u))", followup_earlier_penalty),
    ("followup-pen-repeat", "followup - 0.5*max(0, cos(r, prevA) - 0.5)", followup_repeat_penalty),
]


# -- metrics --------------------------------------------------------------------------


def metrics(scores: np.ndarray, relevant: np.ndarray, threshold: float) -> dict[str, float]:
    pred = scores >= threshold
    tp = int(np.sum(pred & relevant))
    tn = int(np.sum(~pred & ~relevant))
    fp = int(np.sum(pred & ~relevant))  # irrelevant called relevant
    fn = int(np.sum(~pred & relevant))  # relevant called irrelevant
    n_rel, n_irr = tp + fn, tn + fp
    recall_rel = tp / n_rel if n_rel else 0.0
    recall_irr = tn / n_irr if n_irr else 0.0
    return {
        "acc": (tp + tn) / len(pred) if len(pred) else 0.0,
        "bal": (recall_rel + recall_irr) / 2,
        "irr_p": tn / (tn + fn) if tn + fn else 0.0,
        "irr_r": recall_irr,
        "tp": tp, "tn": tn, "fp": fp, "fn": fn,
    }


def best_threshold(scores: np.ndarray, relevant: np.ndarray) -> float:
    """Threshold (0.01 grid) maximising balanced accuracy, then accuracy; lowest wins ties."""
    best_t, best_key = float(THRESHOLDS[0]), (-1.0, -1.0)
    for t in THRESHOLDS:
        m = metrics(scores, relevant, float(t))
        key = (round(m["bal"], 9), round(m["acc"], 9))
        if key > best_key:
            best_t, best_key = float(t), key
    return best_t


def score_items(fn: Callable[..., float], encode: Encode, items: Sequence[Item]) -> np.ndarray:
    return np.array([fn(encode, it.reply, it.latest_user, list(it.context)) for it in items], dtype=np.float64)


def evaluate_chosen(encode: Encode, items: Sequence[Item], threshold: float) -> dict[str, float]:
    """Metrics of the library rule at ``threshold`` (used by the unit test too)."""
    scores = score_items(rule.relevance_score, encode, items)
    return metrics(scores, np.array([it.relevant for it in items]), threshold)


# -- report ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args(argv)

    from judgegraph.embeddings.minilm import get_default_embeddings

    encode = CachedEncode(get_default_embeddings().encode)
    convs = load_conversations(args.data)
    items = [it for conv in convs for it in windows(conv)]
    rel = np.array([it.relevant for it in items])
    split = np.array([it.split for it in items])
    dev, test = split == "dev", split == "test"

    encode.prefetch([fn for _, _, fn in CANDIDATES], items)

    print(f"data: {args.data.name}")
    print(f"conversations {len(convs)} (dev {sum(c['metadata']['split'] == 'dev' for c in convs)}, "
          f"test {sum(c['metadata']['split'] == 'test' for c in convs)}); labelled replies {len(items)} "
          f"(dev {int(dev.sum())}, test {int(test.sum())}); irrelevant {int((~rel).sum())} "
          f"({(~rel).mean():.1%}: dev {(~rel[dev]).mean():.1%}, test {(~rel[test]).mean():.1%})")
    domains = Counter(c["metadata"]["domain"] for c in convs)
    print(f"domains ({len(domains)}): " + ", ".join(f"{d} {n}" for d, n in sorted(domains.items())))
    cases = Counter((it.case, it.relevant) for it in items)
    print("cases: " + ", ".join(f"{c}/{'rel' if r else 'irr'} {n}" for (c, r), n in sorted(cases.items())))
    print(f"window size {WINDOW_SIZE}; threshold = argmax of dev balanced accuracy on a 0.01 grid")
    print()
    print(f"{'rule':22s} {'thr':>5s} | {'dev acc':>7s} {'bal':>5s} {'irrP':>5s} {'irrR':>5s} | "
          f"{'test acc':>8s} {'bal':>5s} {'irrP':>5s} {'irrR':>5s}")
    results = {}
    for name, _desc, fn in CANDIDATES:
        scores = score_items(fn, encode, items)
        t = best_threshold(scores[dev], rel[dev])
        md, mt = metrics(scores[dev], rel[dev], t), metrics(scores[test], rel[test], t)
        results[name] = (t, md, mt, scores)
        print(f"{name:22s} {t:5.2f} | {md['acc']:7.3f} {md['bal']:5.3f} {md['irr_p']:5.3f} {md['irr_r']:5.3f} | "
              f"{mt['acc']:8.3f} {mt['bal']:5.3f} {mt['irr_p']:5.3f} {mt['irr_r']:5.3f}")
    for name, desc, _ in CANDIDATES:
        print(f"  {name}: {desc}")

    best = max(CANDIDATES, key=lambda c: (round(results[c[0]][1]["bal"], 9), -CANDIDATES.index(c)))[0]
    t, md, mt, scores = results[CHOSEN]
    print()
    print(f"best on dev: {best}; library rule: {CHOSEN}" + ("" if best == CHOSEN else "  <-- MISMATCH"))
    print(f"calibrated threshold {t:.2f}; offline_scoring.DEFAULT_THRESHOLD = {rule.DEFAULT_THRESHOLD:.2f}"
          + ("" if abs(t - rule.DEFAULT_THRESHOLD) < 1e-9 else "  <-- UPDATE IT"))
    print(f"confusion matrix of {CHOSEN} on test at {t:.2f} (rows: truth, columns: verdict)")
    print(f"{'':14s} {'relevant':>9s} {'irrelevant':>11s}")
    print(f"{'relevant':14s} {mt['tp']:9d} {mt['fn']:11d}")
    print(f"{'irrelevant':14s} {mt['fp']:9d} {mt['tn']:11d}")

    print()
    print(f"accuracy of {CHOSEN} by hard-case category (metadata.case) at {t:.2f}:")
    by_case: dict[tuple[str, bool], list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        by_case[(it.case, it.relevant)].append(i)
    print(f"  {'case':18s} {'label':10s} {'dev':>11s} {'test':>11s} {'all':>11s}")
    for (case, r), idx in sorted(by_case.items()):
        cells = []
        for mask in (dev, test, np.ones_like(dev)):
            sel = [i for i in idx if mask[i]]
            ok = sum((scores[i] >= t) == rel[i] for i in sel)
            cells.append(f"{ok:3d}/{len(sel):3d} {ok / len(sel) if sel else 0:4.0%}".replace("%", ""))
        print(f"  {case:18s} {'relevant' if r else 'irrelevant':10s} " + " ".join(f"{c:>11s}" for c in cells))
    print("  (cells: correct/total pct)")

    print()
    print(f"sensitivity of {CHOSEN} (dev balanced accuracy at each setting's own best dev threshold):")
    saved = rule.FOLLOWUP_MAX_WORDS, rule.CONTEXT_WEIGHT
    try:
        weights = (0.7, 0.8, 0.9, 1.0)
        print("  max words \\ weight " + " ".join(f"{w:>5.1f}" for w in weights))
        for n in (0, 2, 3, 4, 5, 6, 8):
            row = []
            for w in weights:
                rule.FOLLOWUP_MAX_WORDS, rule.CONTEXT_WEIGHT = n, w
                s = score_items(rule.relevance_score, encode, [items[i] for i in np.flatnonzero(dev)])
                row.append(metrics(s, rel[dev], best_threshold(s, rel[dev]))["bal"])
            print(f"  {n:9d}          " + " ".join(f"{b:5.3f}" for b in row))
    finally:
        rule.FOLLOWUP_MAX_WORDS, rule.CONTEXT_WEIGHT = saved
    return 0


if __name__ == "__main__":
    sys.exit(main())
