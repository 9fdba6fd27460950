"""Compare versions of a chatbot pairwise: ``judgegraph pairwise A.jsonl B.jsonl [C.jsonl ...]`` and
:func:`compare_pairwise` (docs/pairwise.md). Each version is a file of conversations for the same inputs, matched
by conversation id; every pair of versions is judged on the conversations both hold, and summarised per criterion
(win/tie/loss rates with Wilson intervals; with more than two versions, a Bradley–Terry ranking).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..data.conversation import Conversation
from ..data.results import MetricResult
from ..judges import ModelLike, resolve_judge
from ..metrics.pairwise import Criterion, CriterionOutcome, as_criteria, create_pairwise_metric, outcomes_of
from ..runs import NotAResultsFile, is_results_file, read_run
from ..trust.preference import Rate, bootstrap_strengths, bradley_terry, wilson


@dataclass
class Version:
    """One version's conversations by id (in input order), and the problems found reading them."""

    name: str
    conversations: dict[str, Conversation] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    path: str | None = None


def version_names(paths: Sequence[str | Path]) -> list[str]:
    """A name per file: its stem, or its path where two files share a stem."""
    stems = [Path(p).stem for p in paths]
    return [s if stems.count(s) == 1 else str(p) for s, p in zip(stems, paths)]


NO_CONVERSATION = ("this results line carries no conversation (an `eval` results file holds verdicts only): pass the "
                   "conversations file `eval` read, or the --out (or --conversations) of `simulate` (two results "
                   "files are compared by `judgegraph diff`)")


def _results_conversations(path: Path) -> Iterator[Conversation | str]:
    """The conversations of a results file, or a problem (``file:line: message``) per line that has none: read by
    :func:`judgegraph.runs.read_run` (a bad line is named and left out); other records are skipped."""
    try:
        run = read_run(path)
    except NotAResultsFile as exc:
        yield str(exc)
        return
    yield from run.problems
    for item in run.conversations.values():
        where = f"{path}:{item.line}"
        data = item.conversation
        if data is None:
            yield f"{where}: conversation {item.conversation_id!r}: {NO_CONVERSATION}"
            continue
        try:
            yield Conversation.model_validate(data)
        except ValidationError as exc:
            problem = exc.errors()[0]
            loc = ".".join(str(x) for x in problem.get("loc", ()))
            yield f"{where}: conversation.{loc}: {problem.get('msg')}"


def read_version(path: str | Path, name: str | None = None) -> Version:
    """One version from a conversation file or a results file that carries the conversations (docs/pairwise.md,
    "Inputs"); problems (unreadable file, bad record, repeated id) are collected in ``errors``, never raised."""
    from ..loaders import InputError, iter_records

    p = Path(path)
    version = Version(name or p.stem, path=str(path))
    items: Iterable[Conversation | str]
    if is_results_file(p):
        items = _results_conversations(p)
    else:
        items = (str(x) if isinstance(x, InputError) else x.conversation for x in iter_records(p))
    try:
        for item in items:
            if isinstance(item, str):
                version.errors.append(item)
            elif item.id in version.conversations:
                version.errors.append(f"{path}: conversation {item.id!r} appears again: the first is used")
            else:
                version.conversations[item.id] = item
    except OSError as exc:
        version.errors.append(f"{path}: cannot read file: {exc.strerror or exc}")
    return version


@dataclass
class Comparison:
    """One conversation judged for one pair of versions: the graph's result, or the failure that left none."""

    conversation_id: str
    a: str
    b: str
    result: MetricResult | None = None
    error: str | None = None

    @property
    def outcomes(self) -> list[CriterionOutcome]:
        return outcomes_of(self.result) if self.result is not None else []

    def winner(self, o: CriterionOutcome) -> str | None:
        """The version name that won criterion ``o`` (None: a tie or undecided)."""
        return self.a if o.outcome == "a" else self.b if o.outcome == "b" else None

    def to_json(self) -> dict[str, object]:
        return {"type": "pairwise", "conversation_id": self.conversation_id, "a": self.a, "b": self.b,
                "outcomes": [{**o.to_json(), "winner": self.winner(o)} for o in self.outcomes],
                "error": self.error, "result": None if self.result is None else self.result.model_dump(mode="json")}


