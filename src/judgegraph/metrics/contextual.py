"""Turn contextual relevancy (docs/turn_contextual_relevancy.md): is what the chatbot
retrieved for each turn relevant to what the user asked in that turn?

    START → window_turns ─Send per turn→ extract_statements ─Send→ judge_statements
          [─Send→ verify_verdict] → reduce_score → END

Extraction requests hold the nodes' text only, so the cache reuses them: each
node is extracted and judged once, whatever the window size.
"""

from __future__ import annotations

__all__ = [
    "ContextualSettings",
    "ContextualState",
    "TurnContext",
    "build_turn_contextual_relevancy_graph",
    "contextual_reason",
    "create_turn_contextual_relevancy_metric",
    "turn_context",
]

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ..core.nodes import Node, quote, scoring_edges, turn_label, window_node, with_transcript
from ..core.scoring import WindowOptions, option, strict
from ..core.state import MetricInput, MetricOutput, MetricState, conversation_of
from ..core.statements import PROMPT_VALUES as STATEMENT_PROMPT_VALUES
from ..core.statements import (
    JudgeCall,
    Statement,
    StatementVerdict,
    StepInput,
    StepUpdate,
    extract_statements_step,
    judge_statements_step,
    verify_step,
)
from ..data.conversation import RetrievalNode
from ..data.results import JudgeErrorInfo, Usage, merge_verdicts
from ..data.windows import Window
from . import MetricSpec
from ._renamed import renamed

METRIC = "turn_contextual_relevancy"

OFFLINE_MODE = "offline: sentences + embeddings"
LLM_MODE = "llm: extracted statements"

ExtractPer = Literal["turn", "node"]
JudgePer = Literal["turn", "node", "statement"]
_GRAIN = {"turn": 0, "node": 1, "statement": 2}


@dataclass(frozen=True)
class TurnContext:
    """One assistant exchange: what was asked, what was retrieved, its window's earlier messages."""

    exchange: int
    turns: tuple[int, ...]  # the assistant turns (0-based)
    user_message: str
    context: tuple[tuple[str, str], ...]  # (role, content) of the window's earlier messages
    nodes: tuple[tuple[int, int, RetrievalNode], ...]  # (turn, index in that turn's retrieval_context, node)

    @property
    def label(self) -> str:
        return turn_label(self.turns)


def turn_context(window: Window) -> TurnContext:
    target = window.target
    # earlier exchanges' user and assistant messages (tool output left out), then the target's opening greeting
    shown = [it for ex in window.context
             for it in sorted((*ex.opening, *ex.user, *ex.assistant), key=lambda t: t.index)]
    context = [(it.turn.role, it.turn.content) for it in (*shown, *target.opening)]
    nodes = tuple((it.index, n, node) for it in target.assistant for n, node in enumerate(it.turn.retrieval_context))
    return TurnContext(target.index, target.reply_turn_indices, target.user_text, tuple(context), nodes)


def node_label(turn: int | None, node: int) -> str:
    return f"node {node + 1}" if turn is None else f"turn {turn + 1} node {node + 1}"


class ContextualState(MetricState, total=False):
    turn_contexts: list[TurnContext]
    statements: Annotated[list[Statement], operator.add]
    verdicts: Annotated[list[StatementVerdict], merge_verdicts]
    verified: Annotated[list[StatementVerdict], merge_verdicts]  # second looks and reviews: they win
    calls: Annotated[list[JudgeCall], operator.add]


class TurnRow(TypedDict):
    """One exchange in the result's ``details["turns"]``."""

    exchange: int
    turns: list[int]  # 1-based
    label: str
    status: Literal["scored", "not judged", "no context"]
    score: float | None
    nodes: int
    statements: int
    judged: int
    relevant: int


class TurnTask(StepInput, total=False):
    """A statement step's input for one turn (extraction: ``retrieval_context`` every node of the turn, flat over its
    assistant turns, ``node_indices`` the ones it extracts)."""

    turn: TurnContext


