"""Turn contextual relevancy (deepeval's ``TurnContextualRelevancyMetric``,
done once per node): is what the chatbot retrieved for each turn relevant to
what the user asked in that turn?

    START → window_turns ─Send per turn→ extract_statements ─Send→ judge_statements
          [─Send→ verify_verdict] → reduce_score → END

* ``window_turns`` groups the conversation into exchanges and sliding windows
  (:mod:`judgegraph.windows`); each assistant exchange whose turns carry
  ``retrieval_context`` becomes one task. Exchanges with no context are kept
  aside and reported as "no context".
* ``extract_statements`` splits the retrieved nodes into statements: one LLM
  call per turn holding all its nodes (``extract_per="turn"``, the default) or
  one per node. The request holds the nodes' text only — no window, no user
  message — so the judge's cache reuses it across windows, metrics and turns.
  With the offline judge there is no call: statements are the node's sentences
  (:func:`split_sentences`).
* ``judge_statements``: is each statement relevant to the turn's user message,
  read with the window's earlier messages? One call per turn by default
  (``judge_per="turn"``; or per node, or per statement).
* ``verify_verdict`` (``verify=True``): a second look at the "no" verdicts of
  each judgement, one call per judgement that has any; it may turn a "no" into
  a "yes", and the verdict records that it did (``flipped``).
* ``reduce_score``: per turn, relevant statements / judged statements; the
  score is the mean over the turns with retrieval context that could be
  judged. Judge errors are reported and counted, never scored.

Each node of each turn is extracted and judged once, whatever the window size:
40 calls for 20 exchanges with 5 nodes each, where deepeval makes 796
(``benchmarks/contextual_calls.py``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal

from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from ..conversation import Conversation, RetrievalNode, as_conversation
from ..judges import Judge, JudgeOutcome, JudgeRequest, resolve_judge
from ..nodes import judge_step, quote, render_messages, window_node
from ..results import JudgeErrorInfo, MetricResult, Usage, Verdict, merge_results
from ..state import MetricInput, MetricOutput
from ..windows import Exchange, Window, check_window_size

METRIC = "turn_contextual_relevancy"
EXTRACT_STEP = f"{METRIC}/extract_statements"
JUDGE_STEP = f"{METRIC}/judge_statements"
VERIFY_STEP = f"{METRIC}/verify_verdict"

OFFLINE_MODE = "offline: sentences + embeddings"
LLM_MODE = "llm: extracted statements"

ExtractPer = Literal["turn", "node"]
JudgePer = Literal["turn", "node", "statement"]
_GRAIN = {"turn": 0, "node": 1, "statement": 2}


# -- sentence splitting (the offline judge's "extraction") ---------------------

_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs approx mr mrs ms dr prof st no nos fig inc ltd co corp jr sr dept est min max "
    "a.m p.m u.s u.k jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_BLOCKS = re.compile(r"\n\s*\n|\n(?=[ \t]*(?:[-*•]|\d{1,3}[.)])\s)")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")
_BOUNDARY = re.compile(r"""[.!?]+["')\]]*\s+(?=["'(\[]?[A-Z0-9])""")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, dependency-free: paragraphs and list items are
    split first, then sentences end at ``.``, ``!`` or ``?`` followed by a space
    and a capital letter or digit — except after common abbreviations ("e.g.",
    "Dr.", "p.m.") and single-letter initials. Decimals ("3.5") never split.
    Fragments without a letter or digit are dropped; whitespace is collapsed."""
    out: list[str] = []
    for block in _BLOCKS.split(text):
        block = " ".join(_BULLET.sub("", block).split())
        start = 0
        for m in _BOUNDARY.finditer(block):
            before = block[start : m.start() + 1].rstrip(".!?\"')]").split()
            last = before[-1].lower().rstrip(".") if before else ""
            if block[m.start()] == "." and (last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
                continue
            out.append(block[start : m.end()].strip())
            start = m.end()
        out.append(block[start:].strip())
    return [s for s in out if any(ch.isalnum() for ch in s)]


# -- schemas --------------------------------------------------------------------


class NodeStatements(BaseModel):
    node: int = Field(description="The node's number, as given.")
    statements: list[str] = Field(description="The node's statements, in the node's order.")

    @field_validator("statements")
    @classmethod
    def _clean(cls, value: list[str]) -> list[str]:
        return [" ".join(s.split()) for s in value if s and s.strip()]


class ExtractedStatements(BaseModel):
    """The answer of ``extract_statements``: one entry per node, numbered from 1.
    :func:`extraction_schema` makes the subclass that checks every node of a
    request is answered exactly once (a wrong answer is re-asked with the error)."""

    nodes: list[NodeStatements] = Field(description="One entry per retrieved node, in order.")
    expected_nodes: ClassVar[int | None] = None

    @model_validator(mode="after")
    def _complete(self) -> ExtractedStatements:
        _check_numbers([e.node for e in self.nodes], self.expected_nodes, "node")
        empty = [e.node for e in self.nodes if not e.statements]
        if empty:
            raise ValueError(
                f"node(s) {_join(empty)} have no statement: give every node at least one"
                " (its text as one statement if it holds nothing else)"
            )
        self.nodes = sorted(self.nodes, key=lambda e: e.node)
        return self


class StatementJudgement(BaseModel):
    statement: int = Field(description="The statement's number, as given.")
    reason: str = Field(description="One short sentence explaining the verdict.")
    verdict: Literal["yes", "no"] = Field(
        description="'yes' if the statement is relevant to the latest user message, otherwise 'no'."
    )
    # Set by the offline judge only; absent from the JSON schema an LLM is given.
    similarity: SkipJsonSchema[float | None] = None

    @field_validator("verdict", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class StatementVerdicts(BaseModel):
    """The answer of ``judge_statements`` and ``verify_verdict``: one entry per
    statement, numbered from 1 (:func:`verdicts_schema` checks the count)."""

    verdicts: list[StatementJudgement] = Field(description="One entry per statement, in order.")
    expected_statements: ClassVar[int | None] = None

    @model_validator(mode="after")
    def _complete(self) -> StatementVerdicts:
        _check_numbers([v.statement for v in self.verdicts], self.expected_statements, "statement")
        self.verdicts = sorted(self.verdicts, key=lambda v: v.statement)
        return self


def _join(numbers: Sequence[int]) -> str:
    return ", ".join(str(n) for n in numbers)


def _check_numbers(seen: list[int], expected: int | None, what: str) -> None:
    if expected is None:
        return
    missing = [n for n in range(1, expected + 1) if n not in seen]
    unknown = sorted({n for n in seen if not 1 <= n <= expected})
    repeated = sorted({n for n in seen if seen.count(n) > 1 and 1 <= n <= expected})
    problems = []
    if missing:
        problems.append(f"{what}(s) {_join(missing)} missing")
    if unknown:
        problems.append(f"there is no {what} {_join(unknown)}")
    if repeated:
        problems.append(f"{what}(s) {_join(repeated)} answered more than once")
    if problems:
        raise ValueError(f"give exactly one entry for each {what} 1 to {expected}: " + "; ".join(problems))


@lru_cache(maxsize=None)
def extraction_schema(nodes: int) -> type[ExtractedStatements]:
    """:class:`ExtractedStatements` that requires exactly ``nodes`` entries."""
    return type("ExtractedStatements", (ExtractedStatements,), {"expected_nodes": nodes, "__module__": __name__})


@lru_cache(maxsize=None)
def verdicts_schema(statements: int) -> type[StatementVerdicts]:
    """:class:`StatementVerdicts` that requires exactly ``statements`` entries."""
    return type("StatementVerdicts", (StatementVerdicts,), {"expected_statements": statements, "__module__": __name__})


# -- what flows through the graph --------------------------------------------------


class Statement(BaseModel):
    """One statement of a retrieved node, before it is judged."""

    model_config = ConfigDict(frozen=True)

    text: str
    node: int  # 0-based index of its node in the retrieval_context (of ``turn``, inside the metric)
    index: int  # 0-based position among its node's statements
    source: str | None = None
    turn: int | None = None  # 0-based conversation turn whose retrieval_context holds the node
    exchange: int | None = None


class StatementVerdict(Verdict):
    """One statement's verdict. ``verdict`` is None when the judge failed."""

    verdict: Literal["yes", "no"] | None = None
    statement: str
    node: int  # 0-based index of its node in the turn's retrieval_context
    index: int  # 0-based position among the node's statements
    source: str | None = None
    exchange: int | None = None
    verified: bool = False  # verify_verdict took a second look
    flipped: bool = False  # ... and changed the first "no" to "yes"
    first_reason: str | None = None  # the first judgement's reason, when verified

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.exchange, tuple(self.turns), self.node, self.index)


