"""A jury: one judge made of several (jurors), so every metric can be judged by a jury unchanged (docs/juries.md).
Each request is a small LangGraph graph (a node per juror, reached by ``Send``, then ``aggregate``); below
``quorum`` answers the outcome is a judge error. ``--repeat N`` is a jury of N seeded repeats (:meth:`Jury.repeat`).
"""

from __future__ import annotations

import operator
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from ..data.results import JudgeAttempt, Usage, Verdict, Vote
from .base import Endpoint, Judge, JudgeOutcome, JudgeRequest, JurorAnswer
from .verdicts import AGGREGATES, Aggregate, combine

__all__ = ["AGGREGATES", "Aggregate", "Jury", "with_votes"]

AGGREGATE_NODE = "aggregate"


class _State(TypedDict, total=False):
    request: JudgeRequest
    juror: int  # a juror node's input: which juror
    answers: Annotated[list[tuple[int, JurorAnswer]], operator.add]  # (juror index, its answer)
    outcome: JudgeOutcome


def _juror_node(jury: Jury, index: int) -> RunnableLambda:
    juror, repeat = jury.jurors[index], jury.repeats[index]

    def answer(outcome: JudgeOutcome) -> _State:
        return _State(answers=[(index, JurorAnswer(juror.name, repeat, _named(outcome, juror.name)))])

    def run(state: _State) -> _State:
        return answer(juror.run(state["request"]))

    async def arun(state: _State) -> _State:
        return answer(await juror.arun(state["request"]))

    return RunnableLambda(run, afunc=arun, name=jury.node_names[index])


def _named(outcome: JudgeOutcome, juror: str) -> JudgeOutcome:
    """``outcome`` with every attempt naming its juror (an attempt with no model gets the juror's name)."""
    if all(a.model for a in outcome.transcript):
        return outcome
    return replace(outcome, transcript=[a if a.model else a.model_copy(update={"model": juror})
                                        for a in outcome.transcript])