@dataclass(frozen=True, kw_only=True)
class ContextualSettings(WindowOptions):
    """The shared options, the second look (``verify``) and how requests are grouped."""

    verify: bool = option(False, help="a second look at each 'irrelevant' verdict (LLM judge)")
    extract_per: ExtractPer = option("turn", help="one extraction request per turn (all its nodes) or per node")
    judge_per: JudgePer = option("turn", help="one judgement request per turn, per node or per statement")

    def check(self) -> None:
        super().check()
        if self.extract_per not in ("turn", "node") or self.judge_per not in _GRAIN:
            raise ValueError(f"extract_per must be 'turn' or 'node' and judge_per 'turn', 'node' or 'statement',"
                             f" got {self.extract_per!r} and {self.judge_per!r}")
        if _GRAIN[self.judge_per] < _GRAIN[self.extract_per]:
            raise ValueError(f"judge_per={self.judge_per!r} needs extract_per='turn': a judgement can only use"
                             " statements of one extraction")
        if self.verify and self.offline:
            raise ValueError("verify=True needs an LLM judge (pass model=...)")


def then_route(step: Runnable, route: Callable[[Any, StepUpdate], Any], name: str) -> RunnableLambda:
    """``step``, then ``route(task, update)`` (a state update or a Command)."""

    def run(task: Any) -> Any:
        return route(task, step.invoke(task))

    async def arun(task: Any) -> Any:
        return route(task, await step.ainvoke(task))

    return RunnableLambda(run, afunc=arun, name=name)


def _window_turns(settings: ContextualSettings) -> Callable[..., ContextualState]:
    windows = window_node(settings.window_size)

    def window_turns(state: ContextualState, config: RunnableConfig) -> ContextualState:
        out = windows(state, config)
        return {"conversation": out["conversation"], "turn_contexts": [turn_context(w) for w in out["windows"]]}

    return window_turns


def _fan_out_extractions(settings: ContextualSettings) -> Callable[[ContextualState], list[Send] | str]:
    def fan_out(state: ContextualState) -> list[Send] | str:
        sends = []
        for turn in state.get("turn_contexts") or []:
            flat = [node for _, _, node in turn.nodes]
            if not flat:
                continue
            per_turn = settings.extract_per == "turn"
            for g in [list(range(len(flat)))] if per_turn else [[i] for i in range(len(flat))]:
                where = turn.label if per_turn else node_label(*turn.nodes[g[0]][:2])
                sends.append(Send("extract_statements", TurnTask(turn=turn, retrieval_context=flat, node_indices=g,
                                                                    where=where)))
        return sends or "reduce_score"

    return fan_out


def _group(statements: list[Statement], per: JudgePer) -> list[list[Statement]]:
    if per == "statement":
        return [[s] for s in statements]
    if per == "node":
        groups: dict[tuple[Any, int], list[Statement]] = {}
        for s in statements:
            groups.setdefault((s.turn, s.node), []).append(s)
        return list(groups.values())
    return [statements] if statements else []


def _judge_where(turn: TurnContext, group: list[Statement], per: JudgePer) -> str:
    if per == "turn" or not group:
        return turn.label
    s = group[0]
    label = node_label(s.turn, s.node)
    return f"{label} statement {s.index + 1}" if per == "statement" else label


def _extract_node(settings: ContextualSettings) -> RunnableLambda:
    def route(task: TurnTask, update: StepUpdate) -> Command:
        turn = task["turn"]
        statements = []
        for s in update["statements"]:  # node index in the flat list → (turn, index in that turn)
            t, n, _ = turn.nodes[s.node]
            statements.append(s.model_copy(update={"turn": t, "node": n, "exchange": turn.exchange}))
        tasks = [
            TurnTask(turn=turn, statements=g, user_message=turn.user_message, context=list(turn.context),
                      where=_judge_where(turn, g, settings.judge_per))
            for g in _group(statements, settings.judge_per)
        ]
        if not tasks:  # nothing extracted (a judge error): pass through, no call, so the pipeline stays in step
            tasks = [TurnTask(turn=turn, statements=[], user_message=turn.user_message, context=[], where=task["where"])]
        return Command(update={**update, "statements": statements}, goto=[Send("judge_statements", t) for t in tasks])

    return then_route(extract_statements_step(settings.judge), route, "extract_statements")