class JudgeCall(BaseModel):
    """One judge request made by a step (a cache hit has ``cached`` and no usage)."""

    step: str  # prompt step, e.g. "turn_contextual_relevancy/extract_statements"
    where: str  # e.g. "turn 4" or "turn 4 node 2"
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 0
    error: str | None = None
    cached: bool = False


@dataclass(frozen=True)
class TurnContext:
    """One assistant exchange: what was asked, what was retrieved for it, and
    the earlier messages of its window."""

    exchange: int
    turns: tuple[int, ...]  # the assistant turns (0-based)
    user_message: str
    context: tuple[tuple[str, str], ...]  # (role, content) of the window's earlier messages
    nodes: tuple[tuple[int, int, RetrievalNode], ...]  # (turn, index in that turn's retrieval_context, node)

    @property
    def label(self) -> str:
        turns = ", ".join(str(t + 1) for t in self.turns)
        return f"turn {turns}" if len(self.turns) == 1 else f"turns {turns}"


def turn_context(window: Window) -> TurnContext:
    target = window.target
    context: list[tuple[str, str]] = []
    for ex in window.context:  # earlier exchanges: user and assistant messages (tool output left out)
        for it in sorted((*ex.user, *ex.assistant), key=lambda t: t.index):
            context.append((it.turn.role, it.turn.content))
    nodes = tuple((it.index, n, node) for it in target.assistant for n, node in enumerate(it.turn.retrieval_context))
    return TurnContext(target.index, target.reply_turn_indices, target.user_text, tuple(context), nodes)


