"""Tool correctness: each exchange's tool calls against a reference trajectory, or judged by an LLM.

    START → plan_checks ─Send per exchange─→ check_reference  (a reference; no judge call)
                   │                  ├────→ judge_arguments (a reference, arguments="llm": one call)
                   │                  └────→ judge_calls     (no reference: one call)
                   └──(nothing to check)──→ reduce_score → END

The trajectory modes are agentevals' (``strict``, ``unordered``, ``subset``,
``superset``); where the reference is read, the shapes and every rule:
docs/agents.md. Score = share of checked exchanges whose calls are right.
"""

from __future__ import annotations

__all__ = [
    "ArgumentJudgement",
    "CheckTask",
    "Match",
    "ToolCallJudgement",
    "ToolSettings",
    "ToolState",
    "ToolVerdict",
    "build_tool_graph",
    "call_text",
    "create_tool_correctness_metric",
    "match_trajectory",
]

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Optional, cast, get_args

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from ..core.nodes import (
    Node,
    in_scope,
    judge_step,
    latest_scope,
    render_messages,
    score_node,
    scoring_edges,
    turn_label,
)
from ..core.replay import steer_of
from ..core.scoring import WindowOptions, all_good, check_flag, clause, option, share_reason
from ..core.state import MetricInput, MetricOutput, MetricState, conversation_of
from ..core.verdicts import NO_CONTEXT, NO_USER, answer_fields
from ..data.answers import YesNo
from ..data.conversation import Conversation, ToolCall
from ..data.results import MetricResult, Verdict, merge_verdicts
from ..data.toolref import ExpectedCall, expected_of, parse_arguments
from ..data.windows import Exchange, exchanges, windows_from_exchanges
from ..judges import JudgeOutcome, JudgeRequest
from . import MetricSpec
from ._renamed import renamed

JUDGE_STEP = "tool_correctness/judge_calls"
ARGUMENTS_STEP = "tool_correctness/judge_arguments"

Trajectory = Literal["strict", "unordered", "subset", "superset"]
TRAJECTORIES: tuple[str, ...] = get_args(Trajectory)
#: ``arguments(called, expected) -> bool`` (agentevals' custom matcher order: the call's, then the reference's).
ArgumentComparator = Callable[[Any, Any], bool]
ArgumentMode = Literal["exact", "ignore", "llm"]


# --- matching -------------------------------------------------------------------------------------------------------

def _pair(left: Sequence[Any], right: Sequence[Any], ok: Callable[[Any, Any], bool]) -> dict[int, int]:
    """A largest matching of ``left`` items to distinct ``right`` items where ``ok(l, r)``
    (augmenting paths: a custom comparator never loses a match to the order it is tried in)."""
    owner: dict[int, int] = {}  # right index -> left index

    def place(i: int, seen: set[int]) -> bool:
        for j, r in enumerate(right):
            if j in seen or not ok(left[i], r):
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(left)):
        place(i, set())
    return {i: j for j, i in owner.items()}


def call_text(name: str, arguments: Any) -> str:
    """``name({"a": 1})``: a call as a reason or a prompt shows it."""
    if arguments is None:
        return f"{name}()"
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return f"{name}({shown})"


@dataclass(frozen=True)
class Match:
    """What a trajectory comparison found: ``ok`` and, when not, what is wrong."""

    ok: bool
    missing: tuple[ExpectedCall, ...] = ()  # reference calls no call matched (they count against superset/unordered)
    extra: tuple[ToolCall, ...] = ()  # calls no reference call matched (they count against subset/unordered)
    pairs: tuple[tuple[ToolCall, ExpectedCall], ...] = ()  # matched (call, reference) pairs
    order: str = ""  # strict mode: the first position where the order differs


def _steps(items: Sequence[Any], step_of: Sequence[int]) -> list[list[Any]]:
    groups: dict[int, list[Any]] = {}
    for item, step in zip(items, step_of):
        groups.setdefault(step, []).append(item)
    return [groups[k] for k in sorted(groups)]


