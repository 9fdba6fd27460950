"""Turn faithfulness (after deepeval's ``TurnFaithfulnessMetric``; docs/agent_safety.md): are each
reply's claims supported by the retrieval context and tool results the chatbot had up to that turn
(in the reply's window of ``window_size`` exchanges, 10 by default as deepeval's)?

    START → window_turns ─Send per reply with sources→ extract_claims ─Send→ judge_claims
          → reduce_score → END

A claim is "yes" (supported), "no" (contradicted) or "idk" (neither); a reply's score is the share of its claims
not contradicted ("idk" unfaithful with ``penalize_ambiguous_claims``), the score their mean over replies with sources.
"""

from __future__ import annotations

__all__ = [
    "ClaimVerdict",
    "ClaimVerdicts",
    "FaithfulnessSettings",
    "ReplySources",
    "Source",
    "build_turn_faithfulness_graph",
    "claims_request",
    "create_turn_faithfulness_metric",
    "reply_scores",
    "sources_of",
]

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from langchain_core.runnables import Runnable, RunnableBranch, RunnableConfig, RunnableLambda
from langgraph.graph import StateGraph
from langgraph.types import Command, Send
from pydantic import BaseModel, BeforeValidator, Field
from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ..core.nodes import Node, calls_usage, judge_step, quote, score_node, turn_label, window_graph, window_node
from ..core.scoring import Tally, WindowOptions, check_flag, clause, option
from ..core.state import MetricState
from ..core.statements import PROMPT_VALUES as STATEMENT_PROMPT_VALUES
from ..core.statements import NumberedVerdicts, Statement, StepUpdate, extract_statements_step, numbered
from ..data.answers import read_choice
from ..data.conversation import Conversation
from ..data.results import MetricResult, Verdict, merge_verdicts
from ..data.windows import Window
from ..judges import JudgeOutcome, JudgeRequest
from . import MetricSpec
from ._renamed import renamed
from .contextual import then_route

METRIC = "turn_faithfulness"
JUDGE_STEP = "turn_faithfulness/judge_claims"
TASK = "claim_support"

ClaimLabel = Annotated[Literal["yes", "no", "idk"], BeforeValidator(read_choice(("yes", "no", "idk")))]


class ClaimJudgement(BaseModel):
    claim: int = Field(description="The claim's number, as given.")
    reason: str = Field(description="One short sentence explaining the verdict.")
    verdict: ClaimLabel = Field(description="'yes' supported by the sources, 'no' contradicted, 'idk' neither.")


class ClaimVerdicts(NumberedVerdicts):
    """The answer of ``judge_claims``: one entry per claim, numbered from 1 (:func:`claims_request` sets the count)."""

    numbered_by: ClassVar[str] = "claim"
    verdicts: list[ClaimJudgement] = Field(description="One entry per claim, in order.")


class ClaimVerdict(Verdict):
    """One claim of one reply: "yes" supported, "no" contradicted, "idk" neither; None when the judge failed."""

    id_fields: ClassVar[tuple[str, ...]] = ("exchange", "index")
    exchange: int
    index: int  # position among the reply's claims
    claim: str = ""
    verdict: Literal["yes", "no", "idk"] | None = None


@dataclass(frozen=True)
class Source:
    """One text the chatbot had before it replied: a retrieved node or a tool result."""

    kind: str  # "retrieved" or "tool result" (with the tool's name when known)
    turn: int  # 0-based turn holding it
    text: str


@dataclass(frozen=True)
class ReplySources:
    """One exchange's reply and every source available up to it."""

    exchange: int
    turns: tuple[int, ...]  # the reply's assistant turns (0-based)
    reply: str
    sources: tuple[Source, ...]

    @property
    def label(self) -> str:
        return turn_label(self.turns)


def sources_of(window: Window) -> tuple[Source, ...]:
    """The retrieval context and tool results of the window's turns up to its target's last reply
    (a text given twice once): what the chatbot had when it wrote that reply."""
    last = max(window.target.reply_turn_indices, default=-1)
    found: dict[str, Source] = {}  # by text: the first turn holding it
    for it in sorted((it for ex in window.exchanges for it in ex.turns if it.index <= last), key=lambda t: t.index):
        turn = it.turn
        texts = [("retrieved", node.context) for node in turn.retrieval_context]
        texts += [(f"tool result ({c.name})", c.output if isinstance(c.output, str)
                   else json.dumps(c.output, default=str)) for c in turn.tool_calls if c.output is not None]
        if turn.role == "tool":
            name = turn.metadata.get("name")
            texts.append((f"tool result ({name})" if isinstance(name, str) and name else "tool result", turn.content))
        for kind, text in texts:
            if text.strip():
                found.setdefault(text.strip(), Source(kind, it.index, text.strip()))
    return tuple(found.values())