def node_label(turn: int | None, node: int) -> str:
    return f"node {node + 1}" if turn is None else f"turn {turn + 1} node {node + 1}"


# -- requests (public: build your own nodes from them) -----------------------------


def _node_texts(value: Any) -> list[RetrievalNode]:
    out = []
    for v in value or []:
        if isinstance(v, RetrievalNode):
            out.append(v)
        elif isinstance(v, str):
            out.append(RetrievalNode(context=v))
        else:
            out.append(RetrievalNode.model_validate(v))
    return out


def extraction_request(nodes: Sequence[str]) -> JudgeRequest:
    """Extract the statements of ``nodes`` (texts) in one request. It holds the
    texts only, so identical node lists share one cached judgement."""
    rendered = "\n\n".join(f"[node {i}]\n{text}" for i, text in enumerate(nodes, 1))
    return JudgeRequest(
        task="extract_statements",
        step=EXTRACT_STEP,
        schema=extraction_schema(len(nodes)),
        values={"nodes": rendered},
        inputs={"nodes": list(nodes)},
    )


def _context_values(context: Sequence[tuple[str, str]]) -> tuple[str, list[str]]:
    pairs = [(r, c) for r, c in context]
    return render_messages(pairs, empty="(none: this is the first exchange)"), [f"{r}: {c}" for r, c in pairs]


def judgement_request(
    statements: Sequence[str], user_message: str, context: Sequence[tuple[str, str]] = ()
) -> JudgeRequest:
    """Judge ``statements`` against ``user_message``, with the window's earlier
    messages as ``(role, content)`` pairs. Task ``statement_relevance`` (the
    offline judge answers it too)."""
    rendered_context, context_inputs = _context_values(context)
    return JudgeRequest(
        task="statement_relevance",
        step=JUDGE_STEP,
        schema=verdicts_schema(len(statements)),
        values={
            "context": rendered_context,
            "user_message": user_message or "(none: the assistant spoke first)",
            "statements": "\n".join(f"{i}. {' '.join(s.split())}" for i, s in enumerate(statements, 1)),
        },
        inputs={"statements": list(statements), "user_message": user_message, "context": context_inputs},
    )


def verification_request(
    statements: Sequence[tuple[str, str]], user_message: str, context: Sequence[tuple[str, str]] = ()
) -> JudgeRequest:
    """A second look at statements judged irrelevant: ``(statement, first reason)`` pairs."""
    rendered_context, context_inputs = _context_values(context)
    return JudgeRequest(
        task="statement_relevance_check",
        step=VERIFY_STEP,
        schema=verdicts_schema(len(statements)),
        values={
            "context": rendered_context,
            "user_message": user_message or "(none: the assistant spoke first)",
            "statements": "\n".join(
                f"{i}. {' '.join(s.split())}\n   First reviewer: {' '.join(r.split())}"
                for i, (s, r) in enumerate(statements, 1)
            ),
        },
        inputs={"statements": [s for s, _ in statements], "user_message": user_message, "context": context_inputs},
    )


