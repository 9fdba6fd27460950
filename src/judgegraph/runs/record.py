"""The lines of a results file (``judgegraph eval --out``), typed: one pydantic model per ``type`` a writer puts
there (``header`` and ``summary``: :mod:`judgegraph.runs.header`; the others:
:class:`judgegraph.runs.resultsfile.ResultsWriter`). Every model keeps the fields it does not name
(``extra="allow"``): a file written by a newer or older judgegraph reads, and a line written back is the line read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ..data.results import Status

__all__ = ["RECORD_TYPES", "STATUSES", "AttemptLine", "BatchLine", "ConversationLine", "ErrorLine", "HeaderLine", "InputErrorLine",
           "PairwiseLine", "RecordType", "ResultLine", "ReviewLine", "SummaryLine", "UsageLine", "VerdictLine", "VoteLine",
           "elide_duplicates", "filter_transcripts", "restore_elided"]

RecordType = Literal["header", "conversation", "input_error", "summary", "batch"]
#: the record types a results file holds
RECORD_TYPES: tuple[str, ...] = get_args(RecordType)
#: a metric result's statuses
STATUSES = frozenset(get_args(Status))
#: the statuses a pass rate counts (``not_applicable`` is not judged)
JUDGED = STATUSES - {"not_applicable"}
#: the statuses that make a result one to look at first
FAILING = JUDGED - {"passed"}


class _Line(BaseModel):
    model_config = ConfigDict(extra="allow")

    def data(self) -> dict[str, Any]:
        """The line as written (its JSON object)."""
        return self.model_dump(exclude_unset=True)


class _Ordered(_Line):
    """A nested part of a conversation line: written back with its keys in the order read, strict (a wrong type is
    a named bad line, never coerced)."""

    model_config = ConfigDict(extra="allow", strict=True)
    _keys: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _remember(cls, data: object, handler: ValidatorFunctionWrapHandler) -> _Ordered:
        line: _Ordered = handler(data)
        if isinstance(data, dict):
            line._keys = tuple(data)
        return line

    @model_serializer(mode="wrap")
    def _in_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        order = {k: i for i, k in enumerate(self._keys)}
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


class UsageLine(_Line):
    """Judge calls and tokens (a summary's, or a metric result's)."""

    calls: int | float | None = None
    input_tokens: int | float | None = None
    output_tokens: int | float | None = None
    cached_input_tokens: int | float | None = None  # of input_tokens, served from the provider's prompt cache

    @property
    def tokens(self) -> int:
        return int((self.input_tokens or 0) + (self.output_tokens or 0))


class JudgeEntry(_Line):
    """A header's judge: its name, the settings that decide verdicts, its prompts' hashes."""

    name: str
    settings: dict[str, object] | None = None
    prompts: dict[str, object] | None = None

    def describe(self) -> str:
        """The judge in words, on one line: who judges (a jury: its jurors and how their answers make one), its
        settings, prompt hashes (a changed prompt changes the verdicts). Never a Python repr."""
        settings: dict[str, Any] = dict(self.settings or {})
        jurors = [j for j in settings.get("jurors") or [] if isinstance(j, dict) and isinstance(j.get("name"), str)]
        who = _model(self.name)
        if jurors:
            names = list(dict.fromkeys(_model(j["name"]) for j in jurors))
            how = f"{settings.get('aggregate') or 'majority'}" + (f", quorum {settings['quorum']}"
                                                                  if settings.get("quorum") is not None else "")
            who = (f"{names[0]}, asked {len(jurors)} times ({how})" if len(names) == 1
                   else f"jury of {len(jurors)}: {', '.join(names)} ({how})")
            shared = [j.get("settings") for j in jurors]
            if all(isinstance(x, dict) and x == shared[0] for x in shared):  # the jurors' own settings, said once
                settings = {**settings, **shared[0]}  # type: ignore[dict-item]
        skip = {"repeat", "aggregate", "quorum", "jurors"}
        bits = [who] + [b for k, v in settings.items() if k not in skip and (b := _setting(k, v))]
        if self.prompts:
            bits.append("prompts " + ", ".join(f"{k} {v}" for k, v in self.prompts.items()))
        return " · ".join(bits)


#: A judge setting in words (a setting not listed: ``name value``); the cache on, the default, is not said.
_SETTING_WORDS = {"base_url": "at {}", "max_concurrency": "{} calls at once", "max_tries": "{} tries",
                  "max_retries": "{} retries", "temperature": "temperature {}", "timeout": "timeout {} s",
                  "quorum": "quorum {}", "seed": "seed {}"}


def _model(name: str) -> str:
    """A judge's name as a person says it: ``llm:gpt-4.1-mini`` is ``gpt-4.1-mini``, ``offline:M`` ``offline M``."""
    kind, _, model = name.partition(":")
    return model if kind == "llm" and model else f"offline {model}" if kind == "offline" and model else name