def match_trajectory(called: Sequence[ToolCall], expected: Sequence[ExpectedCall], mode: Trajectory,
                     same_arguments: Callable[[Any, Any], bool], called_steps: Sequence[int] | None = None) -> Match:
    """agentevals' (openevals') trajectory match over one exchange's calls: ``strict`` (the same
    steps in the same order, a step's calls in any order among themselves: ``called_steps`` gives
    each call's step, its message; a reference's nested list is one step), ``unordered`` (the same
    calls, any order), ``subset`` (every call is in the reference), ``superset`` (every reference
    call was made). A reference call without arguments matches any arguments; else
    ``same_arguments(call's, reference's)`` decides."""

    def ok(call: ToolCall, ref: ExpectedCall) -> bool:
        return call.name == ref.name and (ref.arguments is None
                                          or same_arguments(parse_arguments(call.arguments), ref.arguments))

    if mode == "strict":
        mine = _steps(called, called_steps if called_steps is not None else range(len(called)))
        theirs = _steps(expected, [r.step for r in expected])
        pairs: list[tuple[ToolCall, ExpectedCall]] = []
        for i, (got, want) in enumerate(zip(mine, theirs)):
            matched = _pair(got, want, ok)
            pairs += [(got[a], want[b]) for a, b in matched.items()]
            if len(matched) != len(got) or len(got) != len(want):
                shown = ", ".join(call_text(c.name, c.arguments) for c in got)
                wanted = ", ".join(call_text(r.name, r.arguments) for r in want)
                return Match(False, order=f"step {i + 1} called {shown}, the reference's step {i + 1} is {wanted}",
                             missing=tuple(r for s in theirs[i:] for r in s),
                             extra=tuple(c for s in mine[i:] for c in s), pairs=tuple(pairs))
        n = min(len(mine), len(theirs))
        missing = tuple(r for s in theirs[n:] for r in s)
        extra = tuple(c for s in mine[n:] for c in s)
        order = "" if len(mine) == len(theirs) else f"{len(mine)} step(s) of calls, the reference has {len(theirs)}"
        return Match(len(mine) == len(theirs), missing, extra, tuple(pairs), order)
    matched = _pair(called, expected, ok)
    extra = tuple(c for i, c in enumerate(called) if i not in matched)
    missing = tuple(r for j, r in enumerate(expected) if j not in set(matched.values()))
    good = {"unordered": not extra and not missing, "subset": not extra, "superset": not missing}[mode]
    return Match(good, missing, extra, tuple((called[i], expected[j]) for i, j in matched.items()))


def _exact(called: Any, expected: Any) -> bool:
    return bool(called == expected)


def _ignore(called: Any, expected: Any) -> bool:
    return True


def match_reason(m: Match, mode: Trajectory, called: Sequence[ToolCall], expected: Sequence[ExpectedCall]) -> str:
    names = ", ".join(call_text(c.name, c.arguments) for c in called) or "no tool"
    wanted = ", ".join(call_text(r.name, r.arguments) for r in expected) or "no tool"
    head = f"Called {names}; the reference ({mode}) is {wanted}"
    if m.ok:
        return f"{head}: they match."
    problems = []
    if m.order:
        problems.append(m.order)
    if m.missing and mode in ("strict", "unordered", "superset"):
        problems.append("missing " + ", ".join(call_text(r.name, r.arguments) for r in m.missing))
    if m.extra and mode in ("strict", "unordered", "subset"):
        problems.append("not in the reference " + ", ".join(call_text(c.name, c.arguments) for c in m.extra))
    return f"{head}: {'; '.join(problems) or 'they differ'}."


# --- answers, verdicts, state ---------------------------------------------------------------------------------------

class ToolCallJudgement(BaseModel):
    """The judge's answer on one exchange's calls, without a reference."""

    reason: str = Field(description="Two or three sentences: were these the right tools, with the right arguments;"
                                    " was any call wasted or repeated. Cite call numbers.")
    verdict: YesNo = Field(description="'yes' if the calls were right and none was wasted or repeated, else 'no'.")


class ArgumentJudgement(BaseModel):
    """The judge's answer on whether each call's arguments mean what the reference's do."""

    reason: str = Field(description="One or two sentences citing the pairs whose arguments differ, if any.")
    verdict: YesNo = Field(description="'yes' if every pair's arguments are equivalent, else 'no'.")


class ToolVerdict(Verdict):
    """One exchange's calls checked (``check`` "exchange-N", 1-based) or the whole conversation's
    (``check`` "conversation"); ``by``: "reference" (no judge call), "arguments" (names by
    reference, arguments by the judge) or "judge" (no reference)."""

    id_fields: ClassVar[tuple[str, ...]] = ("check",)

    check: str
    by: Literal["reference", "arguments", "judge"]
    called: list[str] = Field(default_factory=list)  # the calls, as call_text shows them
    expected: list[str] | None = None  # the reference's, when there is one
    verdict: Literal["yes", "no"] | None = None


class ReferenceCall(TypedDict):
    """An :class:`ExpectedCall` as plain data (a Send payload)."""

    name: str
    arguments: Any
    step: int