# -- steps (public nodes) ----------------------------------------------------------


def _call(step: str, state: dict[str, Any], outcome: JudgeOutcome) -> JudgeCall:
    return JudgeCall(
        step=step, where=state.get("where", ""), usage=outcome.usage, attempts=outcome.attempts,
        error=None if outcome.ok else (outcome.error or "no answer"), cached=outcome.cached,
    )


def _unless_empty(step: Runnable, is_empty: Callable[[Any], bool], empty: dict[str, Any], name: str) -> RunnableLambda:
    """``step``, except that an input with nothing to do returns ``empty`` with no judge call."""

    def run(state: Any) -> dict[str, Any]:
        return dict(empty) if is_empty(state) else step.invoke(state)

    async def arun(state: Any) -> dict[str, Any]:
        return dict(empty) if is_empty(state) else await step.ainvoke(state)

    return RunnableLambda(run, afunc=arun, name=name)


def _selected(state: dict[str, Any]) -> tuple[list[RetrievalNode], list[int]]:
    nodes = _node_texts(state.get("retrieval_context"))
    indices = state.get("node_indices")
    return nodes, list(range(len(nodes))) if indices is None else list(indices)


def extract_statements_step(judge: Judge, *, name: str = "extract_statements") -> RunnableLambda:
    """A node that splits retrieved nodes into statements.

    Reads ``retrieval_context`` (a list of :class:`RetrievalNode`, dicts or
    strings), optionally ``node_indices`` (which of them; default all) and
    ``where`` (a label for errors). Writes ``statements`` (a list of
    :class:`Statement`, ``node`` being the index in ``retrieval_context``) and
    ``calls`` (a list of :class:`JudgeCall`). An LLM judge makes one request
    for all the selected nodes; the offline judge makes none: statements are
    the nodes' sentences (:func:`split_sentences`). Give ``statements`` and
    ``calls`` an ``operator.add`` reducer when the node runs in a fan-out."""
    empty: dict[str, Any] = {"statements": [], "calls": []}

    if judge.kind == "offline":

        def split(state: dict[str, Any]) -> dict[str, Any]:
            nodes, indices = _selected(state)
            statements = [
                Statement(text=text, node=i, index=k, source=nodes[i].source)
                for i in indices
                for k, text in enumerate(split_sentences(nodes[i].context) or [" ".join(nodes[i].context.split())])
            ]
            return {"statements": statements, "calls": []}

        return RunnableLambda(split, name=name)

    def build(state: dict[str, Any]) -> JudgeRequest:
        nodes, indices = _selected(state)
        return extraction_request([nodes[i].context for i in indices])

    def finish(state: dict[str, Any], outcome: JudgeOutcome) -> dict[str, Any]:
        call = _call(EXTRACT_STEP, state, outcome)
        if not outcome.ok:
            return {"statements": [], "calls": [call]}
        nodes, indices = _selected(state)
        statements = [
            Statement(text=text, node=indices[entry.node - 1], index=k, source=nodes[indices[entry.node - 1]].source)
            for entry in outcome.value.nodes  # type: ignore[union-attr]
            for k, text in enumerate(entry.statements)
        ]
        return {"statements": statements, "calls": [call]}

    return _unless_empty(judge_step(name, judge, build, finish), lambda s: not _selected(s)[1], empty, name)


def _statements(state: dict[str, Any]) -> list[Statement]:
    return [s if isinstance(s, Statement) else Statement(text=str(s), node=0, index=i)
            for i, s in enumerate(state.get("statements") or [])]