def _setting(name: str, value: object) -> str | None:
    if isinstance(value, (dict, list)) or value is None or (name == "cache" and value is True):
        return None  # the jurors and models are said in the judge's own words; the cache on is the default
    if name == "cache":
        return "no cache"
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return _SETTING_WORDS.get(name, name.replace("_", " ") + " {}").format(shown)


class HeaderLine(_Line):
    """The run header: the first line of a run (:func:`judgegraph.runs.header.run_header`), its keys in the order
    written."""

    type: Literal["header"] = "header"
    format: object = None  # judgegraph.runs.header.FORMAT
    judgegraph: object = None  # its version
    started_at: object = None
    argv: object = None  # redacted
    config: object = None  # the --config file's data, redacted
    metrics: object = None  # [{"name", "options"}]: option -> its JSON value (a long string as its hash), redacted
    metrics_from_inputs: object = None  # the input files' assertions may choose other metrics
    options: object = None
    judges: object = None  # [{"name", "settings", "prompts"}]: settings redacted, prompt step -> sha256[:12]
    inputs: object = None  # [{"path", "sha256"}] per input file, and other sources (an MLflow experiment, an app)
    rejudged: object = None  # a rejudge's: what was judged again, from which file, by which judge, rubric or prompt
    watch: object = None  # a watch's own settings (judgegraph watch)

    def judge_entries(self) -> list[JudgeEntry]:
        """The judges the header names (entries without a name left out)."""
        return [JudgeEntry.model_validate(j) for j in _objects(self.judges, "name")]

    def input_files(self) -> dict[str, str]:
        """The input files it names with their hashes: path -> sha256 (hex, lowercase)."""
        return {e["path"]: e["sha256"].removeprefix("sha256:").lower() for e in _objects(self.inputs, "path")
                if isinstance(e.get("sha256"), str)}

    def metric_names(self) -> list[str]:
        return [m["name"] for m in _objects(self.metrics, "name")]

    def thresholds(self) -> dict[str, float | None]:
        """Each metric's configured threshold, by metric name (``-`` read as ``_``)."""
        return {str(m.get("name")).replace("-", "_"): number(options.get("threshold"))
                for m in _objects(self.metrics) if isinstance(options := m.get("options") or {}, dict)}


def _objects(value: object, name: str | None = None) -> list[dict[str, Any]]:
    """The objects of a header's list (with a string ``name`` field, when given); anything else left out."""
    items = value if isinstance(value, list) else []
    return [i for i in items if isinstance(i, dict) and (name is None or isinstance(i.get(name), str))]


class SummaryLine(_Line):
    """The summary a finished run appends (a resumed run appends another: the last one counts)."""

    type: Literal["summary"] = "summary"
    ended_at: object = None
    duration_s: object = None
    conversations: object = None
    usage: object = None  # {"calls", "input_tokens", "output_tokens", ...}
    cost_usd: object = None
    pass_rate: object = None  # {metric: rate}
    statuses: object = None  # {metric: {status: count}}

    def usage_line(self) -> UsageLine | None:
        if isinstance(self.usage, dict) and number(self.usage.get("calls")) is not None:
            return UsageLine.model_validate({k: number(v) for k, v in self.usage.items()})
        return None