class FaithfulnessState(MetricState, total=False):
    replies: list[ReplySources]
    verdicts: Annotated[list[ClaimVerdict], merge_verdicts]


class ExtractTask(TypedDict):
    reply: ReplySources
    retrieval_context: list[str]  # the reply's text: what the statement extraction splits
    where: str


class JudgeTask(TypedDict):
    reply: ReplySources
    statements: list[Statement]
    where: str


@dataclass(frozen=True, kw_only=True)
class FaithfulnessSettings(WindowOptions):
    """The shared options and deepeval's ``penalize_ambiguous_claims`` ("idk" counts as unfaithful)."""

    penalize_ambiguous_claims: bool = option(False, help="count the judge's 'idk' as unfaithful (deepeval)")

    def check(self) -> None:
        super().check()
        check_flag(self.penalize_ambiguous_claims, "penalize_ambiguous_claims")

    @property
    def faithful(self) -> frozenset[str]:
        return frozenset({"yes"} if self.penalize_ambiguous_claims else {"yes", "idk"})


def claims_request(claims: Sequence[str], sources: Sequence[Source]) -> JudgeRequest:
    """Judge ``claims`` against ``sources`` (texts only: the same claims and sources share one cached judgement)."""
    rendered = "\n\n".join(f"[source {i}] {s.kind}, turn {s.turn + 1}\n{s.text}" for i, s in enumerate(sources, 1))
    listed = [" ".join(c.split()) for c in claims]
    return JudgeRequest(
        task=TASK, step=JUDGE_STEP, schema=numbered(ClaimVerdicts, len(listed)),  # exactly one verdict per claim
        values={"sources": rendered, "claims": "\n".join(f"{i}. {c}" for i, c in enumerate(listed, 1))},
        inputs={"claims": list(claims), "sources": [s.text for s in sources]},
    )


def _window_turns(settings: FaithfulnessSettings) -> Callable[..., FaithfulnessState]:
    windows = window_node(settings.window_size)  # the scope (all, or the latest) is the window node's

    def window_turns(state: FaithfulnessState, config: RunnableConfig) -> FaithfulnessState:
        out = windows(state, config)
        replies = [ReplySources(w.index, w.target.reply_turn_indices, w.target.reply_text, sources_of(w))
                   for w in out["windows"] if w.target.reply_turn_indices]
        return {"conversation": out["conversation"], "replies": replies}

    return window_turns


def _fan_out(state: FaithfulnessState) -> list[Send] | str:
    sends = [Send("extract_claims", ExtractTask(reply=r, retrieval_context=[r.reply], where=r.label))
             for r in state.get("replies") or [] if r.sources and r.reply.strip()]
    return sends or "reduce_score"


def _extract_claims(settings: FaithfulnessSettings) -> RunnableLambda:
    step = extract_statements_step(settings.judge, name="extract_claims")

    def route(task: ExtractTask, update: StepUpdate) -> Command:
        reply = task["reply"]
        failed = [c for c in update.get("calls") or [] if c.error]
        kept: FaithfulnessState = {"judge_calls": update.get("judge_calls") or []}
        if failed:  # the extraction failed: one verdict says so, never counted
            kept["verdicts"] = [ClaimVerdict(exchange=reply.exchange, index=0, turns=list(reply.turns),
                                             error=failed[0].error, attempts=failed[0].attempts)]
        judge = JudgeTask(reply=reply, statements=list(update.get("statements") or []), where=task["where"])
        return Command(update=kept, goto=[Send("judge_claims", judge)])

    return then_route(step, route, "extract_claims")


def _judge_claims(settings: FaithfulnessSettings) -> Runnable:
    def build(task: JudgeTask) -> JudgeRequest:
        return claims_request([s.text for s in task["statements"]], task["reply"].sources)

    def finish(task: JudgeTask, outcome: JudgeOutcome) -> FaithfulnessState:
        reply, statements = task["reply"], task["statements"]
        answers = outcome.value.verdicts if outcome.ok else [None] * len(statements)  # type: ignore[union-attr]
        error = None if outcome.ok else (outcome.error or "no verdict")
        return {"verdicts": [ClaimVerdict(
            exchange=reply.exchange, index=i, turns=list(reply.turns), claim=s.text, verdict=a.verdict if a else None,
            reason=a.reason if a else "", error=error, attempts=outcome.attempts)
            for i, (s, a) in enumerate(zip(statements, answers))]}

    step = judge_step("judge_claims", settings.judge, build, finish)
    return RunnableBranch((lambda task: not task.get("statements"), lambda _: {}), step).with_config(
        run_name="judge_claims")