@dataclass(frozen=True)
class PairSummary:
    """One criterion for one pair of versions: counts and Wilson intervals over the decided comparisons."""

    a: str
    b: str
    criterion: str
    a_wins: Rate
    ties: Rate
    b_wins: Rate
    order_dependent: Rate  # decided comparisons whose verdict changed with the order (counted as ties)
    undecided: int  # comparisons a judge error (or a failed run) left without an outcome

    @property
    def n(self) -> int:
        return self.ties.n

    def to_json(self) -> dict[str, object]:
        return {"a": self.a, "b": self.b, "criterion": self.criterion, "n": self.n, "a_wins": self.a_wins.to_json(),
                "ties": self.ties.to_json(), "b_wins": self.b_wins.to_json(),
                "order_dependent": self.order_dependent.to_json(), "undecided": self.undecided}


@dataclass(frozen=True)
class Ranked:
    """A version's Bradley–Terry log-strength (centred on 0) with its bootstrap interval."""

    version: str
    strength: float
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class PairwiseReport:
    """Everything :func:`compare_pairwise` found (``to_json`` for ``--json``)."""

    versions: list[str]
    criteria: list[Criterion]
    judge: str
    comparisons: list[Comparison] = field(default_factory=list)
    missing: dict[str, list[str]] = field(default_factory=dict)  # conversation id -> the versions lacking it
    input_errors: list[str] = field(default_factory=list)
    pairs: list[PairSummary] = field(default_factory=list)
    rankings: dict[str, list[Ranked]] = field(default_factory=dict)  # criterion -> versions, strongest first
    resamples: int = 1000
    seed: int = 0
    prior: float = 1.0

    @property
    def judge_errors(self) -> int:
        """Verdicts the judge could not give, plus comparisons whose run failed (each undecided, never a win)."""
        return sum(len(c.result.errors) if c.result is not None else 1 for c in self.comparisons)

    @property
    def position_bias(self) -> Rate:
        """Decided comparisons (all pairs and criteria) whose verdict changed with the order shown."""
        decided = [o for c in self.comparisons for o in c.outcomes if o.outcome is not None]
        return wilson(sum(o.order_dependent for o in decided), len(decided))

    def to_json(self) -> dict[str, object]:
        bias = self.position_bias
        return {
            "versions": self.versions, "judge": self.judge,
            "criteria": [{"name": c.name, "text": c.text} for c in self.criteria],
            "comparisons": len(self.comparisons), "judge_errors": self.judge_errors,
            "position_bias": bias.to_json(), "missing": self.missing, "input_errors": self.input_errors,
            "pairs": [p.to_json() for p in self.pairs],
            "rankings": {k: [r.to_json() for r in v] for k, v in self.rankings.items()},
            "intervals": {"rates": "Wilson score, 95 %", "strengths": f"percentile bootstrap over conversations, "
                          f"95 %, B={self.resamples}, seed {self.seed}", "prior": self.prior},
        }


def summarise(comparisons: Sequence[Comparison], versions: Sequence[str], criteria: Sequence[Criterion]
              ) -> list[PairSummary]:
    """A :class:`PairSummary` per pair of versions (in the order given) and criterion."""
    out = []
    for a, b in itertools.combinations(versions, 2):
        mine = [c for c in comparisons if (c.a, c.b) == (a, b)]
        for criterion in criteria:
            decided = [o for c in mine for o in c.outcomes if o.criterion == criterion.name and o.outcome is not None]
            n, count = len(decided), Counter(o.outcome for o in decided)
            out.append(PairSummary(a, b, criterion.name, wilson(count["a"], n), wilson(count["tie"], n),
                                   wilson(count["b"], n), wilson(sum(o.order_dependent for o in decided), n),
                                   len(mine) - n))
    return out


def wins_by_conversation(comparisons: Sequence[Comparison], versions: Sequence[str], criterion: str) -> np.ndarray:
    """``W[c, i, j]``: version i's wins over j on conversation c (a tie half a win each; undecided: nothing)."""
    index = {v: i for i, v in enumerate(versions)}
    ids = list(dict.fromkeys(c.conversation_id for c in comparisons))
    row = {cid: i for i, cid in enumerate(ids)}
    w = np.zeros((len(ids), len(versions), len(versions)))
    for c in comparisons:
        i, j, r = index[c.a], index[c.b], row[c.conversation_id]
        for o in c.outcomes:
            if o.criterion == criterion and o.outcome is not None:
                share = {"a": 1.0, "b": 0.0}.get(o.outcome, 0.5)  # a tie: half a win each
                w[r, i, j] += share
                w[r, j, i] += 1.0 - share
    return w