def judge_statements_step(judge: Judge, *, name: str = "judge_statements") -> RunnableLambda:
    """A node that judges statements against a user message in one request.

    Reads ``statements`` (:class:`Statement` or strings), ``user_message``,
    optionally ``context`` (the earlier messages as ``(role, content)`` pairs)
    and ``where``. Writes ``verdicts`` (one :class:`StatementVerdict` per
    statement; ``verdict`` None and ``error`` set when the judge failed) and
    ``calls``. Works with the offline judge (embedding similarity)."""

    def build(state: dict[str, Any]) -> JudgeRequest:
        return judgement_request([s.text for s in _statements(state)], state.get("user_message", ""),
                                 state.get("context") or ())

    def finish(state: dict[str, Any], outcome: JudgeOutcome) -> dict[str, Any]:
        call = _call(JUDGE_STEP, state, outcome)
        answers = outcome.value.verdicts if outcome.ok else None  # type: ignore[union-attr]
        verdicts = []
        for i, s in enumerate(_statements(state)):
            a = answers[i] if answers is not None else None
            verdicts.append(StatementVerdict(
                turns=[] if s.turn is None else [s.turn], exchange=s.exchange, node=s.node, index=s.index,
                statement=s.text, source=s.source,
                verdict=a.verdict if a else None, reason=a.reason if a else "",
                score=a.similarity if a else None,
                error=None if a else call.error, attempts=outcome.attempts,
            ))
        return {"verdicts": verdicts, "calls": [call]}

    empty: dict[str, Any] = {"verdicts": [], "calls": []}
    return _unless_empty(judge_step(name, judge, build, finish), lambda s: not s.get("statements"), empty, name)


def verify_step(judge: Judge, *, name: str = "verify_verdict") -> RunnableLambda:
    """A node that takes a second look at the "no" verdicts it is given.

    Reads ``verdicts`` (:class:`StatementVerdict`; only those with verdict
    "no" are looked at, in one request), ``user_message``, optionally
    ``context`` and ``where``. Writes ``verified``: the looked-at verdicts with
    the second judgement (``verified=True``, ``first_reason`` kept, ``flipped``
    when "no" became "yes"), and ``calls``. When the second look fails, the
    first verdicts stand (``verified`` is empty) and the call records the error."""

    def looked_at(state: dict[str, Any]) -> list[StatementVerdict]:
        return [v for v in state.get("verdicts") or [] if v.verdict == "no"]

    def build(state: dict[str, Any]) -> JudgeRequest:
        return verification_request([(v.statement, v.reason) for v in looked_at(state)],
                                    state.get("user_message", ""), state.get("context") or ())

    def finish(state: dict[str, Any], outcome: JudgeOutcome) -> dict[str, Any]:
        call = _call(VERIFY_STEP, state, outcome)
        if not outcome.ok:
            return {"verified": [], "calls": [call]}
        verified = [
            v.model_copy(update={
                "verified": True, "first_reason": v.reason, "reason": a.reason, "verdict": a.verdict,
                "flipped": a.verdict != v.verdict,
            })
            for v, a in zip(looked_at(state), outcome.value.verdicts)  # type: ignore[union-attr]
        ]
        return {"verified": verified, "calls": [call]}

    empty: dict[str, Any] = {"verified": [], "calls": []}
    return _unless_empty(judge_step(name, judge, build, finish), lambda s: not looked_at(s), empty, name)


# -- the metric graph --------------------------------------------------------------


class ContextualState(TypedDict, total=False):
    conversation: Conversation | dict[str, Any]
    exchanges: list[Exchange]
    turn_contexts: list[TurnContext]
    statements: Annotated[list[Statement], operator.add]
    verdicts: Annotated[list[StatementVerdict], operator.add]
    verified: Annotated[list[StatementVerdict], operator.add]
    calls: Annotated[list[JudgeCall], operator.add]
    results: Annotated[dict[str, MetricResult], merge_results]


class ExtractTask(TypedDict):
    turn: TurnContext
    retrieval_context: list[RetrievalNode]  # every node of the turn (flat over its assistant turns)
    node_indices: list[int]  # the ones this task extracts
    where: str


class JudgeTask(TypedDict):
    turn: TurnContext
    statements: list[Statement]
    user_message: str
    context: list[tuple[str, str]]
    where: str


class VerifyTask(TypedDict):
    turn: TurnContext
    verdicts: list[StatementVerdict]
    user_message: str
    context: list[tuple[str, str]]
    where: str


@dataclass(frozen=True)
class ContextualSettings:
    name: str
    judge: Judge
    window_size: int = 10
    threshold: float = 0.5
    strict_mode: bool = False
    verify: bool = False
    extract_per: ExtractPer = "turn"  # one extraction request per turn (all its nodes) or per node
    judge_per: JudgePer = "turn"  # one judgement request per turn, per node or per statement

    @property
    def effective_threshold(self) -> float:
        return 1.0 if self.strict_mode else self.threshold

    @property
    def offline(self) -> bool:
        return self.judge.kind == "offline"