def _judge_node(settings: ContextualSettings) -> Runnable:
    step = judge_statements_step(settings.judge)
    if not settings.verify:
        return step

    def route(task: TurnTask, update: StepUpdate) -> Command:
        verify = TurnTask(turn=task["turn"], verdicts=update["verdicts"], user_message=task["user_message"],
                            context=task["context"], where=task["where"])
        return Command(update=update, goto=[Send("verify_verdict", verify)])

    return then_route(step, route, "judge_statements")


def contextual_reason(
    score: float | None, threshold: float | None, turns: list[TurnRow], verdicts: list[StatementVerdict],
    *, max_nodes: int = 8,
) -> str:
    """The deterministic reason: the score, each node with irrelevant statements (one quoted),
    the turns without context and those that could not be judged."""
    with_context = [t for t in turns if t["status"] != "no context"]
    no_context = [t["label"] for t in turns if t["status"] == "no context"]
    not_judged = [t["label"] for t in turns if t["status"] == "not judged"]
    if not turns:
        return "No assistant reply: the conversation has no user→assistant exchange."
    if not with_context:
        return "No assistant turn has retrieval context: nothing to judge."
    if score is None:
        return f"No statement could be judged ({len(not_judged)} turn(s) with context, all judge errors); see errors."
    scored = [t for t in with_context if t["status"] == "scored"]
    relevant = sum(t["relevant"] for t in scored)
    judged = sum(t["judged"] for t in scored)
    cmp = ">=" if threshold is None or score >= threshold else "<"
    parts = [
        f"{relevant} of {judged} retrieved statements relevant; mean over {len(scored)} turn(s) with retrieval"
        f" context {score:.2f} {cmp} threshold {threshold or 0.0:.2f}."
    ]
    by_node: dict[tuple[Any, ...], list[StatementVerdict]] = {}
    for v in verdicts:
        if v.verdict is not None:
            by_node.setdefault((v.exchange, tuple(v.turns), v.node), []).append(v)
    bad = []
    for (_, turns_, node), vs in by_node.items():
        if no := [v for v in vs if v.verdict == "no"]:
            src = f" ({no[0].source})" if no[0].source else ""
            label = node_label(turns_[0] if turns_ else None, node)
            bad.append(f"{label}{src}: {len(no)} of {len(vs)} irrelevant, e.g. {quote(no[0].statement)} — {no[0].reason}")
    if bad:
        more = f"; and {len(bad) - max_nodes} more node(s)" if len(bad) > max_nodes else ""
        parts.append("Irrelevant: " + "; ".join(bad[:max_nodes]) + more + ".")
    if flipped := sum(v.flipped for v in verdicts):
        parts.append(f"{flipped} statement(s) first judged irrelevant were found relevant on a second look.")
    if no_context:
        parts.append(f"No retrieval context, left out of the mean: {', '.join(no_context)}.")
    if not_judged:
        parts.append(f"Not judged (judge error), left out of the mean: {', '.join(not_judged)}.")
    if (unjudged := sum(1 for v in verdicts if v.verdict is None)) and not not_judged:
        parts.append(f"{unjudged} statement(s) not judged (judge error), left out.")
    return " ".join(parts)


def final_verdicts(state: ContextualState) -> list[StatementVerdict]:
    """Each statement's last word: a review or a second look (``verified``) over the first judgement."""
    second = {v.id: v for v in state.get("verified") or []}
    return sorted(
        (second.get(v.id, v) for v in state.get("verdicts") or []),
        key=lambda v: (v.exchange if v.exchange is not None else -1, v.turns, v.node, v.index),
    )


