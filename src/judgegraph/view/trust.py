"""Agreement between people who labelled the same items: Krippendorff's alpha over everyone, Cohen's kappa per
pair of annotators, and the items they disagree on (the statistics are :mod:`judgegraph.stats.raters`')."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

from ..stats.raters import cohen_kappa, krippendorff_alpha
from ..trust.labels import Label
from .queue import label_key


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
