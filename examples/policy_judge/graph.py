"""A custom multi-step judge built from judgegraph's nodes: did the bot answer
from the policy it retrieved?

    START → window_turns ─Send per reply→ extract_claims → plan_checks ─Send per claim→ verify_claim → reduce_score → END
            (no reply: → reduce_score)                      (no claim to check: → reduce_score)

* ``window_turns`` (``judgegraph.core.nodes.window_node``): one window per
  exchange; its target is the reply, the earlier exchanges are context.
* ``extract_claims`` (an LLM step, ``judge_step``): the reply's checkable
  claims, made self-contained with the window's earlier messages.
* ``plan_checks``: runs once, after every extraction. A claim whose reply had
  no retrieval context is unsupported at once (nothing backs it; no call);
  the others are sent to ``verify_claim``.
* ``verify_claim`` (an LLM step, one per claim, concurrently): supported or
  unsupported by the reply's own ``retrieval_context``.
* ``reduce_score`` (``judgegraph.core.nodes.make_result``): score = supported
  claims / judged claims; a failed extraction or check is a judge error,
  reported and left out of the score.

The prompts are this folder's own files (``prompts/*.md``), loaded with
``judgegraph.data.prompts.parse_prompt``; conversation content fills their
placeholders as data, in one pass.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict, Unpack  # pydantic reads these schemas; typing's TypedDict needs 3.12

from judgegraph.core.compiling import CompileOptions, compile_graph
from judgegraph.core.nodes import (
    fan_out,
    judge_step,
    make_result,
    outcome_fields,
    render_messages,
    score_node,
    window_node,
)
from judgegraph.core.scoring import WindowOptions
from judgegraph.core.state import MetricInput, MetricOutput
from judgegraph.data.conversation import Conversation
from judgegraph.data.prompts import Prompt, parse_prompt
from judgegraph.data.results import MetricResult, Usage, Verdict, merge_results
from judgegraph.data.windows import Exchange, Window
from judgegraph.judges import JudgeOutcome, JudgeRequest, ModelLike, resolve_judge

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
EXTRACT_STEP = "policy_judge/extract_claims"
VERIFY_STEP = "policy_judge/verify_claim"

#: The values each LLM node passes to its prompt file (checked by the tests).
PROMPT_VALUES = {
    EXTRACT_STEP: {"context", "user_message", "reply"},
    VERIFY_STEP: {"policy", "claim"},
}

NO_POLICY = "No policy text was retrieved for this reply, so nothing backs the claim."


@cache
def load_prompt(step: str) -> Prompt:
    path = PROMPTS_DIR / f"{step.split('/', 1)[1]}.md"
    return parse_prompt(step, path.read_text(encoding="utf-8"), path)


# -- structured outputs ------------------------------------------------------------


class Claims(BaseModel):
    claims: list[str] = Field(description="The reply's checkable claims, each self-contained, in order.")


class ClaimCheck(BaseModel):
    reason: str = Field(description="A short reason citing the policy text number, before the verdict.")
    verdict: Literal["supported", "unsupported"] = Field(
        description="'supported' if the policy texts back the claim, otherwise 'unsupported'."
    )

    @field_validator("verdict", mode="before")
    @classmethod
    def _normalise(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


# -- state -------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    window: int  # the window (== exchange) whose reply made the claim
    index: int  # position among that reply's claims
    turns: tuple[int, ...]  # the reply's turn indices (0-based)
    text: str
    policy: tuple[str, ...]  # the reply's retrieval_context texts


class ClaimVerdict(Verdict):
    window: int
    claim: str = ""
    index: int = 0
    verdict: Literal["supported", "unsupported"] | None = None


class PolicyState(TypedDict, total=False):
    conversation: Conversation | dict[str, Any]
    exchanges: list[Exchange]
    windows: list[Window]
    claims: Annotated[list[Claim], operator.add]
    checks: list[Claim]
    verdicts: Annotated[list[ClaimVerdict], operator.add]
    usage: Annotated[list[Usage], operator.add]  # extraction calls (not tied to one verdict)
    results: Annotated[dict[str, MetricResult], merge_results]


@dataclass(frozen=True, kw_only=True)
class PolicySettings(WindowOptions):
    """judgegraph's shared options (name, judge, threshold, strict mode, review, window size), checked when made."""

    window_size: int = 3
    threshold: float = 1.0


# -- nodes -------------------------------------------------------------------------


def _pairs(ex: Exchange) -> list[tuple[str, str]]:
    return [(it.turn.role, it.turn.content) for it in sorted((*ex.user, *ex.assistant, *ex.tool), key=lambda t: t.index)]


def _request(step: str, schema: type[BaseModel], values: dict[str, str]) -> JudgeRequest:
    """A request for one of this judge's prompt files (the task is the step's name)."""
    return JudgeRequest(task=step.rsplit("/", 1)[-1], step=step, schema=schema, prompt=load_prompt(step),
                        values=values)


def extract_request(window: Window) -> JudgeRequest:
    target = window.target
    return _request(EXTRACT_STEP, Claims, {
        "context": render_messages([p for ex in window.context for p in _pairs(ex)],
                                   empty="(none: this is the first exchange)"),
        "user_message": target.user_text or "(none: the assistant spoke first)",
        "reply": target.reply_text,
    })


def _turn_label(turns: tuple[int, ...] | list[int]) -> str:
    nums = ", ".join(str(t + 1) for t in turns)
    return f"turn {nums}" if len(turns) == 1 else f"turns {nums}"


