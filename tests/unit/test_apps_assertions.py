"""assert_judged: a readable AssertionError naming failing turns and reasons."""

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from judgegraph.apps import JudgementFailed, assert_judged
from judgegraph.judges.scripted import ScriptedChatModel

YES = {"reason": "It answers the question.", "verdict": "yes"}
NO = {"reason": "It talks about Paris, not arithmetic.", "verdict": "no"}
MATH = [
    HumanMessage("What is 2+2?"), AIMessage("2+2 equals 4."),
    HumanMessage("What about 3+3?"), AIMessage("The capital of France is Paris."),
    HumanMessage("Can you solve 5+5?"), AIMessage("5+5 equals 10."),
]


def judge(**kw):
    return ScriptedChatModel(rules=[("Paris", [NO])], default=YES, section="reply_to_judge", **kw)


def test_passing_conversation_returns_its_results():
    results = assert_judged(MATH[:2], "turn_relevancy", model=judge())
    assert results["turn_relevancy"].status == "passed"


def test_two_thirds_relevant_passes_the_default_threshold():
    results = assert_judged(MATH, "turn_relevancy", model=judge())
    assert results["turn_relevancy"].score == pytest.approx(2 / 3)


def test_failure_names_the_turn_the_reply_and_the_reason():
    from judgegraph.metrics.relevancy import create_turn_relevancy_metric

    with pytest.raises(JudgementFailed) as info:
        assert_judged({"messages": MATH}, create_turn_relevancy_metric(model=judge(), threshold=0.8), id="math-1")
    assert isinstance(info.value, AssertionError)
    lines = str(info.value).splitlines()
    assert lines[0] == "1 of 1 metric(s) did not pass for conversation 'math-1':"
    assert lines[1] == "turn_relevancy: failed, score 0.67 (threshold 0.80)"
    assert lines[2] == '  - turn 4 "The capital of France is Paris.": It talks about Paris, not arithmetic.'
    assert len(lines) == 3  # the relevant turns are not listed


def test_judge_errors_fail_the_assertion_and_are_named():
    broken = ScriptedChatModel(default="not json", section="reply_to_judge")
    with pytest.raises(JudgementFailed) as info:
        assert_judged(MATH[:2], "turn_relevancy", model=broken)
    text = str(info.value)
    assert "turn_relevancy: error, no score" in text and "judge error at window 0 (turn 2)" in text


def test_nothing_to_judge_passes_unless_refused():
    only_user = [HumanMessage("hello?")]
    assert assert_judged(only_user, "turn_relevancy", model=judge())["turn_relevancy"].status == "not_applicable"
    with pytest.raises(JudgementFailed, match="not_applicable"):
        assert_judged(only_user, "turn_relevancy", model=judge(), allow_not_applicable=False)


def test_langchains_tuple_shorthand_is_read_as_messagesstate_reads_it():
    shorthand = [("user", "What is 2+2?"), ("assistant", "2+2 equals 4."),
                 ("human", "What about 3+3?"), ("ai", "The capital of France is Paris.")]
    res = assert_judged(shorthand, "turn_relevancy", model=judge())["turn_relevancy"]
    assert [(v.verdict, v.turns) for v in res.verdicts] == [("yes", [1]), ("no", [3])]
    with pytest.raises(JudgementFailed, match="turn 2"):
        assert_judged({"messages": shorthand[2:]}, "turn_relevancy", model=judge(), id="tuples")


def test_a_metric_graph_reads_the_tuple_shorthand():
    from judgegraph.metrics.relevancy import create_turn_relevancy_metric

    out = create_turn_relevancy_metric(model=judge()).invoke(
        {"messages": [("user", "What about 3+3?"), ("assistant", "The capital of France is Paris.")]})
    res = out["results"]["turn_relevancy"]
    assert (res.status, [v.verdict for v in res.verdicts]) == ("failed", ["no"])


def test_a_message_of_no_known_shape_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"messages\[1\]: .*int"):
        assert_judged([("user", "Hi"), 42], "turn_relevancy", model=judge())
