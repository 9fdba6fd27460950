"""People's labels on judgegraph's verdicts, from every place they are kept (``docs/agreement.md``).

A :class:`Label` is one person's decision for one metric of one conversation: on one verdict (its 1-based
``turn`` or its ``verdict_id``) or on the whole result. :func:`read_labels` reads labels JSONL, the offline fit's
lines, MLflow traces/assessments (``HUMAN`` sources only) and LangSmith feedback (a ``model`` source left out);
:func:`review_labels` reads the review decisions of a results file. A record that cannot be used is a
:class:`LabelError` naming the file, line (or record) and field; the others are still read.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..loaders.base import InputError

if TYPE_CHECKING:
    from ..runs import ConversationLine

LabelValue = str | float
Source = Literal["labels", "ids", "mlflow", "langsmith"]

#: a metadata key MLflow sets on an assessment (and a trace) of a session: its id
MLFLOW_SESSION_KEY = "mlflow.trace.session"


@dataclass(frozen=True)
class Label:
    """One person's label on one verdict (``turn`` or ``verdict_id``) or on a whole metric result."""

    conversation_id: str
    metric: str
    value: LabelValue  # "yes" / "no", a category, or a number (a bool is read as "yes" / "no")
    turn: int | None = None  # 1-based turn number the verdict is about
    verdict_id: str | None = None  # Verdict.id
    source: str = ""  # where it was read: "labels.jsonl:3", "review", ...
    by: str = ""
    note: str = ""
    annotator: str = ""  # the person who labelled it (``judgegraph view`` names every label's)
    time: str = ""  # when it was labelled, ISO 8601 (``2026-11-28T22:15:03Z``)

    @property
    def person(self) -> str:
        """Who labelled it: the annotator, else the source's ``by``."""
        return self.annotator or self.by

    @property
    def target(self) -> str:
        """What it labels, as a person reads it: ``turn 4``, ``verdict 2/1``, ``the result``."""
        if self.verdict_id is not None:
            return f"verdict {self.verdict_id}"
        return f"turn {self.turn}" if self.turn is not None else "the result"


#: A label record that cannot be used: where (file, line, record), which field, why — the input error of
#: every reader, so it prints the same way.
LabelError = InputError


class LabelsError(ValueError):
    """A labels file a command cannot use: its message names the file, line and field (``FILE:LINE: field: why``)."""


@dataclass
class LabelSet:
    """Labels read from files (and reviews), with the records that could not be used."""

    labels: list[Label] = field(default_factory=list)
    errors: list[LabelError] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)  # file -> the shape it was read as

    def extend(self, other: LabelSet) -> None:
        self.labels.extend(other.labels)
        self.errors.extend(other.errors)
        self.formats.update(other.formats)

    @classmethod
    def of(cls, labels: str | Path | Iterable[str | Path] | Iterable[Label] | LabelSet) -> LabelSet:
        """``labels`` as one set: label files (any shape :func:`read_labels` reads), :class:`Label` objects, or a
        set (itself)."""
        if isinstance(labels, LabelSet):
            return labels
        out = cls()
        for item in [labels] if isinstance(labels, (str, Path)) else labels:  # one file, not its characters
            if isinstance(item, Label):
                out.labels.append(item)
            else:
                out.extend(read_labels(item))
        return out


class _Bad(ValueError):
    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


#: The one label vocabulary of a yes/no verdict (``agree``, ``align``): a person's word, any case, is the judge's.
YES_WORDS = frozenset({"yes", "true", "relevant", "pass", "passed", "1"})
NO_WORDS = frozenset({"no", "false", "irrelevant", "fail", "failed", "0"})
YES_NO_WORDS = "yes/no, true/false, relevant/irrelevant, pass/fail, 1/0"


def polarity(value: object) -> str | None:
    """``"yes"`` or ``"no"`` for a word of the yes/no vocabulary (a bool, 1/0 too), else None."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        value = str(int(value)) if math.isfinite(value) and float(value).is_integer() else str(value)
    word = str(value).strip().lower()
    return "yes" if word in YES_WORDS else "no" if word in NO_WORDS else None


def yes_no_error(where: str, value: object, metric: str) -> LabelError:
    """The error of a label (read at ``where``) outside the yes/no vocabulary of ``metric``'s verdicts."""
    return LabelError(where or "labels", None, None, "label",
                      f"{json.dumps(value, default=str)} is not a word of {metric}'s yes/no verdicts"
                      f" ({YES_NO_WORDS})")