def _extract_claims(settings: PolicySettings):
    def finish(task: dict[str, Any], outcome: JudgeOutcome) -> dict[str, Any]:
        window: Window = task["window"]
        turns = window.target.reply_turn_indices
        if not outcome.ok:
            failed = ClaimVerdict(window=window.index, turns=list(turns), step=EXTRACT_STEP, **outcome_fields(outcome))
            return {"verdicts": [failed]}
        policy = tuple(node.context for it in window.target.assistant for node in it.turn.retrieval_context)
        texts = [c.strip() for c in outcome.value.claims if c.strip()]  # type: ignore[union-attr]
        claims = [Claim(window.index, i, turns, text, policy) for i, text in enumerate(texts)]
        return {"claims": claims, "usage": [outcome.usage]}

    return judge_step("extract_claims", settings.judge, lambda task: extract_request(task["window"]), finish)


def plan_checks(state: PolicyState) -> dict[str, Any]:
    """Runs once after all extractions: claims with no retrieved policy are
    unsupported without a call; the rest go to ``verify_claim``."""
    claims = sorted(state.get("claims") or [], key=lambda c: (c.window, c.index))
    unbacked = [
        ClaimVerdict(window=c.window, index=c.index, turns=list(c.turns), claim=c.text, verdict="unsupported",
                     reason=NO_POLICY)
        for c in claims
        if not c.policy
    ]
    return {"checks": [c for c in claims if c.policy], "verdicts": unbacked}


def verify_request(claim: Claim) -> JudgeRequest:
    return _request(VERIFY_STEP, ClaimCheck, {
        "policy": "\n\n".join(f"[{i}] {text}" for i, text in enumerate(claim.policy, 1)),
        "claim": claim.text,
    })


def _verify_claim(settings: PolicySettings):
    def finish(task: dict[str, Any], outcome: JudgeOutcome) -> dict[str, Any]:
        claim: Claim = task["claim"]
        value = outcome.value if outcome.ok else None
        verdict = ClaimVerdict(
            window=claim.window, index=claim.index, turns=list(claim.turns), claim=claim.text,
            verdict=getattr(value, "verdict", None), reason=getattr(value, "reason", ""), **outcome_fields(outcome),
        )
        return {"verdicts": [verdict]}

    return judge_step("verify_claim", settings.judge, lambda task: verify_request(task["claim"]), finish)


def _where(v: Verdict) -> str:
    label = _turn_label(v.turns)
    claim = getattr(v, "claim", "")
    return f"{label}, claim {claim!r}" if claim else f"{label} (claim extraction)"


def _reduce_score(settings: PolicySettings):
    def score(state: PolicyState, conversation: Conversation, verdicts: list[Any]) -> MetricResult:
        result = make_result(
            settings.name, conversation, verdicts,
            judge=settings.judge, threshold=settings.threshold, strict_mode=settings.strict_mode, positive="supported",
            step=VERIFY_STEP, where=_where, what="claims",
            details={
                "window_size": settings.window_size,
                "replies": len(state.get("windows") or []),
                "claims": len(state.get("claims") or []),
                "judged": sum(1 for v in verdicts if v.verdict is not None),
            },
            usage=Usage.total(state.get("usage") or []),
        )
        if result.status == "not_applicable":
            result = result.model_copy(update={"reason": "No reply made a claim that could be checked."})
        return result

    return score_node(settings.name, score, order=lambda v: (v.window, v.index))


# -- graph ---------------------------------------------------------------------------


def build_policy_graph(settings: PolicySettings) -> StateGraph:
    builder = StateGraph(PolicyState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("window_turns", window_node(settings.window_size))
    builder.add_node("extract_claims", _extract_claims(settings))
    builder.add_node("plan_checks", plan_checks)
    builder.add_node("verify_claim", _verify_claim(settings))
    builder.add_node("reduce_score", _reduce_score(settings))
    builder.add_edge(START, "window_turns")
    builder.add_conditional_edges("window_turns", fan_out("extract_claims", "windows", item="window", empty="reduce_score"),
                                  ["extract_claims", "reduce_score"])
    builder.add_edge("extract_claims", "plan_checks")  # runs once, after every extraction
    builder.add_conditional_edges("plan_checks", fan_out("verify_claim", "checks", item="claim", empty="reduce_score"),
                                  ["verify_claim", "reduce_score"])
    builder.add_edge("verify_claim", "reduce_score")
    builder.add_edge("reduce_score", END)
    return builder


def create_policy_metric(
    *,
    model: ModelLike = None,
    window_size: int = 3,
    threshold: float = 1.0,
    name: str = "policy_grounding",
    **compile: Unpack[CompileOptions],
) -> CompiledStateGraph:
    """Did every claim of every reply come from the policy the bot retrieved?
    Score = supported claims / judged claims; threshold 1.0 by default (one
    unsupported claim fails the conversation). Needs an LLM judge to judge;
    built without one it still draws. ``model``: as every judgegraph factory
    (a chat model, a model string, or a ready judge); ``compile``: LangGraph
    compile options (``checkpointer``, ``interrupt_before``, ...)."""
    settings = PolicySettings(name=name, judge=resolve_judge(model), window_size=window_size, threshold=threshold)
    return compile_graph(build_policy_graph(settings), name, compile, create_policy_metric)