class CheckTask(TypedDict):
    check: str
    by: Literal["reference", "arguments", "judge"]
    turns: list[int]
    calls: list[dict[str, Any]]  # ToolCall dumps (a Send payload stays plain data)
    steps: list[int]  # each call's step: the index of the assistant turn (message) that made it
    expected: list[ReferenceCall] | None
    context: str  # earlier turns, for the judge
    user_message: str
    reply: str


class ToolState(MetricState, total=False):
    checks: list[CheckTask]
    unchecked: int  # exchanges whose calls have no reference and no judge to check them
    verdicts: Annotated[list[ToolVerdict], merge_verdicts]


@dataclass(frozen=True, kw_only=True)
class ToolSettings(WindowOptions):
    """``trajectory``: how a reference is matched; ``arguments``: how arguments are compared;
    ``judge_unreferenced``: whether exchanges with calls and no reference are judged by the LLM."""

    trajectory: Trajectory = option("unordered", help="how calls match their reference: agentevals' strict,"
                                    " unordered, subset or superset")
    arguments: ArgumentMode | ArgumentComparator = option(
        "exact", help="how arguments are compared: 'exact', 'ignore', 'llm' (the judge) or a callable (call's,"
        " reference's) -> bool")
    judge_unreferenced: bool = option(True, help="exchanges with calls and no reference judged by the LLM, with"
                                      " window_size earlier exchanges shown")

    def check(self) -> None:
        super().check()
        if self.trajectory not in TRAJECTORIES:
            raise ValueError(f"trajectory must be one of {', '.join(TRAJECTORIES)}, got {self.trajectory!r}")
        if not callable(self.arguments) and self.arguments not in ("exact", "ignore", "llm"):
            raise ValueError(f"arguments must be 'exact', 'ignore', 'llm' or a callable, got {self.arguments!r}")
        if self.arguments == "llm" and self.offline:
            raise ValueError("arguments='llm' needs an LLM judge (pass model=...)")
        check_flag(self.judge_unreferenced, "judge_unreferenced")

    def comparator(self) -> Callable[[Any, Any], bool]:
        if callable(self.arguments):
            return self.arguments
        return _exact if self.arguments == "exact" else _ignore  # "llm": names paired here, arguments judged


# --- planning -------------------------------------------------------------------------------------------------------

def _calls(ex: Exchange) -> list[ToolCall]:
    return [c for it in ex.assistant for c in it.turn.tool_calls]


def _call_steps(exs: Sequence[Exchange]) -> list[int]:
    return [it.index for ex in exs for it in ex.assistant for _ in it.turn.tool_calls]


def _exchange_reference(ex: Exchange) -> list[ExpectedCall] | None:
    """The ``expected_tools`` of the exchange's turns (user or assistant), in turn order; None when none gives one."""
    given = [r for it in ex.turns if (r := expected_of(it.turn.metadata)) is not None]
    if not given:
        return None
    out: list[ExpectedCall] = []
    for ref in given:  # a later turn's steps come after an earlier one's
        base = max((c.step for c in out), default=-1) + 1
        out += [ExpectedCall(c.name, c.arguments, base + c.step) for c in ref]
    return out


def _dump(calls: Sequence[ExpectedCall]) -> list[ReferenceCall]:
    return [{"name": c.name, "arguments": c.arguments, "step": c.step} for c in calls]


def _calls_block(calls: Sequence[ToolCall]) -> str:
    if not calls:
        return "(no tool was called)"
    lines = []
    for i, c in enumerate(calls, 1):
        out = c.output if isinstance(c.output, str) or c.output is None else json.dumps(c.output, ensure_ascii=False,
                                                                                         default=str)
        lines.append(f"[call {i}] {call_text(c.name, c.arguments)}\n  output: {out if out is not None else '(none)'}")
    return "\n".join(lines)


def _check_task(settings: ToolSettings, check: str, exs: Sequence[Exchange], reference: list[ExpectedCall] | None,
                turns: list[int], context: str = "", user_message: str = "", reply: str = "") -> CheckTask:
    """The check of ``exs``' calls: by the judge with no ``reference``; else against it, the arguments by the judge
    with ``arguments="llm"`` when the tools match by name and a pair has reference arguments (otherwise the
    reference check decides alone, with no call)."""
    calls, steps = [c for ex in exs for c in _calls(ex)], _call_steps(exs)
    by: Literal["reference", "arguments", "judge"] = "judge" if reference is None else "reference"
    if reference is not None and settings.arguments == "llm":
        m = match_trajectory(calls, reference, settings.trajectory, _ignore, steps)
        by = "arguments" if m.ok and any(r.arguments is not None for _, r in m.pairs) else "reference"
    return CheckTask(check=check, by=by, turns=turns, calls=[c.model_dump() for c in calls], steps=steps,
                     expected=None if reference is None else _dump(reference), context=context,
                     user_message=user_message, reply=reply)