class InputErrorLine(_Line):
    """A record of the inputs that could not be read: file, line, record, field, message."""

    type: Literal["input_error"] = "input_error"
    file: object = None
    line: object = None
    record: object = None
    field: object = None
    message: object = None
    error: object = None  # all of them in one text: "FILE:LINE: field 'X': why"


class BatchLine(_Line):
    """A batch of an ``eval --batch`` run (docs/batch.md): its id, round and status."""

    type: Literal["batch"] = "batch"
    id: object = None
    round: object = None  # the pass whose requests it holds
    status: object = None
    requests: object = None
    completed: object = None
    failed: object = None  # and usage, cost_usd, ...


class _Step(_Ordered):
    """What happened at one prompt step of a judge (``step``: e.g. ``turn_relevancy/judge_turn``)."""

    step: str | None = None


class ErrorLine(_Step):
    """A judgement that could not be made (:class:`judgegraph.data.results.JudgeErrorInfo`)."""

    where: str | None = None
    message: str | None = None
    attempts: int | None = None


class AttemptLine(_Step):
    """One request behind a verdict, as sent and answered (:class:`judgegraph.data.results.JudgeAttempt`)."""

    messages: list[dict[str, object]] = []  # [{"role", "content"}] exactly as sent
    reply: str | None = None
    error: str | None = None
    latency_s: int | float | None = None
    usage: UsageLine | None = None
    model: str | None = None
    settings: dict[str, object] | None = None
    cached: bool | None = None  # answered from the judge cache
    request: str | None = None  # the request's key: the same request has the same key
    shared: bool | None = None  # one request behind several verdicts (dense mode)


class _Answer(_Ordered):
    """A judge's answer: its verdict (None: the judge failed, ``error`` says why), score and reason."""

    verdict: str | None = None
    score: int | float | None = None
    reason: str | None = None
    error: str | None = None


class VoteLine(_Answer):
    """One juror's (or repeat's) answer behind a verdict (:class:`judgegraph.data.results.Vote`)."""

    judge: str | None = None
    repeat: int | None = None


class ReviewLine(_Ordered):
    """A person's decision on a verdict, with what the judge had said (:class:`judgegraph.data.results.Review`)."""

    by: str | None = None
    judge_verdict: str | None = None
    judge_reason: str | None = None
    note: str | None = None


class VerdictLine(_Answer):
    """One verdict of a metric result (:class:`judgegraph.data.results.Verdict` as dumped, a metric's own fields
    kept): its id, the turns (0-based) it is about, the verdict (None: the judge failed), why, and what it cost."""

    turns: list[int] | None = None
    attempts: int | None = None
    usage: UsageLine | None = None
    transcript: list[AttemptLine] | None = None  # the requests as sent and answered
    review: ReviewLine | None = None
    votes: list[VoteLine] = []
    id: str | int | None = None  # None in a file written before ids were stored
    reply: str | None = None  # the judged reply (a window verdict's)

    @property
    def split(self) -> str | None:
        """Why its votes disagree (``jurors split``, ``flaky across repeats``); None when they agree."""
        if len({v.verdict for v in self.votes} - {None}) < 2:
            return None
        return "jurors split" if len({v.judge for v in self.votes}) > 1 else "flaky across repeats"

    @property
    def turn_numbers(self) -> list[int]:
        """The turns it is about, 1-based as a person reads them."""
        return [t + 1 for t in self.turns or []]

    @property
    def key(self) -> str:
        """Its id; in a file written before ids were stored, the id its fields give (its window, its turns)."""
        if self.id is not None:
            return str(self.id)
        if (window := (self.__pydantic_extra__ or {}).get("window")) is not None:
            return str(window)
        return ",".join(map(str, self.turn_numbers)) or "conversation"

    @property
    def decided(self) -> bool:
        """It has an id and a yes/no verdict (one a person can review)."""
        return self.id is not None and self.verdict in ("yes", "no")