def label_value(value: object, where: str = "label") -> LabelValue:
    """A label as compared: a bool is ``"yes"`` / ``"no"``, a number a float, a string stripped."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise _Bad(where, f"{value!r} is not a finite number")
        return float(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise _Bad(where, f"must be a non-empty string, a number or true/false, got {json.dumps(value, default=str)[:80]}")


def _turn(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Bad(where, f"must be a turn number (1-based), got {json.dumps(value, default=str)[:80]}")
    return value


def _text(record: dict[str, Any], key: str, where: str | None = None) -> str:
    value = record.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise _Bad(where or key, "missing" if value is None else f"must be a non-empty string, got {value!r}")
    return value


def _metric(name: str) -> str:
    """A metric name from an assessment or feedback key: ``turn_relevancy/turn`` is ``turn_relevancy``."""
    return name[: -len("/turn")] if name.endswith("/turn") else name


# -- judgegraph's labels JSONL ---------------------------------------------------------------------------------

LABEL_FIELDS = frozenset({"conversation_id", "metric", "turn", "verdict_id", "label", "by", "note", "annotator", "time"})


def _time(value: object) -> str:
    """An ISO 8601 time, as written (a ``Z`` suffix too)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            datetime.fromisoformat(value.strip().removesuffix("Z") + ("+00:00" if value.strip().endswith("Z") else ""))
            return value.strip()
    raise _Bad("time", f"must be an ISO 8601 time (2026-11-28T22:15:03Z), got {json.dumps(value, default=str)[:80]}")


def _from_labels_record(record: dict[str, Any], source: str, field: str, metric: str | None, ids: bool) -> Label:
    """A labels JSONL record, or (``ids``) the offline fit's: ``id`` for ``conversation_id``, ``metric`` its metric."""
    cid = "id" if ids else "conversation_id"
    names = LABEL_FIELDS - {"label", "conversation_id"} | {field, cid}
    unknown = sorted(set(record) - names)
    if unknown and not ids:  # the offline fit's lines may carry more (a data set's scale, raters)
        raise _Bad(unknown[0], f"unknown field (a label has {', '.join(sorted(names))})")
    if field not in record:
        raise _Bad(field, "missing")
    if not isinstance(record.get(cid), str):  # a conversation id is a string, as in every conversations file
        raise _Bad(cid, "missing" if record.get(cid) is None else f"must be the conversation id (a string), "
                   f"got {json.dumps(record[cid], default=str)[:80]}")
    turn = None if record.get("turn") is None else _turn(record["turn"], "turn")
    verdict_id = None if record.get("verdict_id") is None else _text(record, "verdict_id")
    if turn is not None and verdict_id is not None:
        raise _Bad("turn", "give a turn or a verdict_id, not both")
    if ids and "metric" not in record and metric is not None:
        record = {**record, "metric": metric}
    return Label(conversation_id=_text(record, cid), metric=_text(record, "metric"),
                 value=label_value(record[field], field), turn=turn, verdict_id=verdict_id, source=source,
                 by=str(record.get("by") or ""), note=str(record.get("note") or ""),
                 annotator="" if record.get("annotator") is None else _text(record, "annotator"),
                 time="" if record.get("time") is None else _time(record["time"]))


# -- MLflow assessments ----------------------------------------------------------------------------------------