class Jury(Judge):
    """Several judges (``jurors``) answering each request, their answers aggregated by ``aggregate``
    (:func:`~judgegraph.judges.verdicts.combine`) while ``quorum`` answer (default a majority), else a judge error
    naming each failure. ``repeats``: each juror's repeat number. Each juror keeps its own cache."""

    def __init__(self, jurors: Sequence[Judge], *, aggregate: str = "majority", quorum: int | None = None,
                 repeats: Sequence[int] | None = None, name: str | None = None) -> None:
        jurors = list(jurors)
        if not jurors or not all(isinstance(j, Judge) for j in jurors):
            raise ValueError("a jury needs at least one juror, each a Judge")
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        need = len(jurors) // 2 + 1 if quorum is None else quorum
        if isinstance(need, bool) or not isinstance(need, int) or not 1 <= need <= len(jurors):
            raise ValueError(f"quorum must be a whole number from 1 to {len(jurors)} (the jurors), got {quorum!r}")
        self.jurors = jurors
        self.repeats = list(repeats) if repeats is not None else [0] * len(jurors)
        if len(self.repeats) != len(jurors):
            raise ValueError(f"repeats: {len(self.repeats)} numbers for {len(jurors)} jurors")
        self.aggregate: Aggregate = aggregate  # type: ignore[assignment] # checked above
        self.quorum = need
        self.name = name or f"jury({aggregate}):{_names(jurors, self.repeats)}"
        self.kind = "offline" if all(j.kind == "offline" for j in jurors) else "llm"
        rules = list(dict.fromkeys(j.rule for j in jurors if j.rule))
        self.rule = "; ".join(rules) if rules else None
        self.cache = None
        self.node_names = [f"juror_{i + 1} {j.name.replace(':', '/')}"
                           + (f" #{r}" if any(self.repeats) else "") for i, (j, r) in enumerate(zip(jurors, self.repeats))]
        self.graph = self._build()

    @classmethod
    def repeat(cls, judge: Judge, n: int, *, aggregate: str = "majority", quorum: int | None = None,
               first_seed: int | None = None) -> Jury:
        """``judge`` ``n`` times, repeat ``i`` with seed ``first_seed + i`` (default: the judge's own
        ``seed`` setting, else 0) for an LLM judge whose model takes a seed. A judge that cannot vary
        (no seed, temperature 0; or the offline judge) gets a warning: its repeats are the same answer."""
        from .llm import LLMJudge

        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"repeat must be a whole number >= 1, got {n!r}")
        if isinstance(judge, Jury):
            return cls([r for j in judge.jurors for r in cls.repeat(j, n, first_seed=first_seed).jurors],
                       aggregate=aggregate, quorum=quorum, repeats=[i for _ in judge.jurors for i in range(n)],
                       name=f"jury({aggregate}):{_names(judge.jurors, [1] * len(judge.jurors), n)}")
        if isinstance(judge, LLMJudge):
            start = first_seed if first_seed is not None else int(judge.settings.get("seed") or 0)
            if not judge.seedable and judge.settings.get("temperature") == 0:
                _warn_once(judge.name, f"--repeat with {judge.name}: its model takes no seed and runs at temperature"
                           " 0, so every repeat is likely the same answer (set a temperature above 0)")
            jurors: list[Judge] = [judge.with_seed(start + i, i) for i in range(n)]
        else:
            if n > 1:
                _warn_once(judge.name, f"--repeat with {judge.name}: this judge cannot vary (no seed), every repeat"
                           " is the same answer")
            jurors = [judge] * n
        return cls(jurors, aggregate=aggregate, quorum=quorum, repeats=list(range(n)),
                   name=f"jury({aggregate}):{_names([judge], [1], n)}")

    def _build(self) -> Any:  # Any: a compiled LangGraph graph
        builder = StateGraph(_State)
        for i, name in enumerate(self.node_names):
            builder.add_node(name, _juror_node(self, i))
            builder.add_edge(name, AGGREGATE_NODE)
        builder.add_node(AGGREGATE_NODE, self._aggregate_node)

        def fan_out(state: _State) -> list[Send]:
            return [Send(name, {"request": state["request"], "juror": i}) for i, name in enumerate(self.node_names)]

        builder.add_conditional_edges(START, fan_out, list(self.node_names))
        builder.add_edge(AGGREGATE_NODE, END)
        # checkpointer=False: a jury runs inside a metric's node and never checkpoints (its state holds requests)
        return builder.compile(checkpointer=False, name="jury")

    def _aggregate_node(self, state: _State) -> _State:
        answers = [a for _, a in sorted(state.get("answers") or [], key=lambda pair: pair[0])]
        return _State(outcome=self.decide(state["request"], answers))

    def decide(self, request: JudgeRequest, answers: Sequence[JurorAnswer]) -> JudgeOutcome:
        """The jury's outcome from its jurors' (in juror order): the aggregate of those that answered
        when at least ``quorum`` did, else a judge error naming every failure."""
        ok = [a for a in answers if a.outcome.ok]
        failed = [a for a in answers if not a.outcome.ok]
        transcript: list[JudgeAttempt] = [t for a in answers for t in a.outcome.transcript]
        usage = Usage.total(a.outcome.usage for a in answers)
        attempts = sum(a.outcome.attempts for a in answers)
        cached = bool(answers) and all(a.outcome.cached for a in answers)
        failures = "; ".join(f"{_label(a)}: {a.outcome.error or 'no answer'}" for a in failed)
        if len(ok) < self.quorum:
            error = (f"jury: {len(ok)} of {len(self.jurors)} jurors answered, below the quorum of {self.quorum}"
                     + (f" ({failures})" if failures else ""))
            return JudgeOutcome(None, error, attempts, usage, cached=cached, transcript=transcript,
                                jurors=list(answers))
        value = combine([a.outcome.value for a in ok if a.outcome.value is not None], self.aggregate)
        scores = [a.outcome.score for a in ok]
        score = sum(s for s in scores if s is not None) / len(scores) if all(s is not None for s in scores) else None
        return JudgeOutcome(value, None, attempts, usage, score=score, cached=cached, transcript=transcript,
                            jurors=list(answers))

    @property
    def settings(self) -> dict[str, Any]:
        """How the jury decides and who sits on it (each juror's own settings), for a run's record."""
        return {"aggregate": self.aggregate, "quorum": self.quorum,
                "jurors": [{"name": j.name, "repeat": r, "settings": dict(getattr(j, "settings", None) or {})}
                           for j, r in zip(self.jurors, self.repeats)]}

    def supports(self, task: str) -> bool:
        return all(j.supports(task) for j in self.jurors)

    @property
    def embeddings(self) -> Any:
        return self.jurors[0].embeddings

    @property
    def endpoint(self) -> Endpoint | None:
        return self.jurors[0].endpoint

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        return self._outcome(self.graph.invoke({"request": request}, _CONFIG))

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        return self._outcome(await self.graph.ainvoke({"request": request}, _CONFIG))

    async def arun(self, request: JudgeRequest) -> JudgeOutcome:
        return await self.ajudge(request)  # each juror prepares and caches for itself

    def _outcome(self, state: Mapping[str, Any]) -> JudgeOutcome:
        outcome = state.get("outcome")
        return outcome if isinstance(outcome, JudgeOutcome) else JudgeOutcome(None, "jury: no outcome")


