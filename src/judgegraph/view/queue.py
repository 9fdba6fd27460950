"""The label queue: which judged turns (or conversation-level results) a person labels, in which order, the
labels file those labels are appended to (never rewritten: one locked, fsynced ``write`` per line, in the labels
format of :mod:`judgegraph.trust.labels`; docs/guide/view.md), and how far the people who label agree."""

from __future__ import annotations

import fcntl
import json
import os
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import combinations
from pathlib import Path
from typing import Literal

from ..runs import ConversationLine, ResultLine, VerdictLine
from ..runs.record import number
from ..trust.labels import Label, LabelError, LabelSet, read_labels

Strategy = Literal["disagreement", "random", "failures"]
STRATEGIES: tuple[Strategy, ...] = ("disagreement", "random", "failures")
#: a result whose score is this close to its threshold is "near the threshold"
NEAR = 0.1


@dataclass(frozen=True)
class Item:
    """One thing to label: a verdict (``verdict_id``) of a metric, or the metric's whole result."""

    conversation_id: str
    metric: str
    verdict_id: str | None
    turns: list[int]  # 1-based, the turns the verdict is about
    reply: str
    judge: str | None  # the judge's verdict (hidden unless revealed)
    reason: str
    why: str  # why the strategy put it here: "jurors split", "near the threshold", ...
    priority: int
    turn: int | None = None  # the 1-based turn that names the verdict alone (no other of its result ends there)

    @property
    def key(self) -> tuple[str, str, str]:
        """What a label of it names: its turn when that names it alone (as the offline fit of ``align`` reads
        labels), else its verdict id, else the whole result (:func:`label_key`)."""
        return self.conversation_id, self.metric, (f"turn {self.turn}" if self.turn is not None
                                                   else self.verdict_id or "result")


def label_key(label: Label) -> tuple[str, str, str]:
    """The item a label is about, as :attr:`Item.key` names it."""
    return label.conversation_id, label.metric, (label.verdict_id if label.verdict_id is not None
                                                 else f"turn {label.turn}" if label.turn is not None else "result")


def _why(verdict: VerdictLine | None, result: ResultLine) -> tuple[int, str]:
    """How much a disagreement-first queue wants this verdict (None: the result itself) first (lower first) and why."""
    if verdict is not None and (split := verdict.split):
        return 0, split
    score, threshold = result.number, number(result.threshold)
    if score is not None and threshold is not None and abs(score - threshold) <= NEAR:
        return 1, "near the threshold"
    if (verdict is not None and verdict.verdict == "no") or result.passed is False:
        return 2, "a failure"
    return 3, ""


def build_queue(conversations: Iterable[ConversationLine], strategy: Strategy = "disagreement",
                seed: int = 0) -> list[Item]:
    """The items of ``conversations`` (a run's conversation lines) in the order ``strategy`` puts them: ``random`` (shuffled
    with ``seed``), ``disagreement`` (jurors split or repeats differ, then near the threshold, then failures, then
    the rest, each group shuffled with ``seed``), ``failures`` (only failing verdicts and results)."""
    items: list[Item] = []
    for record in conversations:
        cid = record.conversation_id
        for metric, result in record.results.items():
            if verdicts := [v for v in result.verdicts if v.decided]:
                ends = Counter(max(v.turns) for v in result.verdicts if v.turns)
                for v in verdicts:
                    priority, why = _why(v, result)
                    turns = v.turn_numbers
                    items.append(Item(cid, metric, v.key, turns, v.reply or "", v.verdict, v.reason or "", why,
                                      priority, max(turns) if turns and ends[max(turns) - 1] == 1 else None))
            elif result.passed is not None:
                priority, why = _why(None, result)
                items.append(Item(cid, metric, None, [], "", "yes" if result.passed else "no", result.reason or "",
                                  why, priority))
    random.Random(seed).shuffle(items)
    if strategy == "failures":
        return [i for i in items if i.judge == "no"]
    if strategy == "disagreement":
        items.sort(key=lambda i: i.priority)  # stable: shuffled within each group
    return items


class LabelsFile:
    """The labels file: read with :func:`judgegraph.trust.labels.read_labels`, appended to, never rewritten."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> LabelSet:
        """Every label in the file (its unusable records in ``errors``, and the file itself when it cannot be
        read); nothing when there is no file yet."""
        if not self.path.exists():
            return LabelSet()
        try:
            return read_labels(self.path)
        except OSError as exc:
            return LabelSet(errors=[LabelError(str(self.path), None, None, None,
                                               f"cannot be read: {exc.strerror or exc}")])

    def labelled(self, annotator: str, read: LabelSet | None = None) -> dict[tuple[str, str, str], str]:
        """What ``annotator`` said of each item (their latest label), from ``read`` (else the file as it is)."""
        return {label_key(lb): str(lb.value) for lb in (read or self.read()).labels if lb.annotator == annotator}

    def append(self, item: Item, label: str, annotator: str) -> dict[str, str | int]:
        """Append one label (one line, one write, locked, fsynced) and return the record written."""
        record: dict[str, str | int] = {"conversation_id": item.conversation_id, "metric": item.metric}
        if item.turn is not None:
            record["turn"] = item.turn
        elif item.verdict_id is not None:
            record["verdict_id"] = item.verdict_id
        record.update(label=label, annotator=annotator,
                      time=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a line torn by something else: ours starts on its own
                line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        return record


@dataclass
class PairAgreement:
    a: str
    b: str
    n: int
    kappa: float | None


@dataclass
class PeopleAgreement:
    annotators: list[str]
    items: int  # items labelled by two people or more
    alpha: float | None
    pairs: list[PairAgreement] = field(default_factory=list)
    disagreed: list[tuple[tuple[str, str, str], dict[str, str]]] = field(default_factory=list)


def people_agreement(labels: list[Label]) -> PeopleAgreement:
    """Each annotator's latest label per item; items labelled by several people are compared."""
    from ..stats.raters import cohen_kappa, krippendorff_alpha  # numpy: imported when the page is asked for

    by_item: dict[tuple[str, str, str], dict[str, str]] = {}
    for lb in labels:
        if lb.person:
            by_item.setdefault(label_key(lb), {})[lb.person] = str(lb.value)
    shared = {k: v for k, v in by_item.items() if len(v) > 1}
    people = sorted({a for v in by_item.values() for a in v})
    out = PeopleAgreement(people, len(shared), krippendorff_alpha([list(v.values()) for v in shared.values()]))
    for a, b in combinations(people, 2):
        both = [v for v in shared.values() if a in v and b in v]
        scale = sorted({x for v in both for x in (v[a], v[b])})
        out.pairs.append(PairAgreement(a, b, len(both), cohen_kappa([v[a] for v in both], [v[b] for v in both], scale)))
    out.disagreed = [(k, v) for k, v in shared.items() if len(set(v.values())) > 1]
    return out
