"""judgegraph.core.verdicts: what every metric's judge step makes of an outcome and shows of an exchange."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from judgegraph.core.verdicts import (
    NO_CONTEXT,
    NO_USER,
    answer,
    answer_fields,
    exchange_values,
    list_answer,
    window_verdict,
    window_where,
)
from judgegraph.data.conversation import as_conversation
from judgegraph.data.results import JudgeAttempt, Usage, WindowVerdict
from judgegraph.data.windows import exchanges, windows_from_exchanges
from judgegraph.judges.base import JudgeOutcome
from judgegraph.metrics.relevancy import TurnVerdict
from judgegraph.metrics.session.role import RoleJudgement, TurnRole
from judgegraph.metrics.topic import TopicFound, TopicJudgement


def _windows():
    conversation = as_conversation({"id": "c", "turns": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Opening hours?"}, {"role": "assistant", "content": "9 to 5."},
    ]})
    return windows_from_exchanges(conversation, exchanges(conversation), 2)


def test_answer_fields_of_an_answer_and_of_a_judge_error():
    attempt = JudgeAttempt(step="turn_relevancy/judge_turn", reply="{}")
    ok = JudgeOutcome(TurnVerdict(reason="On topic.", verdict="yes"), None, 1, Usage(calls=1), score=0.8,
                      transcript=[attempt])
    assert answer(ok) == ok.value
    assert answer_fields(ok) == {"verdict": "yes", "reason": "On topic.", "error": None, "attempts": 1,
                                 "usage": Usage(calls=1), "score": 0.8, "transcript": [attempt]}
    failed = JudgeOutcome(TurnVerdict(reason="half", verdict="no"), "invalid output", 2, Usage(calls=2))
    assert answer(failed) is None  # a value with an error is no answer: never scored
    fields = answer_fields(failed)
    assert (fields["verdict"], fields["reason"], fields["error"], fields["attempts"]) == (None, "", "invalid output", 2)
    assert answer_fields(JudgeOutcome(None))["error"] == "no verdict"


def test_window_verdict_holds_the_window_its_reply_and_the_metric_s_own_fields():
    first, second = _windows()
    ok = JudgeOutcome(TurnVerdict(reason="Answers it.", verdict="yes"), None, 1)
    v = window_verdict(WindowVerdict, second, ok)
    assert (v.window, v.turns, v.reply, v.verdict, v.reason) == (1, [4], "9 to 5.", "yes", "Answers it.")
    assert window_where(v) == "window 1 (turn 5)"

    class Tagged(WindowVerdict):
        tags: list[str] = Field(default_factory=list)

    failed = window_verdict(Tagged, first, JudgeOutcome(None, "boom", 3), tags=["x"])
    assert (failed.window, failed.turns, failed.verdict, failed.error, failed.attempts, failed.tags) == (
        0, [2], None, "boom", 3, ["x"])


def test_exchange_values_say_what_is_missing():
    assert exchange_values("", []) == {"context": NO_CONTEXT, "user_message": NO_USER}
    assert exchange_values("Hi", [("user", "a"), ("assistant", "b")], ["Be brief.", "Be kind."]) == {
        "system": "Be brief.\n\nBe kind.", "context": "[user]\na\n\n[assistant]\nb", "user_message": "Hi"}
    assert exchange_values("Hi", [], [])["system"] == "(none)"
    assert list(exchange_values("Hi", [], []))[0] == "system"  # the prompt's order: system, context, user message


@pytest.mark.parametrize(("made", "item", "field", "doc"), [
    (RoleJudgement, TurnRole, "verdicts", None),
    (TopicJudgement, TopicFound, "topics", TopicJudgement.__doc__),
])
def test_list_answer_is_the_schema_of_the_class_written_out(made, item, field, doc):
    description = made.model_fields[field].description
    written = type(made.__name__, (BaseModel,), {
        "__doc__": doc, "__annotations__": {field: list[item]}, field: Field(description=description)})
    assert made.model_json_schema() == written.model_json_schema()
    fresh = list_answer(made.__name__, field, item, description, module=__name__, doc=doc)
    assert fresh.model_json_schema() == written.model_json_schema() and fresh.__module__ == __name__
    assert made.__module__.startswith("judgegraph.metrics.")
    assert made.model_validate({field: []}) is not None
    with pytest.raises(ValueError):
        made.model_validate({})