def _then(step: Runnable, route: Callable[[Any, dict[str, Any]], Any], name: str) -> RunnableLambda:
    """``step``, then ``route(task, update)`` (a state update or a Command)."""

    def run(task: Any) -> Any:
        return route(task, step.invoke(task))

    async def arun(task: Any) -> Any:
        return route(task, await step.ainvoke(task))

    return RunnableLambda(run, afunc=arun, name=name)


def _window_turns(settings: ContextualSettings):
    windows = window_node(settings.window_size)

    def window_turns(state: ContextualState) -> dict[str, Any]:
        out = windows(state)
        return {"conversation": out["conversation"], "turn_contexts": [turn_context(w) for w in out["windows"]]}

    return window_turns


def _fan_out_extractions(settings: ContextualSettings):
    def fan_out(state: ContextualState) -> list[Send] | str:
        sends = []
        for turn in state.get("turn_contexts") or []:
            flat = [node for _, _, node in turn.nodes]
            if not flat:
                continue
            if settings.extract_per == "turn":
                groups = [list(range(len(flat)))]
            else:
                groups = [[i] for i in range(len(flat))]
            for g in groups:
                where = turn.label if len(g) == len(flat) and settings.extract_per == "turn" else node_label(*turn.nodes[g[0]][:2])
                sends.append(Send("extract_statements", ExtractTask(turn=turn, retrieval_context=flat, node_indices=g, where=where)))
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
    def route(task: ExtractTask, update: dict[str, Any]) -> Command:
        turn = task["turn"]
        statements = []
        for s in update["statements"]:  # node index in the flat list → (turn, index in that turn)
            t, n, _ = turn.nodes[s.node]
            statements.append(s.model_copy(update={"turn": t, "node": n, "exchange": turn.exchange}))
        tasks = [
            JudgeTask(turn=turn, statements=g, user_message=turn.user_message, context=list(turn.context),
                      where=_judge_where(turn, g, settings.judge_per))
            for g in _group(statements, settings.judge_per)
        ]
        if not tasks:  # nothing extracted (a judge error): pass through, no call, so the pipeline stays in step
            tasks = [JudgeTask(turn=turn, statements=[], user_message=turn.user_message, context=[], where=task["where"])]
        return Command(update={**update, "statements": statements}, goto=[Send("judge_statements", t) for t in tasks])

    return _then(extract_statements_step(settings.judge), route, "extract_statements")


def _judge_node(settings: ContextualSettings) -> Runnable:
    step = judge_statements_step(settings.judge)
    if not settings.verify:
        return step

    def route(task: JudgeTask, update: dict[str, Any]) -> Command:
        verify = VerifyTask(turn=task["turn"], verdicts=update["verdicts"], user_message=task["user_message"],
                            context=task["context"], where=task["where"])
        return Command(update=update, goto=[Send("verify_verdict", verify)])

    return _then(step, route, "judge_statements")


def _label_list(labels: list[str]) -> str:
    return ", ".join(labels)


def contextual_reason(
    score: float | None, threshold: float, turns: list[dict[str, Any]], verdicts: list[StatementVerdict],
    *, max_nodes: int = 8,
) -> str:
    """The deterministic reason: the score, then each node with irrelevant
    statements (turn, node, source, how many, one quoted with its reason), the
    turns without context and the turns that could not be judged."""
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
    cmp = ">=" if score >= threshold else "<"
    parts = [
        f"{relevant} of {judged} retrieved statements relevant; mean over {len(scored)} turn(s) with retrieval"
        f" context {score:.2f} {cmp} threshold {threshold:.2f}."
    ]
    by_node: dict[tuple[Any, ...], list[StatementVerdict]] = {}
    for v in verdicts:
        if v.verdict is not None:
            by_node.setdefault((v.exchange, tuple(v.turns), v.node), []).append(v)
    bad = []
    for (_, turns_, node), vs in by_node.items():
        no = [v for v in vs if v.verdict == "no"]
        if no:
            label = node_label(turns_[0] if turns_ else None, node)
            src = f" ({no[0].source})" if no[0].source else ""
            bad.append(f"{label}{src}: {len(no)} of {len(vs)} irrelevant, e.g. {quote(no[0].statement)} — {no[0].reason}")
    if bad:
        more = f"; and {len(bad) - max_nodes} more node(s)" if len(bad) > max_nodes else ""
        parts.append("Irrelevant: " + "; ".join(bad[:max_nodes]) + more + ".")
    flipped = sum(v.flipped for v in verdicts)
    if flipped:
        parts.append(f"{flipped} statement(s) first judged irrelevant were found relevant on a second look.")
    if no_context:
        parts.append(f"No retrieval context, left out of the mean: {_label_list(no_context)}.")
    if not_judged:
        parts.append(f"Not judged (judge error), left out of the mean: {_label_list(not_judged)}.")
    unjudged = sum(1 for v in verdicts if v.verdict is None)
    if unjudged and not not_judged:
        parts.append(f"{unjudged} statement(s) not judged (judge error), left out.")
    return " ".join(parts)


