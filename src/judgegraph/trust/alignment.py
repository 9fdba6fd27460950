"""Align an LLM judge to people's labels: :func:`align` (``judgegraph align -m METRIC --model M``).

The labelled conversations are split into a train and a held-out part; :func:`alignment_graph` (judge → compare
→ distil → choose_examples) turns the train part's disagreements into guidelines and few-shot examples, and the
held-out part is judged by the plain and the aligned judge (steps, bounds and figures: ``docs/alignment.md``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path
from typing import Any, cast

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict

from ..data.conversation import Conversation, as_conversation
from ..data.results import MetricResult, Usage, metric_key
from ..judges import Judge, JudgeRequest, ModelLike, resolve_judge
from ..judges.aligned import AlignedJudge, Alignment, Example
from ..metrics import MetricSpec, canonical_name
from .agreement import MetricAgreement, Pair, agreement
from .labels import Label, LabelSet

__all__ = ["AlignmentError", "AlignmentReport", "DistilledGuidelines", "align", "aalign", "alignment_graph"]

DISTIL_STEP = "align/distil_guidelines"
PROMPT_VALUES = {DISTIL_STEP: frozenset({"metric", "disagreements", "max_guidelines"})}
#: the defaults of the bounds on what an aligned judge adds to every prompt
MAX_EXAMPLES, MAX_EXAMPLE_CHARS, MAX_GUIDELINES, MAX_GUIDELINE_CHARS = 6, 800, 8, 400
#: the most disagreements shown to the distilling call (the first ones, in label order)
MAX_DISAGREEMENTS_SHOWN = 30
#: turns of a whole conversation kept in an example (the latest ones)
MAX_EXAMPLE_TURNS = 6

MetricLike = str | MetricSpec | Callable[..., CompiledStateGraph]
LabelsLike = str | Path | Iterable[str | Path] | Iterable[Label] | LabelSet
ConversationsLike = Iterable[Conversation | Mapping[str, Any] | str | Path]


class AlignmentError(ValueError):
    """Alignment cannot be made from this input: labels that match nothing, a distilling call that failed."""


class DistilledGuidelines(BaseModel):
    """The distilling step's answer."""

    reason: str = Field(description="what the people decide that the judge missed, in one to three sentences")
    guidelines: list[str] = Field(description="the guidelines, one or two sentences each")


# -- the report ------------------------------------------------------------------------------------------------


class Figures(TypedDict):
    """One agreement's figures (trust/agreement's), as the report and the alignment file hold them."""

    n: int
    agreement: float | None
    kappa: float | None
    judge_errors: int
    weighted_kappa: NotRequired[float | None]  # ordinal labels
    spearman: NotRequired[float | None]  # ordinal and numeric labels
    intervals: NotRequired[dict[str, list[float]]]  # figure -> [low, high]


class TrainFigures(TypedDict):
    conversations: int
    labels: int
    plain: Figures  # the plain judge's agreement on the train labels
    disagreements: int


class HeldOutFigures(TypedDict):
    conversations: int
    labels: int
    before: Figures  # the plain judge's
    after: Figures  # the aligned judge's


def figures(m: MetricAgreement | None) -> Figures:
    """The figures of one agreement (trust/agreement's): n, % agreement, kappa (and the ordinal/numeric ones)."""
    if m is None:
        return Figures(n=0, agreement=None, kappa=None, judge_errors=0)
    out = Figures(n=m.n, agreement=m.agreement, kappa=m.kappa, judge_errors=len(m.judge_errors))
    if "weighted_kappa" in m.figures:
        out["weighted_kappa"] = m.weighted_kappa
    if "spearman" in m.figures:
        out["spearman"] = m.spearman
    out["intervals"] = {k: [v.low, v.high] for k, v in m.intervals.items()}
    return out