def reply_scores(verdicts: Sequence[ClaimVerdict], faithful: frozenset[str]) -> dict[int, float]:
    """Each reply's score (by exchange): the share of its judged claims counted faithful."""
    by_reply: dict[int, list[ClaimVerdict]] = {}
    for v in verdicts:
        if v.verdict is not None:
            by_reply.setdefault(v.exchange, []).append(v)
    return {ex: sum(v.verdict in faithful for v in vs) / len(vs) for ex, vs in by_reply.items()}


def faithfulness_reason(replies: Sequence[ReplySources], penalize: bool) -> Callable[[Tally], str]:
    """The deterministic reason: the mean, each unfaithful claim with its turn, the replies left out."""

    def write(t: Tally) -> str:
        if not replies:
            return "No assistant reply to judge: the conversation has no user→assistant exchange."
        no_sources = [r.label for r in replies if not r.sources]
        if len(no_sources) == len(replies):
            return "No reply had retrieval context or tool results before it: nothing to check claims against."
        if not t.judged:
            return f"No claim could be judged: {len(t.errors)} judge error(s); see errors."
        scored = {v.exchange for v in t.judged}
        parts = [f"Mean over {len(scored)} reply(ies) of the share of claims supported or not contradicted"
                 f"{' (idk counted unfaithful)' if penalize else ''}{t.gate}."]
        if t.bad:
            listed = "; ".join(f"{turn_label(v.turns)} {quote(v.claim)} ({v.verdict}): {clause(v.reason)}"
                               for v in t.bad[:8])
            more = f"; and {len(t.bad) - 8} more" if len(t.bad) > 8 else ""
            parts.append(f"Unfaithful: {listed}{more}.")
        if no_sources:
            parts.append(f"No sources yet, left out of the mean: {', '.join(no_sources)}.")
        if t.errors:
            parts.append(f"{len(t.errors)} claim(s) or extraction(s) not judged (judge error), left out.")
        return " ".join(parts)

    return write


def _reduce_score(settings: FaithfulnessSettings) -> Node:
    faithful = settings.faithful

    def mean(judged: list[ClaimVerdict]) -> float | None:
        scores = reply_scores(judged, faithful)
        return sum(scores.values()) / len(scores) if scores else None

    def score(state: FaithfulnessState, conversation: Conversation, verdicts: list[ClaimVerdict]) -> MetricResult:
        replies = state.get("replies") or []
        policy = settings.policy(step=JUDGE_STEP, positive=faithful, score=mean,
                                 reason=faithfulness_reason(replies, settings.penalize_ambiguous_claims),
                                 where=lambda v: f"{turn_label(v.turns)} claim {v.index + 1}")
        t = policy.tally(verdicts)
        scores = reply_scores(t.judged, faithful)
        turns = [{"exchange": r.exchange, "turns": [n + 1 for n in r.turns], "sources": len(r.sources),
                  "claims": sum(1 for v in verdicts if v.exchange == r.exchange and v.claim),
                  "score": scores.get(r.exchange),
                  "status": "no sources" if not r.sources else "scored" if r.exchange in scores else "not judged"}
                 for r in replies]
        details = {"penalize_ambiguous_claims": settings.penalize_ambiguous_claims, "window_size": settings.window_size,
                   "turns": turns, "claims": len(verdicts), "judged": len(t.judged),
                   **{k: sum(v.verdict == label for v in t.judged)
                      for k, label in (("supported", "yes"), ("contradicted", "no"), ("ambiguous", "idk"))}}
        return policy.result(conversation, t, usage=calls_usage(state), details=details)

    return score_node(settings.name, score, order=lambda v: (v.exchange, v.index))


def build_turn_faithfulness_graph(settings: FaithfulnessSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    return window_graph(settings, FaithfulnessState, [("extract_claims", _extract_claims(settings)),
                                                      ("judge_claims", _judge_claims(settings))],
                        _reduce_score(settings), windows=_window_turns(settings), route=_fan_out)


TURN_FAITHFULNESS = MetricSpec(
    METRIC, settings=FaithfulnessSettings, build=build_turn_faithfulness_graph, needs=frozenset({"llm"}), tasks=(TASK,),
    summary="Share of each reply's claims supported by the retrieval context and tool results so far (deepeval; LLM"
            " judge)",
    doc="Each reply's claims judged against the retrieval context and tool results of its window (the last"
        " ``window_size`` exchanges, up to the reply); the mean over replies with sources of the share of claims not"
        " contradicted.",
    prompt_values={JUDGE_STEP: {"sources", "claims"}, **STATEMENT_PROMPT_VALUES})
create_turn_faithfulness_metric = TURN_FAITHFULNESS.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