def rank(comparisons: Sequence[Comparison], versions: Sequence[str], criterion: str, *, prior: float = 1.0,
         resamples: int = 1000, seed: int = 0) -> list[Ranked]:
    """The versions by Bradley–Terry strength on ``criterion``, strongest first, with bootstrap intervals."""
    per = wins_by_conversation(comparisons, versions, criterion)
    theta = bradley_terry(per.sum(axis=0), prior=prior)
    intervals = bootstrap_strengths(per, prior=prior, resamples=resamples, seed=seed)
    ranked = [Ranked(v, float(theta[i]), intervals.low[i] if intervals else None,
                     intervals.high[i] if intervals else None) for i, v in enumerate(versions)]
    return sorted(ranked, key=lambda r: -r.strength)


def compare_pairwise(
    versions: Sequence[str | Path] | Mapping[str, Iterable[Conversation | Mapping[str, Any]]], *,
    model: ModelLike = None, criteria: Iterable[str | Criterion] = ("helpfulness",), concurrency: int = 16,
    resamples: int = 1000, seed: int = 0, prior: float = 1.0,
    on_comparison: Callable[[Comparison], None] | None = None,
) -> PairwiseReport:
    """Judge every pair of ``versions`` on the conversations they share and summarise (module doc).

    ``versions``: files (named by their stems) or ``{name: conversations}``; ``model``: the judge (an LLM judge:
    a model string, a chat model or a :class:`~judgegraph.judges.Judge`); ``criteria`` as
    :func:`~judgegraph.metrics.pairwise.create_pairwise_metric` takes them; ``on_comparison`` is called as each
    comparison finishes (``judgegraph pairwise --out`` writes it). Rankings are made with 3 or more versions."""
    chosen = as_criteria(criteria)
    read = _versions(versions)
    judge = resolve_judge(model)
    graph = create_pairwise_metric(model=judge, criteria=chosen)
    todo = [(cid, a, b) for a, b in itertools.combinations(read, 2) for cid in a.conversations if cid in b.conversations]
    ids = dict.fromkeys(cid for v in read for cid in v.conversations)  # in input order
    missing = {cid: lacking for cid in ids if (lacking := [v.name for v in read if cid not in v.conversations])}
    report = PairwiseReport([v.name for v in read], chosen, judge.name, missing=missing,
                            input_errors=[e for v in read for e in v.errors], resamples=resamples, seed=seed,
                            prior=prior)
    inputs = [{"a": a.conversations[cid], "b": b.conversations[cid]} for cid, a, b in todo]
    done: dict[int, Comparison] = {}
    for i, out in graph.batch_as_completed(inputs, config={"max_concurrency": concurrency}, return_exceptions=True):
        cid, a, b = todo[i]
        if isinstance(out, BaseException):
            done[i] = Comparison(cid, a.name, b.name, error=f"{type(out).__name__}: {out}")
        else:
            done[i] = Comparison(cid, a.name, b.name, result=out["results"][graph.name])
        if on_comparison is not None:
            on_comparison(done[i])
    report.comparisons = [done[i] for i in sorted(done)]
    report.pairs = summarise(report.comparisons, report.versions, chosen)
    if len(read) > 2:
        report.rankings = {c.name: rank(report.comparisons, report.versions, c.name, prior=prior,
                                        resamples=resamples, seed=seed) for c in chosen}
    return report


def _versions(versions: Sequence[str | Path] | Mapping[str, Iterable[Conversation | Mapping[str, Any]]]
              ) -> list[Version]:
    if isinstance(versions, Mapping):
        out = []
        for name, conversations in versions.items():
            v = Version(str(name))
            for c in conversations:
                conv = c if isinstance(c, Conversation) else Conversation.model_validate(c)
                v.conversations.setdefault(conv.id, conv)
            out.append(v)
    else:
        paths = list(versions)
        out = [read_version(p, n) for p, n in zip(paths, version_names(paths))]
    if len(out) < 2:
        raise ValueError(f"pairwise judging needs at least two versions, got {len(out)}")
    if len({v.name for v in out}) != len(out):
        raise ValueError(f"the versions need distinct names, got {[v.name for v in out]}")
    return out

