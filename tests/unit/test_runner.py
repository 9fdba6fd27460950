"""The runner's durable-run parts: streamed input with a bounded number in
flight, counters instead of every outcome, the results file (resume, torn
lines, transcripts kept or not), transcripts read back, prices."""

from __future__ import annotations

import asyncio
import json

import pytest

from judgegraph.cost.pricing import lookup, prices_for
from judgegraph.data.conversation import Conversation
from judgegraph.data.results import JudgeAttempt, MetricResult, Usage, Verdict
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.loaders import InputError, LoadedConversation
from judgegraph.outputs.transcripts import transcript_of
from judgegraph.runs import filter_transcripts, read_run
from judgegraph.runs.resultsfile import ResultsFileError, ResultsWriter, scan_results
from judgegraph.runs.runner import (
    ConversationOutcome,
    MetricPlan,
    RunSummary,
    evaluate_async,
    evaluate_to_file,
    judge_conversation,
)

YES = {"reason": "on topic", "verdict": "yes"}
NO = {"reason": "off topic", "verdict": "no"}


def item(i: int, reply: str = "answer") -> LoadedConversation:
    conv = Conversation.model_validate({"id": f"c{i}", "turns": [
        {"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"{reply} {i}"}]})
    return LoadedConversation(conversation=conv, source=f"test:{i}", format="judgegraph")


def plan(model=None) -> MetricPlan:
    model = model or ScriptedChatModel(rules=[("OFF", [NO])], default=YES, section="reply_to_judge")
    return MetricPlan(["turn_relevancy"], resolve_judge(model=model))


def test_input_is_read_as_it_is_judged_with_a_bounded_number_in_flight():
    pulled, finished, most = 0, 0, 0

    def items():
        nonlocal pulled, most
        for i in range(60):
            pulled += 1
            most = max(most, pulled - finished)
            yield item(i)

    def done(_outcome):
        nonlocal finished
        finished += 1

    summary = asyncio.run(evaluate_async(items(), plan(), max_conversations=5, on_outcome=done))
    assert summary.conversations == finished == 60
    assert most <= 6  # never a task per conversation up front: at most 5 in flight + the one being read


def test_a_run_keeps_what_existed_before_it_out_of_full_collections_and_gives_it_back_after():
    import gc

    frozen = []

    def done(_outcome):
        frozen.append(gc.get_freeze_count())

    asyncio.run(evaluate_async([item(i) for i in range(3)], plan(), on_outcome=done))
    assert len(frozen) == 3 and min(frozen) > 0  # while the run goes: the objects made before it frozen
    assert gc.get_freeze_count() == 0  # after it: collected as before (nothing kept for good)


def test_a_run_of_one_metric_runs_that_metric_and_of_two_their_report():
    one = plan()
    two = MetricPlan(["turn_relevancy", "conversation_relevance"], one.judge)
    assert one.graph_for(item(0)).name == "turn_relevancy" and one.report_for(item(0)).name == "report"
    assert two.graph_for(item(0)) is two.report_for(item(0))
    first, second = (asyncio.run(judge_conversation(item(0, "OFF"), p)).results["turn_relevancy"] for p in (one, two))
    assert (first.score, first.status, first.reason) == (second.score, second.status, second.reason) == (
        0.0, "failed", first.reason) and "off topic" in first.reason  # the same result without the report


def test_the_summary_keeps_counters_and_a_bounded_set_of_rows_failures_first():
    items = [item(i, "OFF" if i in (7, 31) else "answer") for i in range(40)]
    summary = RunSummary(keep_outcomes=False, max_rows=5)
    asyncio.run(evaluate_async(items, plan(), summary=summary))
    assert summary.outcomes == [] and summary.conversations == 40
    assert summary.count("passed") == 38 and summary.count("failed") == 2 and summary.exit_code == 1
    assert summary.usage.calls == 40
    ids = [o.conversation_id for o in summary.rows]
    assert len(ids) == 5 and {"c7", "c31"} <= set(ids) and summary.rows_left_out == 35
    assert ids == sorted(ids, key=lambda c: int(c[1:]))  # shown in input order


def test_the_rows_kept_are_those_the_rule_keeps_in_any_order_of_adding():
    """The kept rows (a heap since issue 28) are the rule's, written out here as the scan it replaced: the first
    ``max_rows`` kept, then a row replaces the kept one of lowest priority (the latest of those) when its own
    priority is higher. In input order: the highest priorities, the earliest of equal ones."""
    import random

    rng = random.Random(7)
    outcomes = [ConversationOutcome(f"c{i}", "test", {"m": MetricResult.model_construct(
        key="m", status=rng.choice(["passed", "failed", "error"]), errors=[], usage=Usage())},
        error="boom" if i % 17 == 0 else None, position=i) for i in range(60)]

    def scan(order: list[int]) -> list[str]:
        kept: list[ConversationOutcome] = []
        for i in order:
            if len(kept) < 7:
                kept.append(outcomes[i])
                continue
            low = min(range(7), key=lambda k: (kept[k].priority, -(kept[k].position or 0)))
            if outcomes[i].priority > kept[low].priority:
                kept[low] = outcomes[i]
        return [o.conversation_id for o in sorted(kept, key=lambda o: o.position or 0)]

    for order in (list(range(60)), rng.sample(range(60), 60), rng.sample(range(60), 60)):
        summary = RunSummary(keep_outcomes=False, max_rows=7)
        for i in order:
            summary.add(outcomes[i], order=i)
        assert [o.conversation_id for o in summary.rows] == scan(order) and summary.rows_left_out == 53
    first = sorted(sorted(outcomes, key=lambda o: (-o.priority, o.position or 0))[:7], key=lambda o: o.position or 0)
    assert scan(list(range(60))) == [o.conversation_id for o in first]


def test_a_summarys_repr_holds_its_counters_not_every_verdict():
    """asyncio.run (3.11) reprs the main task's result as it ends: a library run's summary with every outcome
    would be walked whole there."""
    summary = asyncio.run(evaluate_async([item(i, "answer") for i in range(6)], plan()))
    assert len(summary.outcomes) == 6
    shown = repr(summary)
    assert "conversations=6" in shown and "MetricResult" not in shown and "c3" not in shown


def test_nothing_judged_is_never_a_pass():
    assert RunSummary().exit_code == 3
    summary = asyncio.run(evaluate_async([InputError("f.jsonl", None, None, None, "empty")], plan()))
    assert summary.exit_code == 3 and summary.input_error_count == 1


def test_stop_ends_the_run_cleanly_keeping_what_finished():
    written: list[str] = []

    async def run():
        stop = asyncio.Event()

        def done(outcome):
            written.append(outcome.conversation_id)
            if len(written) == 3:
                stop.set()

        return await evaluate_async((item(i) for i in range(50)), plan(), max_conversations=2, on_outcome=done,
                                    stop=stop)

    summary = asyncio.run(run())
    assert summary.interrupted and summary.exit_code == 130
    assert 3 <= summary.conversations == len(written) < 50


def test_resume_skips_what_the_file_holds_and_repairs_a_torn_line(tmp_path):
    out = tmp_path / "r.jsonl"
    asyncio.run(evaluate_to_file([item(i) for i in range(3)], plan(), out))
    with out.open("a") as fh:
        fh.write('{"type": "conversation", "conversation_id": "c3", "res')  # killed mid-write
    with pytest.raises(ResultsFileError):
        asyncio.run(evaluate_to_file([item(i) for i in range(6)], plan(), out))
    model = ScriptedChatModel(default=YES)
    summary = asyncio.run(evaluate_to_file([item(i) for i in range(6)], plan(model), out, resume=True))
    assert model.call_count == 3  # only c3, c4, c5 judged
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[-1]["type"] == "summary"  # the resume's own summary ends it
    assert sorted(r["conversation_id"] for r in lines if r["type"] == "conversation") == [f"c{i}" for i in range(6)]
    assert summary.conversations == 6 and summary.resumed == 3 and summary.count("passed") == 6
    assert sorted(o.conversation_id for o in summary.outcomes) == ["c3", "c4", "c5"]  # e.g. MLflow writes: no repeats


def test_scan_reports_bad_lines_and_never_counts_an_id_twice(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"type": "conversation", "conversation_id": "a"}\nnot json\n'
                   '{"type": "conversation", "conversation_id": "a"}\n{"type": "input_error", "file": "f", '
                   '"line": 3, "record": 2, "field": null, "message": "bad"}\n')
    seen = []
    state = scan_results(out, seen.append)
    assert state.done == {"a"} and len(seen) == 1 and state.bad_lines == [2] and not state.torn
    assert state.input_errors == {("f", 3, 2, None, "bad")}


def test_a_resume_passes_over_exactly_the_lines_read_run_leaves_out(tmp_path):
    """One line reader (issue 25): the resume's scan and read_run agree on which lines are bad; the scan counts
    the rest and cuts the torn tail that read_run names."""
    out = tmp_path / "r.jsonl"
    lines = [b'{"type": "header", "metrics": []}', b'{"type": "conversation", "conversation_id": "a"}',
             b'{"type": "mystery"}', b'{"type": "conversation", "conversation_id": "b", "results": [1]}',
             b"not json", b'{"type": "conversation", "conversation_id": "c", "score": 1e999}', b"\xff\xfe",
             b'{"type": "input_error", "file": "f", "line": 2, "message": "bad"}']
    out.write_bytes(b"\n".join(lines) + b'\n{"type": "conversation", "conv')
    run = read_run(out)
    named = sorted(int(p.removeprefix(f"{out}:").split(":")[0]) for p in run.problems if "torn" not in p)
    state = scan_results(out, repair=False)
    assert state.bad_lines == named == [3, 4, 5, 6, 7] and state.torn and state.done == set(run.conversations) == {"a"}
    assert state.input_errors == {("f", 2, None, None, "bad")}
    scan_results(out)  # the repair cuts the torn line only
    assert out.read_bytes() == b"\n".join(lines) + b"\n"


def _attempt(text: str, reply: str | None, error: str | None = None) -> dict:
    return {"step": "turn_relevancy/judge_turn", "messages": [{"role": "user", "content": text}], "reply": reply,
            "error": error, "latency_s": 0.25, "usage": {"calls": 1, "input_tokens": 12, "output_tokens": 5},
            "model": "gpt-4.1-mini", "settings": {"temperature": 0.0}, "cached": False}


def _result() -> MetricResult:
    ok = Verdict(turns=[1], verdict="yes", reason="fine", window=0,
                 transcript=[_attempt("Judge <reply>[bold]hi[/]</reply>", '{"verdict": "yes"}')])
    retried = Verdict(turns=[3], verdict="no", reason="off", window=1, transcript=[
        _attempt("Judge window 1", "not json", "invalid JSON"), _attempt("Reply again", '{"verdict": "no"}')])
    return MetricResult(key="turn_relevancy", conversation_id="c1", score=0.5, threshold=0.5, passed=True,
                        status="passed", reason="1 of 2", judge="llm:gpt-4.1-mini", verdicts=[ok, retried],
                        usage=Usage(calls=3, input_tokens=1_000_000, output_tokens=0))


@pytest.mark.parametrize(("mode", "kept", "shared"), [("full", [1, 2], 2), ("errors", [0, 2], 1), ("none", [0, 0], 0)])
def test_the_writer_keeps_transcripts_as_asked(tmp_path, mode, kept, shared):
    out = tmp_path / "r.jsonl"
    writer = ResultsWriter(out, transcripts=mode, cost=prices_for("gpt-4.1-mini").cost)
    result = _result()  # with two requests no single verdict owns (an extraction, one failed attempt of it)
    result.transcript = [JudgeAttempt.model_validate(_attempt("Extract", None, "timeout")),
                         JudgeAttempt.model_validate(_attempt("Extract", '{"statements": []}'))]
    writer.outcome(ConversationOutcome("c1", "test", {"turn_relevancy": result}))
    writer.close()
    record = json.loads(out.read_text())
    assert [len(v["transcript"]) for v in record["results"]["turn_relevancy"]["verdicts"]] == kept
    assert len(record["results"]["turn_relevancy"]["transcript"]) == shared
    assert record["cost_usd"] == pytest.approx(0.40)  # 1M input tokens at $0.40


def test_a_lone_surrogate_is_written_as_valid_json_that_reads_back(tmp_path):
    out = tmp_path / "r.jsonl"
    writer = ResultsWriter(out)
    writer.write({"type": "conversation", "conversation_id": "x\udfffy"})
    writer.close()
    assert json.loads(out.read_bytes().decode("utf-8"))["conversation_id"] == "x\udfffy"


def test_transcript_of_shows_the_exact_prompt_then_the_raw_reply_for_each_attempt():
    text = transcript_of(_result(), window=1)
    assert "window 1" in text and "window 0" not in text
    first, second = text.index("── attempt 1"), text.index("── attempt 2")
    assert text.index("Judge window 1") > first and text.index("not json") > text.index("Judge window 1")
    assert text.index("[error] invalid JSON") < second < text.index("Reply again")
    assert "0.25s" in text and "temperature=0.0" in text
    whole = transcript_of(_result().model_dump(mode="json"))  # the same from a results-file line
    assert "Judge <reply>[bold]hi[/]</reply>" in whole and whole.count("── attempt") == 3
    with pytest.raises(LookupError, match="windows: 0, 1"):
        transcript_of(_result(), window=7)


def test_filter_transcripts_leaves_other_records_alone():
    record = {"type": "conversation", "results": {"m": {"verdicts": [{"verdict": "yes"}]}}}
    assert filter_transcripts(json.loads(json.dumps(record)), "none") == record


def test_prices_table_snapshots_and_overrides():
    entry = lookup("llm:gpt-4.1-mini")
    assert entry == lookup("openai:gpt-4.1-mini-2025-04-14") and (entry.input, entry.output) == (0.40, 1.60)
    assert lookup("gpt-4.1-minimal") is None and prices_for("llm:my-model") is None
    assert prices_for("llm:gpt-4.1-mini", price_out=3.0).output == 3.0
    assert prices_for("llm:my-model", 1.0, 2.0).cost(Usage(input_tokens=500_000, output_tokens=250_000)) == 1.0


def test_retry_errors_rewrite_drops_errored_and_repeated_lines_keeps_the_rest_and_cuts_a_torn_tail(tmp_path):
    out = tmp_path / "r.jsonl"
    lines = [{"type": "conversation", "conversation_id": "a", "results": {}},
             {"type": "conversation", "conversation_id": "b", "results": {}, "error": "boom"},
             {"type": "input_error", "file": "x.jsonl", "line": 3, "message": "bad"},
             {"type": "conversation", "conversation_id": "a", "results": {}}]
    text = "".join(json.dumps(r) + "\n" for r in lines)
    out.write_bytes((text + "not json\n").encode() + b'{"type": "conversation", "conv')
    state = scan_results(out, retry_errors=True)
    assert state.done == {"a"} and state.retried == 1 and state.torn and state.bad_lines == [5]
    kept = out.read_text().splitlines()
    assert [json.loads(k) for k in kept[:2]] == [lines[0], lines[2]] and kept[2:] == ["not json"]


def test_resume_with_retry_errors_judges_again_what_failed_and_keeps_each_conversation_once(tmp_path):
    out = tmp_path / "r.jsonl"
    broken = ScriptedChatModel(rules=[("answer 1", [RuntimeError("HTTP 401 at http://127.0.0.1:1/v1")])], default=YES)
    first = asyncio.run(evaluate_to_file([item(i) for i in range(3)], plan(broken), out))
    assert first.judge_errors == 1 and first.exit_code == 3
    plain = asyncio.run(evaluate_to_file([item(i) for i in range(3)], plan(ScriptedChatModel(default=YES)), out,
                                         resume=True))
    assert plain.exit_code == 3 and plain.resumed == 3  # judge errors are complete for a plain resume
    with pytest.raises(ResultsFileError):
        asyncio.run(evaluate_to_file([item(0)], plan(), out, retry_errors=True))
    model = ScriptedChatModel(default=YES)
    again = asyncio.run(evaluate_to_file([item(i) for i in range(3)], plan(model), out, resume=True,
                                         retry_errors=True))
    assert model.call_count == 1 and again.exit_code == 0 and again.conversations == 3
    lines = [r for line in out.read_text().splitlines() if (r := json.loads(line))["type"] == "conversation"]
    assert sorted(r["conversation_id"] for r in lines) == ["c0", "c1", "c2"]
    assert not any(r["results"]["turn_relevancy"]["errors"] for r in lines)
    assert not (tmp_path / "r.jsonl.resume-tmp").exists()
