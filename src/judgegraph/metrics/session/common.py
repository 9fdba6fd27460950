"""What the session judges share: settings, turn numbers, result building.

Turn numbers: the judge sees and cites **1-based** turn numbers (the ``turn``
field of :func:`judgegraph.nodes.conversation_json`; system and tool turns
count). Results store them **0-based** in ``Verdict.turns`` (like every other
metric) and print them 1-based in reasons. A number the judge cites that is out
of range, or names a turn of the wrong role (a "user turn" that is an assistant
turn), is dropped: it cannot point a reader at the wrong message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ...conversation import Conversation
from ...judges import Judge
from ...results import JudgeErrorInfo, MetricResult, Usage, Verdict

NEEDS_LLM = "needs an LLM judge (pass --model)"


@dataclass(frozen=True)
class SessionSettings:
    """Settings every session judge has. ``strict_mode`` makes the score 1 or 0
    and the threshold 1 (user_frustration: only "none" passes)."""

    name: str
    judge: Judge
    threshold: float = 0.5
    strict_mode: bool = False

    @property
    def effective_threshold(self) -> float:
        return 1.0 if self.strict_mode else self.threshold

    def check(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
            raise ValueError(f"threshold must be a number between 0 and 1, got {self.threshold!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {self.threshold}")


def lower(value: Any) -> Any:
    """Verdicts are read case-insensitively: ``" Yes "`` is ``"yes"``."""
    return value.strip().lower() if isinstance(value, str) else value


# -- turns ---------------------------------------------------------------------


def role_indices(conversation: Conversation, role: str) -> list[int]:
    return [i for i, t in enumerate(conversation.turns) if t.role == role]


def cited_turns(numbers: Iterable[Any], conversation: Conversation, roles: Sequence[str] | None = None) -> list[int]:
    """1-based turn numbers from a judge → sorted 0-based indices, keeping only
    numbers that exist and (with ``roles``) name a turn of one of those roles."""
    out: set[int] = set()
    for n in numbers or ():
        if isinstance(n, bool) or not isinstance(n, int):
            continue
        i = n - 1
        if 0 <= i < len(conversation.turns) and (roles is None or conversation.turns[i].role in roles):
            out.add(i)
    return sorted(out)


def turn_label(indices: Iterable[int]) -> str:
    """0-based indices → ``"turn 3"`` / ``"turns 3, 5"`` (1-based)."""
    nums = [str(i + 1) for i in sorted(set(indices))]
    if not nums:
        return "no turn cited"
    return f"turn {nums[0]}" if len(nums) == 1 else f"turns {', '.join(nums)}"


def clause(text: str) -> str:
    """A judge's reason as a clause inside our own sentence: no trailing period."""
    return " ".join(text.split()).rstrip(" .")


def quote(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return f'"{text[: limit - 1]}…"' if len(text) > limit else f'"{text}"'


# -- results -------------------------------------------------------------------


def base_result(settings: SessionSettings, conversation: Conversation, **fields: Any) -> MetricResult:
    fields.setdefault("score", None)
    fields.setdefault("passed", None)
    return MetricResult(
        key=settings.name,
        conversation_id=conversation.id,
        threshold=settings.effective_threshold,
        judge=settings.judge.name,
        strict_mode=settings.strict_mode,
        **fields,
    )


def needs_llm(judge: Judge, tasks: Iterable[str]) -> bool:
    """True when the judge cannot answer one of the metric's tasks (the offline
    judge answers turn relevance only)."""
    return not all(judge.supports(t) for t in tasks)


def needs_llm_result(settings: SessionSettings, conversation: Conversation, step: str) -> MetricResult:
    """The result of a session judge run with a judge that cannot make its
    judgements: status ``error`` at once, no call, no model load."""
    message = f"{settings.name} {NEEDS_LLM}: the {settings.judge.kind} judge cannot answer it"
    return base_result(
        settings, conversation, status="error", reason=NEEDS_LLM,
        errors=[JudgeErrorInfo(where="conversation", step=step, message=message, attempts=0)],
    )


def not_applicable(
    settings: SessionSettings, conversation: Conversation, reason: str, *, usage: Usage | None = None,
    details: dict[str, Any] | None = None, verdicts: list[Verdict] | None = None,
) -> MetricResult:
    return base_result(
        settings, conversation, status="not_applicable", reason=reason, usage=usage or Usage(),
        details=details or {}, verdicts=verdicts or [],
    )


def share_result(
    settings: SessionSettings,
    conversation: Conversation,
    *,
    good: int,
    judged: int,
    what: str,
    verdicts: list[Verdict],
    errors: list[JudgeErrorInfo],
    usage: Usage,
    problems: list[str],
    details: dict[str, Any],
) -> MetricResult:
    """A yes/no result scored as a share: ``value`` "yes" when every judged item
    is good, score = good / judged (strict: 1 or 0), passed = score >= threshold.
    Judge errors are left out of ``judged`` and reported. ``judged == 0`` with
    errors is status ``error``."""
    threshold = settings.effective_threshold
    if judged == 0:
        why = f"Nothing could be judged: {len(errors)} judge error(s); see errors."
        return error_result(settings, conversation, why, errors=errors, usage=usage, details=details,
                            verdicts=verdicts)
    score = good / judged
    if settings.strict_mode:
        score = 1.0 if good == judged else 0.0
    passed = score >= threshold
    cmp = ">=" if passed else "<"
    parts = [f"{good} of {judged} {what} (score {score:.2f} {cmp} threshold {threshold:.2f})."]
    parts += problems
    if errors:
        parts.append(f"{len(errors)} judgement(s) failed (judge error), left out of the score; see errors.")
    return base_result(
        settings, conversation, score=score, passed=passed, status="passed" if passed else "failed",
        value="yes" if good == judged else "no", reason=" ".join(parts), verdicts=verdicts, errors=errors,
        usage=usage, details=details,
    )


def error_result(
    settings: SessionSettings, conversation: Conversation, reason: str, *, errors: list[JudgeErrorInfo],
    usage: Usage, details: dict[str, Any] | None = None, verdicts: list[Verdict] | None = None,
) -> MetricResult:
    """Status ``error``: nothing could be judged. Score, value and passed are None."""
    return base_result(settings, conversation, status="error", reason=reason, errors=errors, usage=usage,
                       details=details or {}, verdicts=verdicts or [])


def error_info(where: str, step: str, error: str | None, attempts: int) -> JudgeErrorInfo:
    return JudgeErrorInfo(where=where, step=step, message=error or "no verdict", attempts=attempts)


def value_of(outcome: Any) -> BaseModel | None:
    return outcome.value if outcome.ok else None