def _reduce_score(settings: ContextualSettings) -> Node:
    def reduce_score(state: ContextualState) -> ContextualState:
        conversation = conversation_of(state)
        verdicts = final_verdicts(state)
        calls = state.get("calls") or []
        turns: list[TurnRow] = []
        for turn in state.get("turn_contexts") or []:
            mine = [v for v in verdicts if v.exchange == turn.exchange]
            judged = [v for v in mine if v.verdict is not None]
            relevant = sum(1 for v in judged if v.verdict == "yes")
            scored = bool(turn.nodes and judged)
            turns.append({
                "exchange": turn.exchange, "turns": [t + 1 for t in turn.turns], "label": turn.label,
                "status": "scored" if scored else "not judged" if turn.nodes else "no context",
                "score": relevant / len(judged) if scored else None, "nodes": len(turn.nodes), "statements": len(mine),
                "judged": len(judged), "relevant": relevant,
            })
        scores = [s for t in turns if (s := t["score"]) is not None]  # the scored turns
        with_context = [t for t in turns if t["status"] != "no context"]
        score = sum(scores) / len(scores) if scores else None
        status: Literal["error", "not_applicable"] | None = (
            "not_applicable" if not with_context else "error" if not scores else None)
        errors = [JudgeErrorInfo(where=c.where, step=c.step, message=c.error, attempts=c.attempts)
                  for c in calls if c.error]
        by_step: dict[str, Usage] = {}
        for c in calls:
            node = c.step.rsplit("/", 1)[-1]
            by_step[node] = by_step.get(node, Usage()) + c.usage
        details: dict[str, Any] = {
            "mode": OFFLINE_MODE if settings.offline else LLM_MODE, "window_size": settings.window_size,
            "verify": settings.verify, "extract_per": settings.extract_per, "judge_per": settings.judge_per,
            "turns": turns, "turns_with_context": len(with_context), "turns_scored": len(scores),
            "statements": len(verdicts), "judged": sum(1 for v in verdicts if v.verdict is not None),
            "relevant": sum(1 for v in verdicts if v.verdict == "yes"), "flipped": sum(v.flipped for v in verdicts),
            "calls_by_step": {k: u.calls for k, u in by_step.items()},
            "usage_by_step": {k: u.model_dump() for k, u in by_step.items()}, "cached": sum(c.cached for c in calls)}
        if settings.offline:
            details["judge_rule"] = getattr(settings.judge, "statement_rule", None) or settings.judge.rule
        shown, threshold = strict(score, settings.threshold, settings.strict_mode)
        result = settings.policy(judge=settings.judge.name).conclude(
            conversation, score=score, status=status, reason=contextual_reason(shown, threshold, turns, verdicts),
            verdicts=verdicts, errors=errors, usage=Usage.total(c.usage for c in calls), details=details,
        )
        return {"results": {settings.name: with_transcript(result, state)}}

    return reduce_score


def build_turn_contextual_relevancy_graph(settings: ContextualSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    builder = StateGraph(ContextualState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("window_turns", _window_turns(settings))
    builder.add_node("extract_statements", _extract_node(settings), destinations=("judge_statements",))
    builder.add_edge(START, "window_turns")
    builder.add_conditional_edges("window_turns", _fan_out_extractions(settings), ["extract_statements", "reduce_score"])
    if settings.verify:
        builder.add_node("judge_statements", _judge_node(settings), destinations=("verify_verdict",))
        builder.add_node("verify_verdict", verify_step(settings.judge))
    else:
        builder.add_node("judge_statements", _judge_node(settings))
    scoring_edges(builder, ["verify_verdict" if settings.verify else "judge_statements"], review=settings.review,
                  metric=settings.name, read=final_verdicts, write="verified")
    builder.add_node("reduce_score", _reduce_score(settings))
    builder.add_edge("reduce_score", END)
    return builder


TURN_CONTEXTUAL_RELEVANCY = MetricSpec(
    METRIC, settings=ContextualSettings, build=build_turn_contextual_relevancy_graph,
    needs=frozenset({"retrieval_context"}),
    summary="Share of retrieved statements relevant to each turn's user message (deepeval; each node judged once)",
    prompt_values=STATEMENT_PROMPT_VALUES)
create_turn_contextual_relevancy_metric = TURN_CONTEXTUAL_RELEVANCY.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