def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _meta(value: object) -> object:
    """MLflow keeps assessment metadata as strings (judgegraph JSON-encodes them): read one back."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return value


def _from_assessment(record: dict[str, Any], source: str, session: str | None,
                     overridden: dict[str, Any] | None = None) -> Label | None:
    """``overridden``: the metadata of the assessment this one overrides (``mlflow.override_feedback``): a person
    correcting judgegraph's feedback labels the conversation and turn that feedback was about."""
    src = _dict(record.get("source"))
    if str(src.get("source_type", "")).upper() != "HUMAN" or record.get("valid") is False:
        return None  # a judge's assessment (judgegraph's own included), or one a later one overrides
    body = _dict(record.get("feedback")) or _dict(record.get("expectation"))
    if not body:
        raise _Bad("feedback", "an assessment needs a feedback or an expectation")
    if body.get("error"):
        return None  # a feedback carrying an error holds no label
    body_name = "feedback" if "feedback" in record else "expectation"
    if body.get("value") is None:
        raise _Bad(f"{body_name}.value", "missing")
    meta = {**(overridden or {}), **_dict(record.get("metadata"))}
    # a session's conversation id is the session id; a trace outside any session is a conversation of its own
    cid = meta.get("conversation_id") or meta.get(MLFLOW_SESSION_KEY) or session or record.get("trace_id")
    if cid is None:
        raise _Bad("metadata.conversation_id", f"missing (nor {MLFLOW_SESSION_KEY}, nor a trace_id): "
                                                "which conversation it labels is unknown")
    turn = None
    if meta.get("turn") is not None:
        turn = _turn(_meta(meta["turn"]), "metadata.turn")
    elif meta.get("turns") is not None:  # judgegraph's own per-turn metadata: 0-based turn indices
        turns = _meta(meta["turns"])
        if not isinstance(turns, list) or not turns or not all(isinstance(t, int) for t in turns):
            raise _Bad("metadata.turns", f"must be a list of 0-based turn indices, got {meta['turns']!r}")
        turn = max(turns) + 1
    verdict_id = _meta(meta["verdict_id"]) if meta.get("verdict_id") is not None else None
    name = _text(record, "assessment_name")
    if name.endswith("/turn") and turn is None and verdict_id is None:
        raise _Bad("metadata.turn", f"a per-turn assessment ({name}) needs the turn it labels")
    return Label(conversation_id=str(_meta(cid)), metric=_metric(name),
                 value=label_value(body["value"], f"{body_name}.value"), turn=turn,
                 verdict_id=None if verdict_id is None else str(verdict_id),
                 source=source, by=str(src.get("source_id") or ""), note=str(record.get("rationale") or ""))


def _from_mlflow(record: dict[str, Any], source: str) -> Iterator[Label | _Bad]:
    info = record.get("info")
    if isinstance(info, dict):  # a trace: its assessments, with its session
        session = _dict(info.get("trace_metadata")).get(MLFLOW_SESSION_KEY)
        assessments = [a for a in info.get("assessments") or [] if isinstance(a, dict)]
        metadata = {a.get("assessment_id"): _dict(a.get("metadata")) for a in assessments}
        for i, assessment in enumerate(assessments):
            try:
                label = _from_assessment(assessment, source, session, metadata.get(assessment.get("overrides")))
                if label is not None:
                    yield label
            except _Bad as bad:
                yield _Bad(f"info.assessments[{i}].{bad.field}", bad.message)
        return
    label = _from_assessment(record, source, None)
    if label is not None:
        yield label


# -- LangSmith feedback ----------------------------------------------------------------------------------------

def _from_langsmith(record: dict[str, Any], source: str) -> Label | None:
    fb_source = _dict(record.get("feedback_source"))
    if fb_source.get("type") == "model":
        return None  # an evaluator's feedback: a judge, not a person
    extra = _dict(record.get("extra"))
    cid = extra.get("conversation_id", record.get("conversation_id"))
    if cid is None:
        raise _Bad("extra.conversation_id", "missing: a LangSmith feedback names its run, not its conversation; put "
                                            "the conversation id in extra.conversation_id (or conversation_id)")
    value = record.get("value") if record.get("value") is not None else record.get("score")
    if value is None:
        raise _Bad("value", "missing (and no score)")
    turn = extra.get("turn", record.get("turn"))
    verdict_id = extra.get("verdict_id", record.get("verdict_id"))
    return Label(conversation_id=str(cid), metric=_metric(_text(record, "key")), value=label_value(value, "value"),
                 turn=None if turn is None else _turn(turn, "extra.turn"),
                 verdict_id=None if verdict_id is None else str(verdict_id), source=source,
                 by=str(fb_source.get("user_name") or fb_source.get("type") or ""),
                 note=str(record.get("comment") or ""))