#: Each request's jury run: no recursion worth a limit (two steps), and a name for traces.
_CONFIG: RunnableConfig = {"run_name": "jury"}


def _label(answer: JurorAnswer) -> str:
    return f"{answer.judge} (repeat {answer.repeat})" if answer.repeat else answer.judge


def _names(jurors: Sequence[Judge], repeats: Sequence[int], times: int = 1) -> str:
    """``llm:a,llm:b`` (repeats of the same juror folded: ``llm:a*3``)."""
    if times > 1:
        return ",".join(f"{j.name}*{times}" for j in jurors)
    seen = Counter(j.name for j in jurors)
    if all(r == 0 for r in repeats) or len(seen) == len(jurors):
        return ",".join(j.name for j in jurors)
    return ",".join(f"{n}*{k}" if k > 1 else n for n, k in seen.items())


_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, UserWarning, stacklevel=3)


def with_votes(update: Any, jurors: Sequence[JurorAnswer], finish: Callable[[JudgeOutcome], Any]) -> Any:
    """``update`` (a judge step's state update, or a ``Command``) with ``votes`` on each verdict it
    writes: each juror's outcome is turned into verdicts by the step's own ``finish`` and matched by
    :attr:`Verdict.id`, so every metric's verdicts get their jurors' answers with no metric code."""
    inner = update.update if isinstance(update, Command) else update
    if not jurors or not isinstance(inner, dict) or not any(_verdicts(v) for v in inner.values()):
        return update
    answered = [(j, _by_id(finish, j.outcome)) for j in jurors]

    def voted(v: Verdict) -> Verdict:
        votes = []
        for juror, theirs in answered:
            mine = theirs.get(v.id)
            error = juror.outcome.error if not juror.outcome.ok else None
            if mine is None:
                votes.append(Vote(judge=juror.judge, repeat=juror.repeat, error=error or "no verdict for this item"))
                continue
            votes.append(Vote(judge=juror.judge, repeat=juror.repeat,
                              verdict=None if mine.verdict is None else str(mine.verdict), score=mine.score,
                              reason=mine.reason, error=mine.error or error))
        return v.model_copy(update={"votes": votes})

    changed = {k: [voted(x) if isinstance(x, Verdict) else x for x in value] if _verdicts(value)
               else voted(value) if isinstance(value, Verdict) else value for k, value in inner.items()}
    if isinstance(update, Command):
        return Command(graph=update.graph, update=changed, resume=update.resume, goto=update.goto)
    return changed


def _verdicts(value: object) -> bool:
    """Whether a state-update value is (or holds) verdicts."""
    return isinstance(value, Verdict) or (isinstance(value, list) and any(isinstance(x, Verdict) for x in value))


def _by_id(finish: Callable[[JudgeOutcome], Any], outcome: JudgeOutcome) -> dict[str, Verdict]:
    """The verdicts ``finish`` makes of one juror's outcome, by id (none if it cannot take it)."""
    try:
        update = finish(outcome)
    except Exception:  # noqa: BLE001 - a finish that cannot take this outcome gives no votes, the rest go on
        return {}
    inner = update.update if isinstance(update, Command) else update
    values = inner.values() if isinstance(inner, dict) else ()
    return {x.id: x for value in values for x in (value if isinstance(value, list) else [value]) if isinstance(x, Verdict)}