def _plan(settings: ToolSettings) -> Callable[..., ToolState]:
    # "Optional[RunnableConfig]": the spelling LangGraph recognises to pass the config
    def plan_checks(state: ToolState, config: Optional[RunnableConfig] = None) -> ToolState:
        conversation = conversation_of(state)
        exs = exchanges(conversation)
        windows = in_scope(windows_from_exchanges(conversation, exs, settings.window_size), config)
        checks: list[CheckTask] = []
        unchecked = 0
        for w in windows:
            ex = w.target
            calls, reference = _calls(ex), _exchange_reference(ex)
            if reference is None and (not calls or not settings.judge_unreferenced or settings.offline):
                unchecked += bool(calls)
                continue
            context = [(it.turn.role, it.turn.content) for e in w.context for it in e.turns]
            checks.append(_check_task(settings, f"exchange-{ex.index + 1}", [ex], reference,
                                      [it.index for it in ex.assistant], render_messages(context, empty=NO_CONTEXT),
                                      ex.user_text, ex.reply_text))
        whole = expected_of(conversation.metadata, ragas=True)
        if whole is not None and not latest_scope(config):  # the whole trajectory: judged once, not per exchange
            turns = sorted({it.index for ex in exs for it in ex.assistant if it.turn.tool_calls})
            checks.append(_check_task(settings, "conversation", exs, whole, turns))
        return {"conversation": conversation, "checks": checks, "unchecked": unchecked}

    return plan_checks


def _route(state: ToolState) -> list[Send] | str:
    checks = state.get("checks") or []
    if not checks:
        return "reduce_score"
    node = {"reference": "check_reference", "arguments": "judge_arguments", "judge": "judge_calls"}
    return [Send(node[c["by"]], dict(c)) for c in checks]


def _task_calls(task: CheckTask) -> tuple[list[ToolCall], list[ExpectedCall]]:
    calls = [ToolCall.model_validate(c) for c in task["calls"]]
    expected = [ExpectedCall(c["name"], c["arguments"], c["step"]) for c in task["expected"] or []]
    return calls, expected


def _verdict(task: CheckTask, **fields: Any) -> ToolVerdict:
    calls, expected = _task_calls(task)
    return ToolVerdict(check=task["check"], by=task["by"], turns=task["turns"],
                       called=[call_text(c.name, c.arguments) for c in calls],
                       expected=None if task["expected"] is None else [call_text(r.name, r.arguments) for r in expected],
                       **fields)


# --- the checks -----------------------------------------------------------------------------------------------------

def _check_reference(settings: ToolSettings) -> RunnableLambda:
    same = settings.comparator()

    def check_reference(task: CheckTask, config: RunnableConfig) -> ToolState:
        calls, expected = _task_calls(task)
        m = match_trajectory(calls, expected, settings.trajectory, same, task["steps"])
        verdict = _verdict(task, verdict="yes" if m.ok else "no", reason=match_reason(m, settings.trajectory, calls,
                                                                                       expected))
        steer = steer_of(config)  # re-judging: a verdict not chosen is kept as it was, a chosen one checked again
        if steer is not None:
            if verdict.id in steer.keep and steer.chosen is not None and verdict.id not in steer.chosen:
                return {"verdicts": [cast(ToolVerdict, steer.keep[verdict.id])]}
            steer.note({"verdicts": [verdict]})
        return {"verdicts": [verdict]}

    return RunnableLambda(check_reference, name="check_reference")


def _judge_arguments(settings: ToolSettings) -> RunnableLambda:
    """Names matched by the trajectory mode (arguments ignored; planned only when they match), then one call:
    are each pair's arguments equivalent to the reference's?"""

    def pairs(task: CheckTask) -> tuple[Match, list[ToolCall], list[ExpectedCall]]:
        calls, expected = _task_calls(task)
        return match_trajectory(calls, expected, settings.trajectory, _ignore, task["steps"]), calls, expected

    def build(task: CheckTask) -> JudgeRequest:
        m, _, _ = pairs(task)
        listed = [f"[pair {i}]\n  call: {call_text(c.name, c.arguments)}\n  reference: {call_text(r.name, r.arguments)}"
                  for i, (c, r) in enumerate(m.pairs, 1) if r.arguments is not None]
        return JudgeRequest(task="tool_arguments", step=ARGUMENTS_STEP, schema=ArgumentJudgement,
                            values={"user_message": task["user_message"] or "(the whole conversation)",
                                    "pairs": "\n\n".join(listed) or "(no pair has reference arguments)"})

    def finish(task: CheckTask, outcome: JudgeOutcome) -> ToolState:
        m, calls, expected = pairs(task)
        fields = answer_fields(outcome)
        names = match_reason(m, settings.trajectory, calls, expected).removesuffix(": they match.")
        reason = f"{names}: the tools match; the arguments, judged: {clause(fields['reason'])}."
        fields["reason"] = reason if fields["verdict"] else ""
        return {"verdicts": [_verdict(task, **fields)]}

    return judge_step("judge_arguments", settings.judge, build, finish)


