"""Does each reply keep the tone asked for? A judgegraph metric from another package: its entry point
(pyproject.toml, group ``judgegraph.metrics``) names :data:`SPEC`, so once installed it runs as
``judgegraph eval chats.jsonl -m reply-tone --model openai:gpt-4.1-mini``, with its own option ``tone``.

    START → window_turns ─Send per exchange→ judge_tone [→ review_verdicts] → reduce_score → END
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Annotated, Any, Literal

from langgraph.graph import StateGraph
from pydantic import BaseModel, Field

from judgegraph.metric import (
    JudgeOutcome,
    JudgeRequest,
    MetricOptions,
    MetricSpec,
    MetricState,
    Window,
    WindowTask,
    WindowVerdict,
    judge_step,
    merge_verdicts,
    option,
    parse_prompt,
    score_node,
    turn_label,
    window_graph,
    window_node,
    window_verdict,
)

STEP, TASK = "reply_tone/judge_tone", "reply_tone"


class ToneVerdict(BaseModel):
    reason: str = Field(description="One sentence.")
    verdict: Literal["yes", "no"] = Field(description="'yes' if the reply keeps the tone, else 'no'.")


class ReplyToneState(MetricState, total=False):
    windows: list[Window]
    verdicts: Annotated[list[WindowVerdict], merge_verdicts]


@dataclass(frozen=True, kw_only=True)
class ReplyToneSettings(MetricOptions):
    """The options: every metric's (threshold, strict_mode, review, min_judged) and this one's own, ``tone``."""

    tone: str = option("friendly and professional", help="the tone each reply must keep, e.g. 'formal'")
    threshold: float = option(1.0, help="the share of replies in the tone a conversation passes with")

    def check(self) -> None:
        super().check()
        if not isinstance(self.tone, str) or not self.tone.strip():
            raise ValueError(f"reply_tone: tone is a text such as 'formal', got {self.tone!r}")


def build_reply_tone_graph(settings: ReplyToneSettings) -> StateGraph:
    """One judgement per exchange; score = share of replies in ``tone``."""
    prompt = parse_prompt(STEP, (files(__name__) / "prompts" / "judge_tone.md").read_text(encoding="utf-8"))
    policy = settings.policy(step=STEP, what=f"replies in the tone {settings.tone!r}",
                             where=lambda v: turn_label(v.turns))

    def ask(task: WindowTask) -> JudgeRequest:
        target = task["window"].target
        return JudgeRequest(task=TASK, step=STEP, schema=ToneVerdict, prompt=prompt,
                            values={"tone": settings.tone, "user_message": target.user_text, "reply": target.reply_text})

    def keep(task: WindowTask, outcome: JudgeOutcome) -> dict[str, Any]:
        return {"verdicts": [window_verdict(WindowVerdict, task["window"], outcome)]}

    def score(state: Any, conversation: Any, verdicts: list[Any]) -> Any:
        return policy.result(conversation, verdicts)

    return window_graph(settings, ReplyToneState, [("judge_tone", judge_step("judge_tone", settings.judge, ask, keep))],
                        score_node(settings.name, score, order=lambda v: v.window), windows=window_node(1))


#: The declaration the entry point names: its factory (``SPEC.factory``) and options come from it.
SPEC = MetricSpec("reply_tone", summary="Does each reply keep the tone asked for? (LLM judge; plugin)",
                  settings=ReplyToneSettings, build=build_reply_tone_graph, needs=frozenset({"llm"}), tasks=(TASK,))
create_reply_tone_metric = SPEC.factory