def _reduce_score(settings: ContextualSettings):
    def reduce_score(state: ContextualState) -> dict[str, Any]:
        conversation = as_conversation(state["conversation"])
        second = {v.key: v for v in state.get("verified") or []}
        verdicts = sorted(
            (second.get(v.key, v) for v in state.get("verdicts") or []),
            key=lambda v: (v.exchange if v.exchange is not None else -1, v.turns, v.node, v.index),
        )
        calls = state.get("calls") or []
        turns: list[dict[str, Any]] = []
        for turn in state.get("turn_contexts") or []:
            mine = [v for v in verdicts if v.exchange == turn.exchange]
            judged = [v for v in mine if v.verdict is not None]
            relevant = sum(1 for v in judged if v.verdict == "yes")
            if not turn.nodes:
                status, turn_score = "no context", None
            elif judged:
                status, turn_score = "scored", relevant / len(judged)
            else:
                status, turn_score = "not judged", None
            turns.append({
                "exchange": turn.exchange, "turns": [t + 1 for t in turn.turns], "label": turn.label,
                "status": status, "score": turn_score, "nodes": len(turn.nodes), "statements": len(mine),
                "judged": len(judged), "relevant": relevant,
            })
        scores = [t["score"] for t in turns if t["status"] == "scored"]
        with_context = [t for t in turns if t["status"] != "no context"]
        threshold = settings.effective_threshold
        score: float | None = None
        if not with_context:
            status, passed = "not_applicable", None
        elif not scores:
            status, passed = "error", None
        else:
            score = sum(scores) / len(scores)
            if settings.strict_mode:
                score = 1.0 if score == 1.0 else 0.0
            passed = score >= threshold
            status = "passed" if passed else "failed"
        errors = [
            JudgeErrorInfo(where=c.where, step=c.step, message=c.error, attempts=c.attempts) for c in calls if c.error
        ]
        by_step: dict[str, Usage] = {}
        for c in calls:
            node = c.step.rsplit("/", 1)[-1]
            by_step[node] = by_step.get(node, Usage()) + c.usage
        details: dict[str, Any] = {
            "mode": OFFLINE_MODE if settings.offline else LLM_MODE,
            "window_size": settings.window_size,
            "verify": settings.verify,
            "extract_per": settings.extract_per,
            "judge_per": settings.judge_per,
            "turns": turns,
            "turns_with_context": len(with_context),
            "turns_scored": len(scores),
            "statements": len(verdicts),
            "judged": sum(1 for v in verdicts if v.verdict is not None),
            "relevant": sum(1 for v in verdicts if v.verdict == "yes"),
            "flipped": sum(1 for v in verdicts if v.flipped),
            "calls_by_step": {k: u.calls for k, u in by_step.items()},
            "usage_by_step": {k: u.model_dump() for k, u in by_step.items()},
            "cached": sum(1 for c in calls if c.cached),
        }
        if settings.offline:
            details["judge_rule"] = getattr(settings.judge, "statement_rule", None) or settings.judge.rule
        result = MetricResult(
            key=settings.name,
            conversation_id=conversation.id,
            score=score,
            threshold=threshold,
            passed=passed,
            status=status,
            reason=contextual_reason(score, threshold, turns, verdicts),
            judge=settings.judge.name,
            strict_mode=settings.strict_mode,
            verdicts=verdicts,
            errors=errors,
            usage=Usage.total(c.usage for c in calls),
            details=details,
        )
        return {"results": {settings.name: result}}

    return reduce_score