def _judge_calls(settings: ToolSettings) -> RunnableLambda:
    def build(task: CheckTask) -> JudgeRequest:
        calls, _ = _task_calls(task)
        return JudgeRequest(task="tool_use", step=JUDGE_STEP, schema=ToolCallJudgement, values={
            "context": task["context"], "user_message": task["user_message"] or NO_USER,
            "calls": _calls_block(calls), "reply": task["reply"]})

    def finish(task: CheckTask, outcome: JudgeOutcome) -> ToolState:
        return {"verdicts": [_verdict(task, **answer_fields(outcome))]}

    return judge_step("judge_calls", settings.judge, build, finish)


# --- score and graph ------------------------------------------------------------------------------------------------

def _where(v: ToolVerdict) -> str:
    return "the whole conversation" if v.check == "conversation" else f"{v.check} ({turn_label(v.turns)})"


def _reduce_score(settings: ToolSettings) -> Node:
    policy = settings.policy(
        step=JUDGE_STEP, where=_where, value=all_good,
        reason=share_reason("tool-call checks right", bad="Wrong", unit="check(s) ",
                            describe=lambda v: f"{_where(v)}: {clause(v.reason)}",
                            empty="No tool call to check: no exchange called a tool or had a reference."))

    def score(state: ToolState, conversation: Conversation, verdicts: list[Any]) -> MetricResult:
        t = policy.tally(verdicts)
        by = {k: sum(v.by == k for v in verdicts) for k in ("reference", "arguments", "judge")}
        # the options re-judging reads back (steering.result_options); a Python comparator cannot be written down
        mode = settings.arguments if isinstance(settings.arguments, str) else None
        result = policy.result(conversation, t, details={
            "checks": len(verdicts), "judged": len(t.judged), "by": by, "window_size": settings.window_size,
            "trajectory": settings.trajectory, "arguments": mode, "unchecked": state.get("unchecked", 0)})
        if not verdicts and state.get("unchecked"):  # calls were made: say so, and why none was checked
            why = "the offline judge cannot judge calls" if settings.offline else "judge_unreferenced is off"
            result.reason = (f"{state['unchecked']} exchange(s) called tools, with no reference to check them against,"
                             f" and {why}: give expected_tools, or an LLM judge (--model).")
        return result

    order = {"conversation": 10**9}
    return score_node(settings.name, score,
                      order=lambda v: order.get(v.check) or int(v.check.rsplit("-", 1)[-1]))


def build_tool_graph(settings: ToolSettings) -> StateGraph:
    """The uncompiled graph, for callers who add a checkpointer, interrupts or nodes."""
    builder = StateGraph(ToolState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("plan_checks", _plan(settings))
    builder.add_node("check_reference", _check_reference(settings))
    builder.add_node("judge_arguments", _judge_arguments(settings))
    builder.add_node("judge_calls", _judge_calls(settings))
    builder.add_node("reduce_score", _reduce_score(settings))
    builder.add_edge(START, "plan_checks")
    builder.add_conditional_edges("plan_checks", _route,
                                  ["check_reference", "judge_arguments", "judge_calls", "reduce_score"])
    scoring_edges(builder, ["check_reference", "judge_arguments", "judge_calls"], review=settings.review,
                  metric=settings.name)
    builder.add_edge("reduce_score", END)
    return builder


TOOL_CORRECTNESS = MetricSpec(
    "tool_correctness", settings=ToolSettings, build=build_tool_graph,
    summary="Were each exchange's tool calls right? Against expected_tools (agentevals' modes; no LLM) or judged by an"
            " LLM",
    doc="The reference is ``expected_tools`` in the metadata of the exchange's turns, or of the conversation for the"
        " whole trajectory. Score = right checks / checked; a reference check makes no call.",
    prompt_values={JUDGE_STEP: {"context", "user_message", "calls", "reply"},
                   ARGUMENTS_STEP: {"user_message", "pairs"}})
create_tool_correctness_metric = TOOL_CORRECTNESS.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