# -- reading ---------------------------------------------------------------------------------------------------

def shape_of(record: dict[str, Any]) -> Source:
    """Which kind of label record this is."""
    if "info" in record or "assessment_name" in record:
        return "mlflow"
    if "key" in record and ("run_id" in record or "feedback_source" in record or "trace_id" in record):
        return "langsmith"
    return "ids" if "id" in record and "conversation_id" not in record else "labels"


def _records(path: Path) -> Iterator[tuple[int | None, int, object]]:
    """(line or None, record index, record) of a JSON list/object file or a JSONL file."""
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            whole = json.loads(text)
        except (ValueError, RecursionError):
            whole = None  # JSONL (or broken): read line by line below
        if isinstance(whole, list):
            yield from ((None, i, item) for i, item in enumerate(whole))
            return
        if isinstance(whole, dict):  # one record, maybe pretty-printed (a trace as Trace.to_json writes it)
            blank_lines = text[: len(text) - len(stripped)].count("\n")
            yield (blank_lines + 1 if "\n" not in stripped.strip() else None), 0, whole
            return
    index = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            yield lineno, index, _Bad(None, f"not JSON ({exc})")
        else:
            yield lineno, index, item
        index += 1


def read_labels(path: str | Path, *, field: str = "label", metric: str | None = None) -> LabelSet:
    """Every label of ``path`` (labels JSONL, the offline fit's lines, MLflow traces/assessments, or LangSmith
    feedback; see the module): the one reader of a labels file, for every command. ``field``: the label's field in
    a labels JSONL line; ``metric``: the metric of the lines that name none (the offline fit's). Records that
    cannot be used are listed in ``errors``; a missing or unreadable file raises ``OSError``."""
    p = Path(path)
    out = LabelSet()
    shape: Source | None = None
    for line, index, item in _records(p):
        where = f"{p}:{line}" if line is not None else f"{p}[{index}]"
        try:
            if isinstance(item, _Bad):
                raise item
            if not isinstance(item, dict):
                raise _Bad(None, f"a label record is a JSON object, got {type(item).__name__}")
            kind = shape_of(item)
            shape = shape or kind
            if kind != shape:
                raise _Bad(None, f"a {kind} record in a file of {shape} records")
            if kind in ("labels", "ids"):
                out.labels.append(_from_labels_record(item, where, field, metric, kind == "ids"))
            elif kind == "langsmith":
                if (label := _from_langsmith(item, where)) is not None:
                    out.labels.append(label)
            else:
                for got in _from_mlflow(item, where):
                    if isinstance(got, _Bad):
                        out.errors.append(LabelError(str(p), line, index, got.field, got.message))
                    else:
                        out.labels.append(got)
        except _Bad as bad:
            out.errors.append(LabelError(str(p), line, index, bad.field, bad.message))
    out.formats[str(p)] = shape or "labels"
    return out


def usable(read: LabelSet) -> list[Label]:
    """``read``'s labels, for a command that needs every record: :class:`LabelsError` naming the ones that cannot
    be used (``FILE:LINE: field: why``, one a line, 20 at most)."""
    if read.errors:
        raise LabelsError("labels that cannot be used:\n" + "\n".join(f"  {e}" for e in read.errors[:20]))
    return read.labels


def review_labels(records: Iterable[ConversationLine]) -> list[Label]:
    """The review decisions of a run's conversation lines (:attr:`judgegraph.runs.RunFile.conversations`) as
    labels: a reviewed verdict's ``verdict`` is the person's decision (``review.judge_verdict`` what the judge had
    said)."""
    return [Label(conversation_id=record.conversation_id, metric=key, value=label_value(v.verdict),
                  verdict_id=str(v.id), source="review", by=v.review.by or "human", note=v.review.note or "")
            for record in records for key, result in record.results.items() for v in result.verdicts
            if v.review is not None and v.verdict is not None and v.id is not None]