@dataclass
class AlignmentReport:
    """What :func:`align` made and measured."""

    metric: str
    alignment: Alignment
    judge: AlignedJudge
    train: TrainFigures
    held_out: HeldOutFigures
    usage: dict[str, Usage]  # "train", "distil", "held_out_plain", "held_out_aligned"
    unmatched: list[str] = field(default_factory=list)  # labels that match no conversation or verdict, with why
    judge_errors: list[str] = field(default_factory=list)  # verdicts the judge could not make, where and why
    distil_reason: str = ""
    path: Path | None = None
    train_ids: list[str] = field(default_factory=list)  # the conversations of each part (the examples: train only)
    held_out_ids: list[str] = field(default_factory=list)

    @property
    def cost(self) -> Usage:
        """What making the alignment cost (train judging and distilling), without the held-out measurement."""
        return self.usage["train"] + self.usage["distil"]

    @property
    def worse(self) -> str | None:
        """Why the aligned judge is worse than the plain one on the held-out labels (lower agreement), or None."""
        before, after = self.held_out["before"], self.held_out["after"]
        if before["agreement"] is None or after["agreement"] is None or after["agreement"] >= before["agreement"]:
            return None
        kappa = "" if before["kappa"] is None or after["kappa"] is None else \
            f", kappa {after['kappa']:.3f} vs {before['kappa']:.3f}"
        return (f"the aligned judge did worse on its {self.held_out['labels']} held-out labels than the plain judge: "
                f"{100 * after['agreement']:.1f} % agreement vs {100 * before['agreement']:.1f} % (n={after['n']}"
                f"{kappa}); read its guidelines before using it, or keep the plain judge")

    def to_json(self) -> dict[str, object]:  # Any: JSON values
        return {"metric": self.metric, "worse": self.worse, "model": self.alignment.model, "judge": self.judge.name,
                "sha256": self.alignment.hash, "file": str(self.path) if self.path else None,
                "guidelines": list(self.alignment.guidelines), "examples": len(self.alignment.examples),
                "distil_reason": self.distil_reason, "train": self.train, "held_out": self.held_out,
                "usage": {k: v.model_dump() for k, v in self.usage.items()},
                "alignment_cost": self.cost.model_dump(), "unmatched": self.unmatched,
                "judge_errors": self.judge_errors}


# -- labels and conversations ----------------------------------------------------------------------------------


def _conversations(conversations: ConversationsLike) -> list[Conversation]:
    from ..loaders.files import load_conversations

    items = [conversations] if isinstance(conversations, (str, Path)) else list(conversations)
    paths = [c for c in items if isinstance(c, (str, Path))]
    out = load_conversations(paths) if paths else []
    return out + [as_conversation(dict(c) if isinstance(c, Mapping) else c)
                  for c in items if not isinstance(c, (str, Path))]


def _text(value: object) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value).strip()