class ResultLine(_Ordered):
    """A metric's result in a conversation line (:class:`judgegraph.data.results.MetricResult` as dumped); every
    field optional, as an older file may lack it."""

    key: str | None = None
    conversation_id: str | None = None
    score: int | float | None = None
    threshold: int | float | None = None
    passed: bool | None = None
    status: str | None = None  # one of STATUSES (read_run checks), None in an older file
    reason: str | None = None
    judge: str | None = None
    strict_mode: bool | None = None
    value: object = None
    verdicts: list[VerdictLine] = []
    errors: list[ErrorLine] = []
    usage: UsageLine | None = None
    details: dict[str, Any] | None = None
    transcript: list[AttemptLine] | None = None  # requests no single verdict owns (an extraction)

    @property
    def outcome(self) -> str:
        """Its status; in an older file without one, the status its ``passed`` and errors give."""
        if self.status is not None:
            return self.status
        return ("passed" if self.passed is True else "failed" if self.passed is False
                else "error" if self.errors else "not_applicable")

    @property
    def judged(self) -> bool:
        """Its status counts in a pass rate (passed, failed or a judge error; not ``not_applicable``)."""
        return self.status in JUDGED

    @property
    def failing(self) -> bool:
        """One to look at first: failed, an error, or holding judge errors."""
        return self.status in FAILING or bool(self.errors)

    @property
    def number(self) -> float | None:
        """Its score as a float (None: none)."""
        return number(self.score)


class ConversationLine(_Line):
    """A conversation judged: its id, place in the inputs, the run's error (the whole conversation failed), its
    results by metric and its cost. ``simulate`` adds ``conversation`` (the turns) and ``simulation``."""

    type: Literal["conversation"] = "conversation"
    conversation_id: str
    position: object = None
    source: object = None
    error: object = None
    results: dict[str, ResultLine] = {}
    cost_usd: object = None
    conversation: object = None
    #: the file line it was read from, and the earlier lines of the same id it replaced (not written)
    line: int = 0
    replaces: tuple[int, ...] = ()
    order: int = 0  # its place in the file: the order ids were first read

    def data(self) -> dict[str, Any]:
        """The line as written (its JSON object: what the reader adds left out)."""
        return self.model_dump(exclude_unset=True, exclude={"line", "replaces", "order"})

    @property
    def place(self) -> int | None:
        """Its place in the inputs (``position``), None when the line has none (an older file)."""
        pos = self.position
        return pos if isinstance(pos, int) and not isinstance(pos, bool) and pos >= 0 else None

    @property
    def run_error(self) -> str | None:
        """The run's error (the whole conversation failed), as text; None when it ran."""
        return str(self.error) if self.error else None


class PairwiseLine(_Line):
    """A line ``judgegraph pairwise --out`` writes: not part of a results file."""

    type: Literal["pairwise"] = "pairwise"


def pass_rate(statuses: Mapping[str, int]) -> float | None:
    """passed / (passed + failed + error) of results per status (a judge error is never a pass; n/a is left out);
    None: nothing judged."""
    judged = sum(statuses.get(s, 0) for s in JUDGED)
    return statuses.get("passed", 0) / judged if judged else None


def wrong_field(exc: ValidationError) -> str:
    """What a line's validation found, naming the field (``field 'results.m.passed': why``)."""
    first = exc.errors()[0]
    return f"field '{'.'.join(map(str, first['loc']))}': {first['msg']}"


