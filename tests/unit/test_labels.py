"""People's labels read from a labels JSONL file, MLflow assessments and LangSmith feedback (real objects of
both SDKs, written as their exports write them), with errors that name the file, line and field."""

from __future__ import annotations

import json
import uuid

import pytest

from judgegraph.trust.labels import Label, read_labels


def write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_labels_jsonl_reads_turns_verdict_ids_results_and_bools(tmp_path):
    got = read_labels(write(tmp_path / "l.jsonl", [
        {"conversation_id": "c1", "metric": "turn_relevancy", "turn": 4, "label": "no", "by": "ann"},
        {"conversation_id": "c1", "metric": "role_adherence", "verdict_id": "3", "label": True},
        "",
        {"conversation_id": "7", "metric": "rating", "label": 4},
    ]))
    assert got.errors == [] and got.formats == {str(tmp_path / "l.jsonl"): "labels"}
    assert got.labels == [
        Label("c1", "turn_relevancy", "no", turn=4, source=f"{tmp_path / 'l.jsonl'}:1", by="ann"),
        Label("c1", "role_adherence", "yes", verdict_id="3", source=f"{tmp_path / 'l.jsonl'}:2"),
        Label("7", "rating", 4.0, source=f"{tmp_path / 'l.jsonl'}:4"),
    ]


@pytest.mark.parametrize(("record", "field", "message"), [
    ({"metric": "m", "label": "yes"}, "conversation_id", "missing"),
    ({"conversation_id": "c", "metric": "m"}, "label", "missing"),
    ({"conversation_id": "c", "metric": "m", "label": None}, "label", "must be a non-empty string"),
    ({"conversation_id": "c", "metric": "m", "label": "yes", "turn": 0}, "turn", "must be a turn number (1-based)"),
    ({"conversation_id": "c", "metric": "m", "label": "yes", "turn": 2, "verdict_id": "2"}, "turn", "not both"),
    ({"conversation_id": "c", "metric": "m", "label": "yes", "turns": [2]}, "turns", "unknown field"),
    ({"conversation_id": "c", "metric": "m", "label": 1e999}, "label", "not a finite number"),
    # where the offline fit's reader was the stricter, the one reader is too
    ({"conversation_id": 7, "metric": "m", "label": "yes"}, "conversation_id", "must be the conversation id (a string)"),
    ({"conversation_id": "c", "metric": "m", "label": "yes", "turn": "2"}, "turn", "must be a turn number (1-based)"),
])
def test_a_bad_label_record_names_file_line_and_field_and_the_others_are_kept(tmp_path, record, field, message):
    path = write(tmp_path / "l.jsonl", [{"conversation_id": "c", "metric": "m", "label": "yes"}, record, "{oops"])
    got = read_labels(path)
    assert len(got.labels) == 1
    bad, broken = got.errors
    assert (bad.file, bad.line, bad.field) == (str(path), 2, field) and message in bad.message
    assert str(bad).startswith(f"{path}:2: {field}: ")
    assert (broken.line, broken.field) == (3, None) and "not JSON" in broken.message