def _excerpt(conversation: Conversation, numbers: Sequence[int], budget: int) -> tuple[tuple[int, str, str], ...]:
    """The turns ``numbers`` (1-based) of ``conversation``, their texts cut to share ``budget`` characters."""
    picked = [(n, conversation.turns[n - 1]) for n in numbers if 1 <= n <= len(conversation.turns)]
    share = max(2, budget // max(1, len(picked)))  # at most budget characters in all (budget >= 80, <= 6 turns)
    return tuple((n, t.role, t.content if len(t.content) <= share else t.content[: share - 1] + "…") for n, t in picked)


def _target_turns(label: Label | Pair, conversation: Conversation) -> list[int]:
    """The 1-based turns an example of ``label`` shows: the labelled turn and the message before it; a verdict's
    turns; for a whole-result label the latest turns of the conversation."""
    if isinstance(label, Pair) and label.turns:
        return label.turns[-MAX_EXAMPLE_TURNS:]
    turn = label.turn if isinstance(label, Label) else None
    if turn is not None:
        return [t for t in (turn - 1, turn) if t >= 1]
    n = len(conversation.turns)
    return list(range(max(1, n - MAX_EXAMPLE_TURNS + 1), n + 1))


# -- the graph ---------------------------------------------------------------------------------------------------


class AlignState(TypedDict, total=False):
    train_results: dict[str, MetricResult]  # conversation id -> the plain judge's result
    train_usage: Usage
    run_errors: list[str]
    comparison: MetricAgreement | None
    unmatched: list[str]
    guidelines: list[str]
    distil_reason: str
    distil_usage: Usage
    examples: list[Example]


@dataclass
class _Job:
    """What the alignment graph works on (its nodes close over it; the state holds what they produce)."""

    name: str  # the result key of the metric
    build: Callable[[Judge], CompiledStateGraph]
    judge: Judge
    conversations: dict[str, Conversation]
    train_ids: list[str]
    train_labels: list[Label]
    concurrency: int
    max_examples: int
    max_example_chars: int
    max_guidelines: int


async def judge_all(build: Callable[[Judge], CompiledStateGraph], judge: Judge, name: str,
                    conversations: Sequence[Conversation], concurrency: int) -> tuple[dict[str, MetricResult], list[str]]:
    """Each conversation judged by the metric built with ``judge``: results by conversation id, and the
    conversations whose run failed (with why; never counted as a verdict)."""
    graph = build(judge)
    outputs = await graph.abatch([{"conversation": c} for c in conversations],
                                 config={"max_concurrency": concurrency}, return_exceptions=True)
    results: dict[str, MetricResult] = {}
    errors: list[str] = []
    for conversation, out in zip(conversations, outputs):
        result = out.get("results", {}).get(name) if isinstance(out, dict) else None
        if isinstance(result, MetricResult):
            results[conversation.id] = result
        else:
            errors.append(f"conversation {conversation.id!r}: the metric's run failed: "
                          f"{type(out).__name__}: {out}" if isinstance(out, BaseException) else
                          f"conversation {conversation.id!r}: no {name} result")
    return results, errors


def _compare(name: str, results: Mapping[str, MetricResult], labels: list[Label], *,
             resamples: int = 0) -> tuple[MetricAgreement | None, list[str]]:
    records = [{"conversation_id": cid, "results": {name: r.model_dump(mode="json")}} for cid, r in results.items()]
    report = agreement(records, LabelSet(labels=list(labels)), reviews=False, resamples=resamples)
    if report.label_errors:  # a word outside the metric's vocabulary: compared, it would count as a disagreement
        raise AlignmentError("labels that cannot be used:\n" + "\n".join(f"  {e}" for e in report.label_errors[:20]))
    found = next(iter(report.metrics.values()), None)
    return found, [str(u) for u in report.unmatched]


def _describe_case(index: int, pair: Pair, conversation: Conversation, budget: int) -> str:
    turns = _excerpt(conversation, _target_turns(pair, conversation), budget)
    lines = [f"Case {index} ({'turn ' + str(pair.turns[-1]) if pair.turns else 'the whole conversation'}):"]
    lines += [f"[turn {n}] {role}: {content}" for n, role, content in turns]
    lines.append(f"The judge said: {_text(pair.judge)}. Its reason: {pair.reason or '(none)'}")
    lines.append(f"People said: {_text(pair.human)}" + (f" (their note: {pair.note})" if pair.note else ""))
    return "\n".join(lines)


def _choose(job: _Job, comparison: MetricAgreement | None, results: Mapping[str, MetricResult]) -> list[Example]:
    """Few-shot examples from the train labels: every class in turn, disagreements first, then label order."""
    wrong = {(p.conversation_id, p.turns[-1] if p.turns else None, _text(p.human).lower())
             for p in (comparison.disagreements if comparison else [])}
    candidates: dict[str, list[tuple[bool, Example]]] = {}
    for label in job.train_labels:
        conversation = job.conversations.get(label.conversation_id)
        if conversation is None:
            continue
        about: Label | Pair = label
        if label.verdict_id is not None:  # a verdict's turns: from the plain judge's result
            result = results.get(label.conversation_id)
            verdict = next((v for v in (result.verdicts if result else []) if str(v.id) == label.verdict_id), None)
            if verdict is None:
                continue
            turns = [t + 1 for t in getattr(verdict, "turns", []) or []]
            about = Pair(label.conversation_id, label.metric, label.verdict_id, turns, label.value, None, "", "")
        numbers = _target_turns(about, conversation)
        value = _text(label.value)
        last = label.turn if label.turn is not None else (numbers[-1] if isinstance(about, Pair) and numbers else None)
        example = Example(label.conversation_id, label.target, _excerpt(conversation, numbers, job.max_example_chars),
                          value, label.note[:200])
        candidates.setdefault(value.lower(), []).append(((label.conversation_id, last, value.lower()) in wrong, example))
    queues = [[ex for _, ex in sorted(items, key=lambda item: not item[0])] for _, items in sorted(candidates.items())]
    return [ex for turn in zip_longest(*queues) for ex in turn if ex is not None][: job.max_examples]


def alignment_graph(job: _Job) -> CompiledStateGraph:
    """judge → compare → distil → choose_examples, over ``job``'s train part."""

    async def judge(state: AlignState) -> AlignState:
        chosen = [job.conversations[c] for c in job.train_ids]
        results, errors = await judge_all(job.build, job.judge, job.name, chosen, job.concurrency)
        return {"train_results": results, "run_errors": errors,
                "train_usage": Usage.total(r.usage for r in results.values())}

    def compare(state: AlignState) -> AlignState:
        comparison, unmatched = _compare(job.name, state["train_results"], job.train_labels)
        return {"comparison": comparison, "unmatched": unmatched}

    async def distil(state: AlignState) -> AlignState:
        comparison = state.get("comparison")
        wrong = comparison.disagreements if comparison else []
        if not wrong:
            return {"guidelines": [], "distil_reason": "the judge agreed with every train label", "distil_usage": Usage()}
        cases = "\n\n".join(_describe_case(i, p, job.conversations[p.conversation_id], job.max_example_chars)
                            for i, p in enumerate(wrong[:MAX_DISAGREEMENTS_SHOWN], 1))
        request = JudgeRequest(task="align_guidelines", step=DISTIL_STEP, schema=DistilledGuidelines,
                               values={"metric": job.name, "disagreements": cases,
                                       "max_guidelines": str(job.max_guidelines)})
        outcome = await job.judge.arun(request)
        used = outcome.usage.model_copy(update={"calls": max(outcome.usage.calls, outcome.attempts)})
        if not outcome.ok or not isinstance(outcome.value, DistilledGuidelines):
            raise AlignmentError(f"the distilling call ({DISTIL_STEP}) could not be made: {outcome.error}")
        guidelines = [" ".join(g.split())[:MAX_GUIDELINE_CHARS] for g in outcome.value.guidelines if g.strip()]
        return {"guidelines": guidelines[: job.max_guidelines], "distil_reason": outcome.value.reason,
                "distil_usage": used}

    def choose_examples(state: AlignState) -> AlignState:
        return {"examples": _choose(job, state.get("comparison"), state["train_results"])}

    builder = StateGraph(AlignState).add_sequence([judge, compare, distil, choose_examples])
    builder.add_edge(START, "judge")
    builder.add_edge("choose_examples", END)
    return builder.compile(name="align")


# -- align -------------------------------------------------------------------------------------------------------


def _builder(metric: MetricLike, options: Mapping[str, Any]) -> Callable[[Judge], CompiledStateGraph]:
    from ..report import build_metric

    if isinstance(metric, (str, MetricSpec)):
        return lambda judge: build_metric(metric, judge, **options)
    if callable(metric):
        return lambda judge: metric(model=judge, **options)
    raise TypeError(f"a metric is a name, a MetricSpec or a factory taking model=, got {type(metric).__name__}")


async def aalign(metric: MetricLike, labels: LabelsLike, *, model: ModelLike, conversations: ConversationsLike,
                 options: Mapping[str, Any] | None = None, seed: int = 0, test_fraction: float = 0.3,
                 group: str | None = None, max_examples: int = MAX_EXAMPLES, max_example_chars: int = MAX_EXAMPLE_CHARS,
                 max_guidelines: int = MAX_GUIDELINES, concurrency: int = 16, out: str | Path | None = None,
                 **judge_settings: Any) -> AlignmentReport:  # Any: resolve_judge's keyword arguments (base_url ...)
    """:func:`align`, awaited."""
    from .offline_fit import group_of, split_groups

    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must be >= 0 and < 1, got {test_fraction}")
    for name, value in (("max_examples", max_examples), ("max_guidelines", max_guidelines)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if max_example_chars < 80:
        raise ValueError(f"max_example_chars must be >= 80, got {max_example_chars}")
    judge = resolve_judge(model, max_concurrency=concurrency, **judge_settings)
    if judge.kind != "llm":
        raise ValueError("aligning an LLM judge needs an LLM model (model=...); the offline judge is aligned by "
                         "fitting its rule: judgegraph align --model offline (docs/offline_alignment.md)")
    build = _builder(metric, dict(options or {}))
    graph = build(judge)
    name = str(graph.name)  # the result key: a metric's graph names its results
    metric_name = canonical_name(metric) if isinstance(metric, str) else \
        metric.name if isinstance(metric, MetricSpec) else name
    label_set = LabelSet.of(labels)
    if label_set.errors:
        raise AlignmentError("labels that cannot be used:\n" + "\n".join(f"  {e}" for e in label_set.errors[:20]))
    wanted = {metric_key(name), metric_key(metric_name)}
    about = [lb for lb in label_set.labels if metric_key(lb.metric) in wanted]
    if not about:
        named = sorted({lb.metric for lb in label_set.labels})
        raise AlignmentError(f"no label is about {name} (the labels name {', '.join(named) or 'no metric'})")
    convs = {c.id: c for c in _conversations(conversations)}
    unmatched = [f"{lb.source}: conversation {lb.conversation_id!r}: not in the conversations given"
                 for lb in about if lb.conversation_id not in convs]
    about = [lb for lb in about if lb.conversation_id in convs]
    if not about:
        raise AlignmentError(f"no labelled conversation is in the conversations given ({len(unmatched)} labels)")
    ids = list(dict.fromkeys(lb.conversation_id for lb in about))
    held_mask = split_groups([group_of(c, group) for c in ids], test_fraction=test_fraction, seed=seed) \
        if test_fraction > 0 else [False] * len(ids)
    held_ids = [c for c, h in zip(ids, held_mask) if h]
    train_ids = [c for c, h in zip(ids, held_mask) if not h]
    held_set = set(held_ids)
    train_labels = [lb for lb in about if lb.conversation_id not in held_set]
    held_labels = [lb for lb in about if lb.conversation_id in held_set]
    job = _Job(name, build, judge, convs, train_ids, train_labels, concurrency, max_examples, max_example_chars,
               max_guidelines)
    state = cast(AlignState, await alignment_graph(job).ainvoke({}))
    comparison = state.get("comparison")
    if comparison is None or comparison.n + len(comparison.judge_errors) == 0:
        raise AlignmentError(f"no train label matches a verdict of {name}: "
                             + "; ".join((state.get("unmatched") or unmatched)[:5]))
    model_name = str(getattr(judge, "model_name", judge.name))
    alignment = Alignment(metric_name, model_name, tuple(state.get("guidelines") or []),
                          tuple(state.get("examples") or []))
    aligned = AlignedJudge(judge, alignment)
    held_plain: dict[str, MetricResult] = {}
    held_aligned: dict[str, MetricResult] = {}
    errors = list(state.get("run_errors") or [])
    if held_ids:
        chosen = [convs[c] for c in held_ids]
        (held_plain, e1), (held_aligned, e2) = await asyncio.gather(
            judge_all(build, judge, name, chosen, concurrency), judge_all(build, aligned, name, chosen, concurrency))
        errors += e1 + e2
    before, more = _compare(name, held_plain, held_labels, resamples=1000) if held_ids else (None, [])
    after, _ = _compare(name, held_aligned, held_labels, resamples=1000) if held_ids else (None, [])
    for where, m in (("train", comparison), ("held-out plain", before), ("held-out aligned", after)):
        errors += [f"{where}: conversation {p.conversation_id!r}, verdict {p.verdict_id}: the judge could not judge it"
                   for p in (m.judge_errors if m else [])]
    report = AlignmentReport(
        metric=alignment.metric, alignment=alignment, judge=aligned,
        train=TrainFigures(conversations=len(train_ids), labels=len(train_labels), plain=figures(comparison),
                           disagreements=len(comparison.disagreements)),
        held_out=HeldOutFigures(conversations=len(held_ids), labels=len(held_labels), before=figures(before),
                                after=figures(after)),
        usage={"train": state.get("train_usage") or Usage(), "distil": state.get("distil_usage") or Usage(),
               "held_out_plain": Usage.total(r.usage for r in held_plain.values()),
               "held_out_aligned": Usage.total(r.usage for r in held_aligned.values())},
        unmatched=unmatched + list(state.get("unmatched") or []) + more, judge_errors=errors,
        distil_reason=str(state.get("distil_reason") or ""), train_ids=train_ids, held_out_ids=held_ids)
    report.alignment = replace(alignment, fit={"seed": seed, "test_fraction": test_fraction, "group": group,
                                               "result_key": name, "train": report.train, "held_out": report.held_out,
                                               "alignment_cost": report.cost.model_dump()})
    if out is not None:
        report.path = report.alignment.save(out)
    return report


def align(metric: MetricLike, labels: LabelsLike, *, model: ModelLike, conversations: ConversationsLike,
          **kwargs: Any) -> AlignmentReport:  # Any: aalign's keyword arguments
    """Align ``model``'s judge of ``metric`` to ``labels`` (see the module).

    ``metric``: a metric name or import path (``turn-relevancy``, ``mypkg.judges:politeness``), a
    ``MetricSpec``, or a factory called as ``factory(model=judge, **options)`` (``make_metric`` with its
    arguments bound, ``functools.partial``). ``labels``: label files (:func:`~judgegraph.trust.labels.read_labels`
    shapes), ``Label`` objects or a ``LabelSet``. ``conversations``: files, ``Conversation`` objects or dicts.
    Keyword arguments: ``options`` (the metric's), ``seed``, ``test_fraction`` (held-out share of conversations,
    default 0.3), ``group`` (a regex whose first group names a conversation's dialogue: one dialogue stays on
    one side), ``max_examples``, ``max_example_chars``, ``max_guidelines``, ``concurrency``, ``out`` (a folder:
    the aligned judge's file is written there), and :func:`~judgegraph.judges.resolve_judge`'s settings
    (``base_url``, ``timeout``, ``cache`` ...).

    Returns an :class:`AlignmentReport`: its ``judge`` is the aligned judge (any metric's ``model=``), its
    ``alignment`` what is written. ``AlignmentError``: labels that cannot be used or match nothing, or a
    distilling call that failed."""
    return asyncio.run(aalign(metric, labels, model=model, conversations=conversations, **kwargs))
