"""What a metric returns: scores, per-window verdicts, judge errors, usage."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, computed_field
from typing_extensions import TypedDict

Status = Literal["passed", "failed", "error", "not_applicable"]


class Usage(BaseModel):
    """Judge calls and tokens (``estimated``: counted locally, the provider reported none).
    ``cached_input_tokens``: the part of ``input_tokens`` the provider served from its prompt cache (it
    reported so: its cached-token count, its cache reads), priced at the cached price."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    cached_input_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            estimated=self.estimated or other.estimated,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
        )

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        return sum(usages, cls())


class JudgeAttempt(BaseModel):
    """One request behind a verdict, as sent and answered (each re-ask its own); never keys or headers."""

    step: str  # prompt step, e.g. "turn_relevancy/judge_turn"
    messages: list[dict[str, str]] = Field(default_factory=list)  # [{"role", "content"}] exactly as sent
    reply: str | None = None  # the raw reply text (content, or tool-call/JSON arguments)
    error: str | None = None  # this attempt's parse/validation/transport error
    latency_s: float | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, ... never keys or headers
    cached: bool = False  # answered from the judge cache: no request was sent
    request: str | None = None  # the request's key (JudgeRequest.cache_key): the same request has the same key
    system_fingerprint: str | None = None  # the provider's backend configuration, when it reports one (OpenAI)
    shared: bool = False  # one request behind several verdicts (a dense call, judgegraph.core._dense): usage counted once


class JudgeErrorInfo(BaseModel):
    """A judgement that could not be made. Never counted as relevant or irrelevant."""

    where: str  # e.g. "window 3 (turn 7)"
    step: str  # prompt/step name, e.g. "turn_relevancy/judge_turn"
    message: str
    attempts: int = 0


class Vote(BaseModel):
    """One juror's answer behind a verdict: a judge of a jury, or one repeat of the same judge
    (``--repeat``). The verdict itself holds the aggregate; its votes say how it was reached."""

    judge: str  # the juror's name, e.g. "llm:gpt-4.1-mini"
    repeat: int = 0  # 0-based repeat of this juror (its seed is recorded in the transcript's settings)
    verdict: str | None = None  # None: this juror failed (``error``), counted against the quorum
    score: float | None = None
    reason: str = ""
    error: str | None = None


class Review(BaseModel):
    """A person's decision on a verdict (``review_verdicts``), with what the judge had said."""

    by: str = "human"
    judge_verdict: str | None = None
    judge_reason: str = ""
    note: str = ""


#: Verdict fields holding 0-based turn indices: an id shows them as 1-based turn numbers.
TURN_FIELDS = frozenset({"turns", "turn"})


