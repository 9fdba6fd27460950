"""How every metric scores: the option bases all metrics share (one ``ValueError``
for a bad option everywhere) and the one engine from verdicts to a
:class:`~judgegraph.data.results.MetricResult` (:class:`ScoringPolicy`, :func:`build_result`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..data.results import JudgeErrorInfo, MetricResult, Usage, Verdict
from ..data.windows import check_window_size

if TYPE_CHECKING:
    from ..data.conversation import Conversation
    from ..judges.base import Judge


def check_threshold(value: object, option: str = "threshold") -> float:
    """``value`` as a threshold: a number (not a bool) from 0 to 1, else a
    ``ValueError`` naming ``option`` (NaN is out of range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{option} must be a number between 0 and 1, got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{option} must be between 0 and 1, got {value!r}")
    return float(value)


def check_whole(value: object, option: str) -> int:
    """``value`` as a count: a whole number >= 1 (not a bool), else a ``ValueError`` naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{option} must be a whole number >= 1, got {value!r}")
    return value


def check_flag(value: object, option: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{option} must be True or False, got {value!r}")
    return value


def option(default: Any = MISSING, *, help: str, cli: bool = True) -> Any:
    """A metric option: a settings field with its ``help`` text (the factory's docstring, ``judgegraph metrics``,
    the docs' catalogue); ``cli=False``: a keyword of the factory the command line and input files do not give."""
    return field(default=default, metadata={"help": help, "cli": cli})


@dataclass(frozen=True, kw_only=True)
class JudgeOptions:
    """What every metric's settings hold (``name``, ``judge``, ``review``), checked when made; a subclass declares its
    own options as fields (:func:`option`) and checks them in :meth:`check` (calling ``super().check()``), where it
    may also normalise a value (:meth:`normalise`). These fields are the metric's declaration: its factory, its
    command-line options and its docs come from them (:class:`judgegraph.metrics.MetricSpec`)."""

    name: str
    judge: Judge
    review: bool = option(False, help="add a review_verdicts node: pause for a person before the score", cli=False)
    min_judged: float | None = option(
        None, help="the least share of verdicts judged (not judge errors) a score needs, else the result is an error")

    def __post_init__(self) -> None:
        self.check()

    @property
    def offline(self) -> bool:
        """Whether the judge is the offline (embeddings) one: no LLM to ask."""
        return self.judge.kind == "offline"

    def normalise(self, **values: Any) -> None:
        """Replace fields by their checked form (a list of topics as a tuple...): for :meth:`check`."""
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def check(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        check_flag(self.review, "review")
        if self.min_judged is not None:
            check_threshold(self.min_judged, "min_judged")

    def policy(self, **how: Any) -> ScoringPolicy:
        """This metric's :class:`ScoringPolicy`: its name and judge, and ``how`` it counts."""
        return ScoringPolicy(**{"name": self.name, "judge": self.judge, "threshold": None,
                                "min_judged": self.min_judged, **how})


@dataclass(frozen=True, kw_only=True)
class MetricOptions(JudgeOptions):
    """:class:`JudgeOptions` and a pass/fail rule: ``threshold`` (a number from
    0 to 1) and ``strict_mode`` (the score 1 or 0, the threshold 1)."""

    threshold: float = option(0.5, help="the score a conversation passes with, from 0 to 1")
    strict_mode: bool = option(False, help="deepeval's strict mode: the score 1 or 0, the threshold 1")

    def check(self) -> None:
        super().check()
        check_threshold(self.threshold)
        check_flag(self.strict_mode, "strict_mode")

    @property
    def effective_threshold(self) -> float:
        """The threshold a score is gated on: 1 in strict mode."""
        return 1.0 if self.strict_mode else self.threshold

    def policy(self, **how: Any) -> ScoringPolicy:
        return super().policy(**{"threshold": self.threshold, "strict_mode": self.strict_mode, **how})


@dataclass(frozen=True, kw_only=True)
class WindowOptions(MetricOptions):
    """:class:`MetricOptions` of a metric that reads sliding windows of ``window_size`` exchanges."""

    window_size: int = option(10, help="exchanges in each window the judge reads")

    def check(self) -> None:
        super().check()
        check_window_size(self.window_size)


def strict(score: float | None, threshold: float | None, strict_mode: bool) -> tuple[float | None, float | None]:
    """deepeval's strict mode: the score 1 when it is 1, else 0; the threshold 1."""
    if not strict_mode:
        return score, threshold
    return (None if score is None else 1.0 if score == 1.0 else 0.0), 1.0


def build_result(
    name: str,
    conversation: Conversation | str,
    *,
    judge: Judge | str,
    threshold: float | None,
    score: float | None = None,
    strict_mode: bool = False,
    status: Literal["error", "not_applicable"] | None = None,
    reason: str = "",
    value: Any = None,
    verdicts: Iterable[Verdict] = (),
    errors: Iterable[JudgeErrorInfo] = (),
    usage: Usage | None = None,
    details: Mapping[str, Any] | None = None,
) -> MetricResult:
    """The one place a :class:`MetricResult` is made (one set of status rules): a forced ``status`` drops the score;
    no score is ``error`` with judge errors, else ``not_applicable``; no threshold is ``not_applicable`` (never
    failing a run); else ``passed`` when ``score >= threshold``."""
    errors = list(errors)
    score, threshold = strict(score, threshold, strict_mode)
    if status is not None:
        score = None
    elif score is None:
        status = "error" if errors else "not_applicable"
    passed = None if score is None or threshold is None or status is not None else score >= threshold
    info = dict(details or {})
    rule = None if isinstance(judge, str) else judge.rule
    if rule and "judge_rule" not in info:
        info["judge_rule"] = rule
    return MetricResult(
        key=name, conversation_id=conversation if isinstance(conversation, str) else conversation.id, score=score,
        threshold=threshold, passed=passed, reason=reason, strict_mode=strict_mode, value=value, errors=errors,
        status=status or ("not_applicable" if passed is None else "passed" if passed else "failed"),
        judge=judge if isinstance(judge, str) else judge.name, verdicts=list(verdicts), usage=usage or Usage(),
        details=info,
    )


def clause(text: str) -> str:
    """A judge's reason as a clause inside our own sentence: one line, no trailing period."""
    return " ".join(text.split()).rstrip(" .")


def default_where(v: Verdict, i: int) -> str:
    """Where a verdict is, for an error or a reason: its turns (1-based), else its position."""
    if v.turns:
        nums = ", ".join(str(t + 1) for t in v.turns)
        return f"turn {nums}" if len(v.turns) == 1 else f"turns {nums}"
    return f"verdict {i + 1}"


@dataclass(frozen=True)
class Tally:
    """What a :class:`ScoringPolicy` counted in a metric's verdicts; a reason writer reads it."""

    verdicts: list[Any]  # every verdict, in order
    judged: list[Any]  # the verdicts counted in the score
    bad: list[Any]  # the judged ones whose label is not a good one
    errors: list[JudgeErrorInfo]  # given errors, then one per verdict the judge could not make
    raw: float | None  # the score before strict mode
    score: float | None  # the score as reported (strict mode: 1 or 0)
    threshold: float | None  # the threshold it is gated on (strict mode: 1)
    place: Callable[[Any], str]  # where a verdict is ("turn 4", "request 2 ...")

    @property
    def good(self) -> int:
        return len(self.judged) - len(self.bad)

    @property
    def gate(self) -> str:
        """``" (score 0.67 < threshold 0.70)"``, ``" (score 0.50; no threshold, not gated)"``, or "" with no score."""
        if self.score is None:
            return ""
        if self.threshold is None:
            return f" (score {self.score:.2f}; no threshold, not gated)"
        cmp = ">=" if self.score >= self.threshold else "<"
        return f" (score {self.score:.2f} {cmp} threshold {self.threshold:.2f})"


Reason = Callable[[Tally], str]


def share_reason(
    what: str, *, bad: str, describe: Callable[[Any], str] | None = None, unit: str = "",
    empty: str | Reason = "Nothing to judge.", failed: str | None = None,
    notes: Callable[[Tally], list[str]] | None = None,
) -> Reason:
    """The deterministic reason of a share (``"2 of 3 {what} (score 0.67 < threshold
    0.70). {bad}: ..."``); ``empty`` when nothing was judged, ``failed`` when an error
    left no verdict. ``unit``: what ``what`` counts, for a metric's own notes."""

    def write(t: Tally) -> str:
        if not t.judged and t.errors:
            return failed if failed and not t.verdicts else (
                f"Nothing could be judged: {len(t.errors)} judge error(s); see errors.")
        if not t.judged:
            return empty if isinstance(empty, str) else empty(t)
        tell = describe or (lambda v: f"{t.place(v)}: {v.reason.rstrip('. ')}")
        parts = [f"{t.good} of {len(t.judged)} {what}{t.gate}."]
        if t.bad:
            listed = "; ".join(tell(v) for v in t.bad)
            parts.append(f"{bad}: {listed}" + ("" if listed.endswith(".") else "."))
        parts += notes(t) if notes else []  # judge errors: the policy says how many verdicts were judged
        return " ".join(parts)

    return write


def all_good(t: Tally) -> str | None:
    """A yes/no metric's value: "yes" when every judged verdict is good, "no" when one is not, None when none was judged."""
    return None if not t.judged else "no" if t.bad else "yes"


@dataclass(frozen=True)
class ScoringPolicy:
    """How one metric turns verdicts into a result: the share of ``positive`` labels among the ``counted`` ones (or
    ``score(judged)``); a verdict of None is a judge error, listed, never scored; ``reason`` is a text, a writer of
    the :class:`Tally`, or None for the share reason."""

    name: str
    judge: Judge | str
    threshold: float | None
    strict_mode: bool = False
    positive: frozenset[str] = frozenset({"yes"})
    counted: frozenset[str] | None = None
    score: Callable[[list[Any]], float | None] | None = None
    step: str = ""
    where: Callable[[Any], str] | None = None
    reason: str | Reason | None = None
    what: str = "verdicts"
    value: Callable[[Tally], Any] | None = None
    min_judged: float | None = None  # the least share of verdicts judged (not judge errors) a score needs

    def tally(self, verdicts: Iterable[Any], errors: Iterable[JudgeErrorInfo] = ()) -> Tally:
        items = list(verdicts)
        index = {id(v): i for i, v in enumerate(items)}

        def place(v: Any) -> str:
            return self.where(v) if self.where else default_where(v, index.get(id(v), 0))

        failed = [JudgeErrorInfo(where=place(v), step=getattr(v, "step", None) or self.step,
                                 message=v.error or "no verdict", attempts=v.attempts)
                  for v in items if v.verdict is None]
        judged = [v for v in items if v.verdict is not None and (self.counted is None or v.verdict in self.counted)]
        raw: float | None = None
        if judged:
            raw = self.score(judged) if self.score else sum(v.verdict in self.positive for v in judged) / len(judged)
        score, threshold = strict(raw, self.threshold, self.strict_mode)
        return Tally(items, judged, [v for v in judged if v.verdict not in self.positive], [*errors, *failed],
                     raw, score, threshold, place)

    def write_reason(self, t: Tally) -> str:
        if isinstance(self.reason, str):
            return self.reason
        if self.reason is not None:
            return self.reason(t)
        label = " or ".join(repr(p) for p in sorted(self.positive))
        return share_reason(f"{self.what} {label}", bad=f"Not {label}")(t)

    def result(
        self, conversation: Conversation | str, verdicts: Iterable[Verdict] | Tally = (), *,
        errors: Iterable[JudgeErrorInfo] = (), usage: Usage | None = None, details: Mapping[str, Any] | None = None,
    ) -> MetricResult:
        """The result of ``verdicts`` (or a :class:`Tally`): ``errors`` before the verdicts'
        own, ``usage`` added to theirs, ``details`` by default ``{"verdicts": n, "judged": k}``."""
        t = verdicts if isinstance(verdicts, Tally) else self.tally(verdicts, errors)
        status, reason = self.judged_share(t.verdicts, len(t.judged), self.write_reason(t),
                                           "not_applicable" if t.judged and t.raw is None else None)
        return build_result(
            self.name, conversation, judge=self.judge, threshold=self.threshold, score=t.raw,
            strict_mode=self.strict_mode, status=status,
            reason=reason, value=self.value(t) if self.value else None, verdicts=t.verdicts,
            errors=t.errors, usage=Usage.total(v.usage for v in t.verdicts) + (usage or Usage()),
            details=details if details is not None else {"verdicts": len(t.verdicts), "judged": len(t.judged)},
        )

    def judged_share(self, verdicts: Sequence[Any], judged: int, reason: str,
                     status: Literal["error", "not_applicable"] | None) -> tuple[Any, str]:
        """The status and reason of a score made from ``judged`` verdicts while others are judge errors: the reason
        says how many were judged; below ``min_judged`` of them, the result is an error."""
        failed = sum(getattr(v, "verdict", None) is None for v in verdicts)
        if not judged or not failed or status is not None:
            return status, reason
        made = judged + failed
        reason = f"{reason.rstrip()} Judged {judged} of {made} verdicts; {failed} judge errors.".lstrip()
        if self.min_judged is not None and judged / made < self.min_judged:
            return "error", f"{reason} Below min_judged {self.min_judged:g}: an error, not a score."
        return status, reason

    def conclude(
        self, conversation: Conversation | str, *, status: Literal["error", "not_applicable"] | None = None,
        score: float | None = None, reason: str = "", **fields: Any,
    ) -> MetricResult:
        """A result not counted from verdicts: a forced ``status`` or the metric's own ``score``."""
        if score is not None:
            verdicts = list(fields.get("verdicts") or ())
            status, reason = self.judged_share(verdicts, sum(v.verdict is not None for v in verdicts), reason, status)
        return build_result(self.name, conversation, judge=self.judge, threshold=self.threshold,
                            strict_mode=self.strict_mode, status=status, score=score, reason=reason, **fields)


def make_result(
    name: str,
    conversation: Conversation | str,
    verdicts: Sequence[Verdict],
    *,
    judge: Judge | str,
    threshold: float | None,
    positive: str | Collection[str] = "yes",
    score: Callable[[list[Verdict]], float | None] | None = None,
    strict_mode: bool = False,
    step: str = "",
    where: Callable[[Verdict], str] | None = None,
    reason: str | Callable[[float | None, float | None, list[Any]], str] | None = None,
    what: str = "verdicts",
    value: Any = None,
    details: Mapping[str, Any] | None = None,
    usage: Usage | None = None,
    min_judged: float | None = None,
) -> MetricResult:
    """Verdicts → a :class:`~judgegraph.data.results.MetricResult` through a :class:`ScoringPolicy`
    of these fields; ``reason`` may be ``(score, threshold, verdicts) -> str``."""
    fn = reason
    writer = (lambda t: fn(t.score, t.threshold, t.verdicts)) if callable(fn) else fn
    policy = ScoringPolicy(
        name, judge, threshold, strict_mode, frozenset({positive} if isinstance(positive, str) else positive),
        score=score, step=step, where=where, reason=writer, what=what, value=lambda t: value, min_judged=min_judged,
    )
    return policy.result(conversation, verdicts, usage=usage, details=details)
