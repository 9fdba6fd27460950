"""promptfoo files mean what they mean in promptfoo (issue 8.2-8.4)."""

from __future__ import annotations

import asyncio
import os
import tracemalloc

import pytest
import yaml

from judgegraph.data.results import MetricResult
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.loaders import load_file
from judgegraph.loaders.formats.promptfoo import negate_result
from judgegraph.loaders.limits import Limits
from judgegraph.runs.runner import MetricPlan, evaluate_async

YES = {"reason": "It answers the question.", "verdict": "yes"}
NO = {"reason": "It talks about something else.", "verdict": "no"}


def write(tmp_path, doc, name="promptfooconfig.yaml"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def judge(*rules, default=YES):
    model = ScriptedChatModel(rules=list(rules), default=default, section="reply_to_judge")
    return resolve_judge(model=model, max_tries=1), model


def run(path, *rules, default=YES):
    loaded = load_file(path)
    assert loaded.errors == []
    j, model = judge(*rules, default=default)
    summary = asyncio.run(evaluate_async(loaded.conversations, MetricPlan(None, j)))
    return {o.conversation_id: o.results for o in summary.outcomes}, model


CONV = [{"input": "Where is my parcel?", "output": "It ships tomorrow."},
        {"input": "Can I pay by card?", "output": "The weather is nice."}]


def pf_test(description, *asserts, **vars_):
    return {"tests": [{"description": description, "vars": {"_conversation": CONV, **vars_}, "assert": list(asserts)}]}


# -- 8.2 not-conversation-relevance and several assertions --------------------------


def test_negated_assertion_passes_when_the_metric_fails(tmp_path):
    path = write(tmp_path, pf_test("off topic", {"type": "not-conversation-relevance", "threshold": 0.8}))
    (item,) = load_file(path).conversations
    assert item.assertions == ({"metric": "conversation_relevance", "negate": True, "threshold": 0.8,
                                "key": "not-conversation-relevance"},)
    results, _ = run(path, ("weather", [NO]))
    (res,) = results["off-topic"].values()
    # relevancy 1/2 = 0.5 fails threshold 0.8, so the negated assertion passes; promptfoo reports 1 - score
    assert res.key == "not-conversation-relevance"
    assert (res.status, res.passed, res.score) == ("passed", True, 0.5)
    assert res.details["metric_score"] == 0.5 and "negated" in res.reason


def test_negated_assertion_fails_when_the_metric_passes(tmp_path):
    path = write(tmp_path, pf_test("on topic", {"type": "not-conversation-relevance", "threshold": 0.5}))
    results, _ = run(path)
    (res,) = results["on-topic"].values()
    assert (res.status, res.passed, res.score) == ("failed", False, 0.0)


@pytest.mark.parametrize(("score", "threshold", "passed"), [
    (0.5, 0.5, False),  # at the threshold: the metric passes, so its negation fails
    (0.0, 0.0, False),  # threshold 0: the negation can never pass
    (1.0, 1.0, False),
    (0.5, 1.0, True),   # strictly below: passes
    (0.49, 0.5, True),
    (0.5 - 1e-17, 0.5, False),  # within promptfoo's Number.EPSILON of the threshold counts as reaching it
])
def test_negated_assertion_passes_only_strictly_below_the_threshold_as_promptfoo(score, threshold, passed):
    # promptfoo 0.121.20, src/external/assertions/deepeval.ts: pass = score >= threshold - Number.EPSILON !== inverse
    base = MetricResult(key="k", conversation_id="c", score=score, threshold=threshold, passed=score >= threshold,
                        status="passed" if score >= threshold else "failed", reason="r", judge="j")
    out = negate_result(base)
    assert (out.passed, out.status) == (passed, "passed" if passed else "failed")
    assert out.score == pytest.approx(1 - score)


@pytest.mark.parametrize("status", ["error", "not_applicable"])
def test_a_result_that_could_not_be_judged_is_never_flipped(status):
    base = MetricResult(key="k", conversation_id="c", score=None, threshold=0.5, passed=None, status=status,
                        reason="judge down", judge="j")
    out = negate_result(base)
    assert (out.status, out.passed, out.score) == (status, None, None) and "not flipped" in out.reason


def test_two_assertions_in_one_test_both_run(tmp_path):
    path = write(tmp_path, pf_test("both", {"type": "conversation-relevance", "threshold": 0.5},
                                {"type": "conversation-relevance", "threshold": 0.9, "config": {"windowSize": 1}},
                                {"type": "not-conversation-relevance", "threshold": 0.9}))
    results, _ = run(path, ("weather", [NO]))
    res = results["both"]
    assert sorted(res) == ["conversation-relevance#2", "conversation_relevance", "not-conversation-relevance"]
    assert (res["conversation_relevance"].status, res["conversation_relevance"].threshold) == ("passed", 0.5)
    assert (res["conversation-relevance#2"].status, res["conversation-relevance#2"].threshold) == ("failed", 0.9)
    assert res["not-conversation-relevance"].status == "passed"


def test_default_test_assertions_and_the_tests_own_both_run(tmp_path):
    # promptfoo 0.121.20 prepareTestCaseForEval: assert = [...defaultTest.assert, ...test.assert]
    doc = {"defaultTest": {"assert": [{"type": "conversation-relevance", "threshold": 0.5}]},
           **pf_test("both", {"type": "conversation-relevance", "threshold": 0.9, "config": {"windowSize": 1}})}
    path = write(tmp_path, doc)
    (item,) = load_file(path).conversations
    assert item.assertions == ({"metric": "conversation_relevance", "threshold": 0.5},
                               {"metric": "conversation_relevance", "threshold": 0.9, "window_size": 1,
                                "key": "conversation-relevance#2"})
    results, _ = run(path, ("weather", [NO]))
    res = results["both"]
    assert (res["conversation_relevance"].status, res["conversation_relevance"].threshold) == ("passed", 0.5)
    assert (res["conversation-relevance#2"].status, res["conversation-relevance#2"].threshold) == ("failed", 0.9)


def test_disable_default_asserts_runs_only_the_tests_own(tmp_path):
    doc = {"defaultTest": {"assert": [{"type": "not-conversation-relevance", "threshold": 0.5}],
                           "options": {"rubricPrompt": "Be strict."}},
           "tests": [{"description": "own only", "vars": {"_conversation": CONV},
                      "options": {"disableDefaultAsserts": True},
                      "assert": [{"type": "conversation-relevance", "threshold": 0.7}]},
                     {"description": "defaults only", "vars": {"_conversation": CONV}}]}
    own, defaults = load_file(write(tmp_path, doc)).conversations
    # options still merge (the test's winning); only defaultTest.assert is dropped
    assert own.assertions == ({"metric": "conversation_relevance", "threshold": 0.7, "rubric": "Be strict."},)
    assert defaults.assertions == ({"metric": "conversation_relevance", "negate": True, "threshold": 0.5,
                                    "rubric": "Be strict.", "key": "not-conversation-relevance"},)


# -- 8.3 _conversation: [] and promptfoo's own item keys ----------------------------


def test_empty_conversation_falls_back_to_prompt_and_output(tmp_path):
    path = write(tmp_path, {"prompts": ["Answer: {{question}}"], "tests": [
        {"vars": {"_conversation": [], "question": "Where is my parcel?"}, "output": "It ships tomorrow."}]})
    (item,) = load_file(path).conversations
    assert [(t.role, t.content) for t in item.conversation.turns] == [
        ("user", "Answer: Where is my parcel?"), ("assistant", "It ships tomorrow.")]


def test_conversation_items_with_prompt_key_and_object_output(tmp_path):
    path = write(tmp_path, {"tests": [{"vars": {"_conversation": [
        {"prompt": "Where is my parcel?", "output": {"status": "shipped", "eta": "tomorrow"}},
        {"input": "Thanks", "prompt": "ignored when input is given", "output": "You're welcome."}]}}]})
    res = load_file(path)
    assert res.errors == []
    turns = [(t.role, t.content) for t in res.conversations[0].conversation.turns]
    assert turns == [("user", "Where is my parcel?"), ("assistant", '{"status": "shipped", "eta": "tomorrow"}'),
                     ("user", "Thanks"), ("assistant", "You're welcome.")]


# -- 8.4 rubricPrompt: file:// and templates -----------------------------------------


def rubric_test(rubric: str, **vars_) -> dict:
    return pf_test("r", {"type": "conversation-relevance", "rubricPrompt": rubric}, **vars_)


def test_rubric_file_is_read_relative_to_the_config_folder(tmp_path):
    write(tmp_path, "Judge strictly: shipping questions only.\n", name="cfg/rubrics/strict.txt")
    path = write(tmp_path, rubric_test("file://rubrics/strict.txt"), name="cfg/promptfooconfig.yaml")
    (item,) = load_file(path).conversations
    assert item.options["rubric"] == "Judge strictly: shipping questions only.\n"
    _, model = run(path)
    assert all("Judge strictly: shipping questions only." in p for p in model.prompts)


def test_rubric_file_outside_the_config_folder_is_refused_unless_allowed(tmp_path, monkeypatch):
    write(tmp_path, "secret\n", name="outside.txt")
    path = write(tmp_path, rubric_test("file://../outside.txt"), name="cfg/promptfooconfig.yaml")
    res = load_file(path)
    (err,) = res.errors
    line = path.read_text().splitlines().index("    rubricPrompt: file://../outside.txt") + 1
    assert err.line == line and err.field == "tests.0.assert.0.rubricPrompt"
    assert "leaves the folder" in err.message and "--allow-outside-files" in err.message
    assert load_file(path, allow_outside_files=True).conversations[0].options["rubric"] == "secret\n"
    monkeypatch.setenv("JUDGEGRAPH_ALLOW_OUTSIDE_FILES", "1")
    assert load_file(path).errors == []


def test_missing_rubric_file_is_an_input_error(tmp_path):
    path = write(tmp_path, rubric_test("file://nope.txt"))
    (err,) = load_file(path).errors
    assert "cannot read file://nope.txt" in err.message


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_rubric_file_that_is_a_fifo_or_a_folder_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe.txt")  # nothing ever writes to it: reading it would wait forever
    (tmp_path / "folder").mkdir()
    doc = {"tests": [rubric_test("file://pipe.txt")["tests"][0], rubric_test("file://folder")["tests"][0]]}
    path = write(tmp_path, doc)
    fifo, folder = load_file(path).errors  # the old reader hung here on the FIFO
    assert fifo.field == "tests.0.assert.0.rubricPrompt" and fifo.line is not None
    assert fifo.message == "file://pipe.txt is a FIFO (named pipe), not a regular file: refused [promptfoo format]"
    assert folder.field == "tests.1.assert.0.rubricPrompt"
    assert folder.message == "file://folder is a directory, not a regular file: refused [promptfoo format]"


def test_rubric_file_over_the_limit_is_refused_by_its_size_unread(tmp_path):
    with (tmp_path / "huge.txt").open("wb") as fh:
        fh.truncate(50_000_000)  # sparse: 50 MB by its size, no disk used
    path = write(tmp_path, rubric_test("file://huge.txt"))
    tracemalloc.start()
    try:
        (err,) = load_file(path, limits=Limits(max_record_chars=1000)).errors
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # the old reader held all 50 MB before comparing
    assert err.message == "file://huge.txt is larger than 1,000 bytes (50,000,000 bytes): refused [promptfoo format]"


def test_inline_rubric_fills_test_vars_in_one_pass(tmp_path):
    path = write(tmp_path, rubric_test("Only {{topic}} questions count.", topic="{{ messages }} shipping"))
    (item,) = load_file(path).conversations
    # the value is inserted once and never rendered again, so its own braces stay as written
    assert item.options["rubric"] == "Only {{ messages }} shipping questions count."


def test_inline_rubric_with_messages_placeholder_is_refused(tmp_path):
    path = write(tmp_path, rubric_test("Is the last reply relevant? {{ messages }}"))
    res = load_file(path)
    assert res.conversations == []
    (err,) = res.errors
    assert err.field == "tests.0.assert.0.rubricPrompt" and "{{ messages }}" in err.message


@pytest.mark.parametrize(("assertion", "field", "message"), [
    ({"threshold": 1.5}, "assert.0.threshold", "threshold must be between 0 and 1, got 1.5"),
    ({"threshold": "high"}, "assert.0.threshold", "threshold must be a number between 0 and 1, got 'high'"),
    ({"threshold": True}, "assert.0.threshold", "threshold must be a number between 0 and 1, got True"),
    ({"config": {"windowSize": 0}}, "assert.0.config.windowSize", "windowSize must be a whole number >= 1, got 0"),
    ({"config": {"windowSize": 2.5}}, "assert.0.config.windowSize", "windowSize must be a whole number >= 1, got 2.5"),
])
def test_a_bad_threshold_or_window_size_is_the_message_a_metric_gives_at_its_field(tmp_path, assertion, field, message):
    # checked by judgegraph.core.scoring, as the metric's own settings are: one message (the file's field named)
    path = write(tmp_path, pf_test("bad", {"type": "conversation-relevance", **assertion}))
    [error] = load_file(path).errors
    assert (error.field, error.message) == (f"tests.0.{field}", f"{message} [promptfoo format]")