def number(value: object) -> float | None:
    """``value`` when it is a number (not a bool), as a float; else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _attempt_failed(attempt: object) -> bool:
    return bool(attempt.get("error")) if isinstance(attempt, dict) else bool(getattr(attempt, "error", None))


def filter_transcripts(record: dict[str, Any], mode: str) -> dict[str, Any]:
    """Keep ``record``'s transcripts whole (``full``), only for failed or re-asked judgements (``errors``), or none
    (``none``), in place."""
    if mode == "full":
        return record
    for result in (record.get("results") or {}).values():
        if not isinstance(result, dict):
            continue
        for verdict in result.get("verdicts") or []:
            if not isinstance(verdict, dict) or "transcript" not in verdict:
                continue
            keep = mode == "errors" and (verdict.get("error") or any(_attempt_failed(a) for a in verdict["transcript"]))
            if not keep:
                verdict["transcript"] = []
        if isinstance(result.get("transcript"), list):
            result["transcript"] = [a for a in result["transcript"] if mode == "errors" and _attempt_failed(a)]
    return record


#: a verdict reason at least this long is stored once per results line
ELIDE_MIN_CHARS = 256


def _verdicts(result: object) -> list[Any]:
    verdicts = result.get("verdicts") if isinstance(result, dict) else None
    return verdicts if isinstance(verdicts, list) else []


def _escaped(reason: str, escape: object) -> str:
    """``reason`` as it sits inside a JSON string of the judge's reply."""
    return json.dumps(reason, ensure_ascii=escape == "ascii")[1:-1]


def elide_duplicates(record: dict[str, Any]) -> dict[str, Any]:
    """Store each verdict reason of :data:`ELIDE_MIN_CHARS` or more once, in its verdict: cut out of the raw reply
    (``reply_elided``) and the result's reason (``reason_elided``) where they hold it verbatim. In place;
    :func:`restore_elided` gives the exact texts back."""
    for result in (record.get("results") or {}).values():
        cuts: list[dict[str, int]] = []
        for i, verdict in enumerate(_verdicts(result)):
            reason = verdict.get("reason") if isinstance(verdict, dict) else None
            if not isinstance(reason, str) or len(reason) < ELIDE_MIN_CHARS:
                continue
            text = result.get("reason")
            if isinstance(text, str) and (at := text.find(reason)) >= 0:
                result["reason"] = text[:at] + text[at + len(reason):]
                cuts.append({"at": at, "verdict": i})
            for attempt in verdict.get("transcript") or []:
                reply = attempt.get("reply") if isinstance(attempt, dict) else None
                if not isinstance(reply, str) or "reply_elided" in attempt:
                    continue
                for escape in ("json", "ascii"):
                    esc = _escaped(reason, escape)
                    if (at := reply.find(esc)) >= 0:
                        attempt["reply"] = reply[:at] + reply[at + len(esc):]
                        attempt["reply_elided"] = {"at": at, "escape": escape}
                        break
        if cuts:
            result["reason_elided"] = cuts
    return record


def restore_elided(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with every text :func:`elide_duplicates` cut put back, exactly, in place (a marker that does not
    fit, in a file edited by hand, is dropped)."""
    results = record.get("results")
    for result in (results.values() if isinstance(results, dict) else ()):
        verdicts = _verdicts(result)
        for verdict in verdicts:
            reason = verdict.get("reason") if isinstance(verdict, dict) else None
            for attempt in (verdict.get("transcript") or []) if isinstance(verdict, dict) else ():
                cut = attempt.pop("reply_elided", None) if isinstance(attempt, dict) else None
                reply = attempt.get("reply") if isinstance(attempt, dict) else None
                if isinstance(cut, dict) and isinstance(reason, str) and isinstance(reply, str):
                    at = cut.get("at")
                    if isinstance(at, int) and 0 <= at <= len(reply):
                        attempt["reply"] = reply[:at] + _escaped(reason, cut.get("escape")) + reply[at:]
        cuts = result.pop("reason_elided", None) if isinstance(result, dict) else None
        if isinstance(cuts, list) and isinstance(result.get("reason"), str):
            text = result["reason"]
            for cut in reversed(cuts):
                try:
                    at, reason = cut["at"], verdicts[cut["verdict"]]["reason"]
                except (KeyError, TypeError, IndexError):
                    continue
                if isinstance(at, int) and isinstance(reason, str) and 0 <= at <= len(text):
                    text = text[:at] + reason + text[at:]
            result["reason"] = text
    return record