class Verdict(BaseModel):
    """One judgement inside a metric (``verdict`` None when the judge failed); metrics subclass it.
    Its :attr:`id` comes from the fields in ``id_fields``, and graph state keeps verdicts keyed by it
    (:func:`merge_verdicts`): an update or a review with the same id replaces a verdict."""

    model_config = ConfigDict(extra="allow")
    id_fields: ClassVar[tuple[str, ...]] = ("turns",)

    turns: list[int] = Field(default_factory=list)  # conversation turn indices (0-based) it is about
    verdict: str | None = None
    reason: str = ""
    score: float | None = None  # e.g. the offline judge's similarity behind the verdict
    error: str | None = None
    attempts: int = 0
    usage: Usage = Field(default_factory=Usage)
    transcript: list[JudgeAttempt] = Field(default_factory=list)  # every call behind the verdict, in order
    review: Review | None = None  # set when a person decided this verdict
    votes: list[Vote] = Field(default_factory=list)  # each juror's / repeat's answer, when judged by several

    @property
    def relevant(self) -> bool | None:
        return None if self.verdict is None else self.verdict == "yes"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def id(self) -> str:
        """``"3"`` (window 3), ``"2/1,2/1/4"`` (exchange/turns/node/statement): written in every dump, so a
        verdict read back as a plain :class:`Verdict` keeps its id."""
        if type(self) is Verdict:
            extra = self.__pydantic_extra__ or {}
            if extra.get("id") is not None:
                return str(extra["id"])
            if extra.get("window") is not None:  # a window verdict written before ids were stored
                return str(extra["window"])
        parts = []
        for name in self.id_fields:
            value = getattr(self, name, None)
            if name in TURN_FIELDS:  # turns are named by their 1-based number, as everywhere a person reads them
                value = [t + 1 for t in value] if isinstance(value, (list, tuple)) else None if value is None else value + 1
            parts.append(",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))
        return "/".join(parts) or "conversation"


V = TypeVar("V", bound=Verdict)


def merge_verdicts(left: list[V] | None, right: list[V] | None) -> list[V]:
    """Reducer for verdict lists: keyed by :attr:`Verdict.id`; a verdict whose
    id is already there replaces it (in place), a new one is added."""
    return list({v.id: v for v in [*(left or []), *(right or [])]}.values())


class WindowVerdict(Verdict):
    id_fields: ClassVar[tuple[str, ...]] = ("window",)
    window: int  # index of the window == index of its last exchange
    reply: str = ""  # the judged reply, for reading results without the input file
    verdict: Literal["yes", "no"] | None = None


class MetricResult(BaseModel):
    key: str  # metric name
    conversation_id: str
    score: float | None
    threshold: float | None  # None: no pass/fail rule, the score is recorded only (custom judges)
    passed: bool | None
    status: Status
    reason: str
    judge: str  # which judge ran, e.g. "offline:all-MiniLM-L6-v2" or "llm:gpt-4.1-mini"
    strict_mode: bool = False
    value: Any = None  # a judge's declared value type (e.g. "resolved"), where the metric has one
    verdicts: list[SerializeAsAny[Verdict]] = Field(default_factory=list)
    errors: list[JudgeErrorInfo] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    details: dict[str, Any] = Field(default_factory=dict)
    #: Every judge request of this result that is no single verdict's own (an extraction the verdicts were
    #: judged from, a written reason), in the order made: with the verdicts' own transcripts, every request
    #: behind the result.
    transcript: list[JudgeAttempt] = Field(default_factory=list)

    def to_feedback(self) -> Feedback:
        """The result as one feedback record ``{key, score, value, comment, extra}``: the shape LangSmith
        takes (``Client.create_feedback(run_id, **fb)``) and MLflow's writer maps to an assessment.
        ``value`` is the judge's declared value where the metric has one, else whether it passed."""
        return {
            "key": self.key,
            "score": self.score,
            "value": self.value if self.value is not None else self.passed,
            "comment": self.reason,
            "extra": {
                "status": self.status,
                "passed": self.passed,
                "threshold": self.threshold,
                "strict_mode": self.strict_mode,
                "judge": self.judge,
                "conversation_id": self.conversation_id,
                "judge_errors": len(self.errors),
                "errors": [e.model_dump() for e in self.errors],
                "usage": self.usage.model_dump(),
            },
        }


class FeedbackExtra(TypedDict):
    status: Status
    passed: bool | None
    threshold: float | None
    strict_mode: bool
    judge: str
    conversation_id: str
    judge_errors: int
    errors: list[dict[str, Any]]  # JudgeErrorInfo dumps
    usage: dict[str, int | bool]  # a Usage dump


class Feedback(TypedDict):
    """A result as one feedback record (:meth:`MetricResult.to_feedback`)."""

    key: str
    score: float | None
    value: Any
    comment: str
    extra: FeedbackExtra


def merge_results(left: dict[str, MetricResult] | None, right: dict[str, MetricResult] | None) -> dict[str, MetricResult]:
    """Reducer for ``results``: metrics running in parallel each add their key."""
    return {**(left or {}), **(right or {})}


def merge_calls(left: list[JudgeAttempt] | None, right: list[JudgeAttempt] | None) -> list[JudgeAttempt]:
    """Reducer for ``judge_calls``: a request's attempts replace its earlier ones (same ``request``
    key), so a graph run again on a thread keeps each request once."""
    incoming = {a.request for a in right or [] if a.request}
    return [a for a in left or [] if not a.request or a.request not in incoming] + list(right or [])


def metric_key(name: str) -> str:
    """A metric's name as results, labels and ``--metric`` match it: case, spaces around and ``-``/``_`` ignored."""
    return name.strip().lower().replace("-", "_")