def test_mlflow_traces_and_assessments_as_mlflow_writes_them(tmp_path):
    from mlflow.entities import (
        AssessmentSource,
        Expectation,
        Feedback,
        Trace,
        TraceData,
        TraceInfo,
        TraceLocation,
        TraceState,
    )

    human = AssessmentSource(source_type="HUMAN", source_id="ann")
    per_turn = Feedback(name="turn_relevancy/turn", value="no", source=human, trace_id="tr-2", metadata={"turn": "5"})
    session = Feedback(name="user_frustration", value="unresolved", source=human, trace_id="tr-1")
    judge = Feedback(name="user_frustration", value="none", trace_id="tr-1",
                     source=AssessmentSource(source_type="LLM_JUDGE", source_id="llm:gpt"))
    info = TraceInfo(trace_id="tr-1", trace_location=TraceLocation.from_experiment_id("0"), request_time=0,
                     state=TraceState.OK, trace_metadata={"mlflow.trace.session": "s1"},
                     assessments=[per_turn, session, judge])
    traces = tmp_path / "traces.json"
    traces.write_text(json.dumps([Trace(info=info, data=TraceData(spans=[])).to_dict()]))
    got = read_labels(traces)
    assert got.errors == [] and got.formats[str(traces)] == "mlflow"
    assert [(lb.conversation_id, lb.metric, lb.value, lb.turn, lb.by) for lb in got.labels] == [
        ("s1", "turn_relevancy", "no", 5, "ann"), ("s1", "user_frustration", "unresolved", None, "ann")]

    expected = Expectation(name="rating", value=4, source=human, trace_id="tr-9", metadata={"conversation_id": "c9"})
    own = Feedback(name="rating", value=2, source=human, trace_id="tr-8")  # a trace of its own: its conversation
    nowhere = {**own.to_dictionary(), "trace_id": None}
    flat = write(tmp_path / "assessments.jsonl", [expected.to_dictionary(), own.to_dictionary(), nowhere])
    got = read_labels(flat)
    assert [(lb.conversation_id, lb.metric, lb.value) for lb in got.labels] == [("c9", "rating", 4.0),
                                                                                 ("tr-8", "rating", 2.0)]
    (bad,) = got.errors
    assert (bad.line, bad.field) == (3, "metadata.conversation_id")


def test_langsmith_feedback_as_the_sdk_dumps_it(tmp_path):
    from datetime import datetime, timezone
    from functools import partial

    from langsmith import schemas

    run, now = uuid.uuid4(), datetime.now(timezone.utc)
    Feedback = partial(schemas.Feedback, created_at=now, modified_at=now, trace_id=run)
    FeedbackSourceBase = schemas.FeedbackSourceBase
    person = Feedback(id=uuid.uuid4(), run_id=run, key="turn_relevancy/turn", score=0, value="no", comment="off topic",
                      extra={"conversation_id": "c1", "turn": 4}, feedback_source=FeedbackSourceBase(type="app"))
    scored = Feedback(id=uuid.uuid4(), run_id=run, key="rating", score=3, extra={"conversation_id": "c2"})
    model_fb = Feedback(id=uuid.uuid4(), run_id=run, key="rating", score=1, extra={"conversation_id": "c2"},
                        feedback_source=FeedbackSourceBase(type="model"))
    unmapped = Feedback(id=uuid.uuid4(), run_id=run, key="rating", score=3)
    path = tmp_path / "feedback.json"
    path.write_text(json.dumps([f.model_dump(mode="json") for f in (person, scored, model_fb, unmapped)]))
    got = read_labels(path)
    assert got.formats[str(path)] == "langsmith"
    assert [(lb.conversation_id, lb.metric, lb.value, lb.turn, lb.note) for lb in got.labels] == [
        ("c1", "turn_relevancy", "no", 4, "off topic"), ("c2", "rating", 3.0, None, "")]
    (bad,) = got.errors
    assert (bad.line, bad.record, bad.field) == (None, 3, "extra.conversation_id")
    assert str(bad).startswith(f"{path}: record 3: extra.conversation_id: missing")


def test_a_file_mixing_label_shapes_is_refused_record_by_record(tmp_path):
    got = read_labels(write(tmp_path / "mixed.jsonl", [
        {"conversation_id": "c", "metric": "m", "label": "yes"},
        {"key": "m", "run_id": "r", "value": "no", "extra": {"conversation_id": "c"}}]))
    assert len(got.labels) == 1 and got.errors[0].line == 2 and "langsmith record in a file of labels" in got.errors[0].message


def test_one_pretty_printed_record_is_read_whole(tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"conversation_id": "c", "metric": "m", "label": "no"}, indent=2))
    got = read_labels(path)
    assert got.errors == [] and [(lb.conversation_id, lb.value, lb.source) for lb in got.labels] == [
        ("c", "no", f"{path}[0]")]