def build_turn_contextual_relevancy_graph(settings: ContextualSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    check_window_size(settings.window_size)
    if not 0.0 <= settings.threshold <= 1.0:
        raise ValueError(f"threshold must be between 0 and 1, got {settings.threshold}")
    if settings.extract_per not in ("turn", "node") or settings.judge_per not in _GRAIN:
        raise ValueError(f"extract_per must be 'turn' or 'node' and judge_per 'turn', 'node' or 'statement',"
                         f" got {settings.extract_per!r} and {settings.judge_per!r}")
    if _GRAIN[settings.judge_per] < _GRAIN[settings.extract_per]:
        raise ValueError(f"judge_per={settings.judge_per!r} needs extract_per='turn': a judgement can only use"
                         " statements of one extraction")
    if settings.verify and settings.offline:
        raise ValueError("verify=True needs an LLM judge (pass model=...)")
    builder = StateGraph(ContextualState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("window_turns", _window_turns(settings))
    builder.add_node("extract_statements", _extract_node(settings), destinations=("judge_statements",))
    builder.add_edge(START, "window_turns")
    builder.add_conditional_edges("window_turns", _fan_out_extractions(settings), ["extract_statements", "reduce_score"])
    if settings.verify:
        builder.add_node("judge_statements", _judge_node(settings), destinations=("verify_verdict",))
        builder.add_node("verify_verdict", verify_step(settings.judge))
        builder.add_edge("verify_verdict", "reduce_score")
    else:
        builder.add_node("judge_statements", _judge_node(settings))
        builder.add_edge("judge_statements", "reduce_score")
    builder.add_node("reduce_score", _reduce_score(settings))
    builder.add_edge("reduce_score", END)
    return builder


def create_turn_contextual_relevancy_judge(
    *,
    model: Any = None,
    judge: Judge | None = None,
    window_size: int = 10,
    threshold: float = 0.5,
    strict_mode: bool = False,
    verify: bool = False,
    max_concurrency: int = 16,
    max_tries: int = 3,
    name: str = METRIC,
    **model_kwargs: Any,
) -> CompiledStateGraph:
    """Turn contextual relevancy: the share of retrieved statements relevant to
    each turn's user message, averaged over the turns with retrieval context.

    ``model``: a LangChain chat model or a string like ``openai:gpt-4.1-mini``;
    leave it out for the offline judge (sentences + embeddings). ``judge``: a
    ready judge shared with other metrics (one concurrency limit, one cache).
    ``window_size`` (exchanges) sets how many earlier messages the judge reads;
    ``verify`` adds a second look at every "irrelevant" verdict (LLM only)."""
    settings = ContextualSettings(
        name=name,
        judge=resolve_judge(model=model, judge=judge, max_concurrency=max_concurrency, max_tries=max_tries, **model_kwargs),
        window_size=window_size,
        threshold=threshold,
        strict_mode=strict_mode,
        verify=verify,
    )
    return build_turn_contextual_relevancy_graph(settings).compile(name=name)


def _specs():
    from . import MetricSpec

    return [
        MetricSpec(
            METRIC, create_turn_contextual_relevancy_judge,
            "Share of retrieved statements relevant to each turn's user message (deepeval; each node judged once)",
            frozenset({"window_size", "threshold", "strict_mode", "verify"}),
        )
    ]


METRIC_SPECS = _specs()

#: The values each node passes to its prompt file (checked by tests/unit/test_prompts.py).
PROMPT_VALUES = {
    EXTRACT_STEP: {"nodes"},
    JUDGE_STEP: {"context", "user_message", "statements"},
    VERIFY_STEP: {"context", "user_message", "statements"},
}

__all__ = [
    "ContextualSettings",
    "ContextualState",
    "ExtractedStatements",
    "JudgeCall",
    "NodeStatements",
    "Statement",
    "StatementJudgement",
    "StatementVerdict",
    "StatementVerdicts",
    "TurnContext",
    "build_turn_contextual_relevancy_graph",
    "contextual_reason",
    "create_turn_contextual_relevancy_judge",
    "extract_statements_step",
    "extraction_request",
    "extraction_schema",
    "judge_statements_step",
    "judgement_request",
    "split_sentences",
    "turn_context",
    "verdicts_schema",
    "verification_request",
    "verify_step",
]
