"""The watcher's choices: which threads are due, the seeded sample, and what is remembered on disk."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from judgegraph.loaders.langgraph_threads import ThreadInfo
from judgegraph.runs.watch import MAX_TRIES, Remembered, is_due, sampled

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def test_a_thread_is_due_when_idle_long_enough_and_not_running():
    ago = NOW - timedelta(seconds=60)
    assert is_due(ThreadInfo("t", ago), 60, NOW)
    assert not is_due(ThreadInfo("t", ago), 61, NOW)
    assert is_due(ThreadInfo("t", ago, status="idle"), 60, NOW)
    assert is_due(ThreadInfo("t", ago, status="error"), 60, NOW)
    assert not is_due(ThreadInfo("t", ago, status="busy"), 60, NOW)
    assert not is_due(ThreadInfo("t", ago, status="interrupted"), 60, NOW)  # waiting for a human: not ended
    assert not is_due(ThreadInfo("t", None), 0, NOW)


def test_the_sample_is_seeded_stable_and_near_its_rate():
    ids = [f"thread-{i}" for i in range(4000)]
    chosen = [t for t in ids if sampled(t, 0.25, seed=7)]
    assert chosen == [t for t in ids if sampled(t, 0.25, seed=7)]  # the same at every poll and restart
    assert chosen != [t for t in ids if sampled(t, 0.25, seed=8)]
    assert 900 < len(chosen) < 1100
    assert all(sampled(t, 1.0, seed=7) for t in ids[:10])


def test_remembered_across_restarts_and_retried_after_judge_errors(tmp_path):
    path = tmp_path / "state.sqlite"
    r = Remembered(path)
    r.record("src", "ok", ok=True)
    r.record("src", "flaky", ok=False)
    assert r.done("src", "ok") and not r.done("src", "flaky") and not r.done("other", "ok")
    r.close()
    r = Remembered(path)  # a restart
    assert r.done("src", "ok") and not r.done("src", "flaky")
    for _ in range(MAX_TRIES - 1):
        r.record("src", "flaky", ok=False)
    assert r.done("src", "flaky") and r.count() == 2  # given up after MAX_TRIES tries
    r.close()


def test_a_watch_judges_each_thread_once_and_retries_judge_errors_up_to_max_tries(tmp_path):
    """Watch.run over an InMemorySaver of the test agent, judged by a scripted model: the thread whose judge
    fails is judged again at each poll until MAX_TRIES, the good one once; a new Watch on the same state file
    (a restart) judges neither again."""
    import asyncio
    import json

    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from judgegraph.judges import resolve_judge
    from judgegraph.judges.scripted import ScriptedChatModel
    from judgegraph.runs.runner import MetricPlan
    from judgegraph.runs.watch import CheckpointerThreads, Watch
    from tests.kit.agent import build_agent

    saver = InMemorySaver()
    app = build_agent(saver)
    for tid, question in (("good", "Weather in Paris?"), ("flaky", "Weather in FLAKY?")):
        app.invoke({"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": tid}})
    judge = ScriptedChatModel(rules=[("FLAKY", [RuntimeError("HTTP 503 from the judge")])],
                              default={"reason": "on topic", "verdict": "yes"})
    plan = MetricPlan(["turn_relevancy"], resolve_judge(model=judge, cache=False, max_tries=1))
    out, state = tmp_path / "w.jsonl", tmp_path / "state.sqlite"
    polls: list[tuple[int, int]] = []

    def watch() -> Watch:
        return Watch(CheckpointerThreads(saver, "memory"), plan, out, Remembered(state), idle=0, interval=0.01,
                     max_polls=MAX_TRIES + 2, on_poll=lambda n, judged: polls.append((n, judged)))

    first = watch()
    summary = asyncio.run(first.run(asyncio.Event()))
    first.remembered.close()
    judged = [r["conversation_id"] for line in out.read_text().splitlines()
              if (r := json.loads(line))["type"] == "conversation"]
    assert judged.count("good") == 1 and judged.count("flaky") == MAX_TRIES
    assert polls == [(1, 2)] + [(n, 1) for n in range(2, MAX_TRIES + 1)] + [(MAX_TRIES + 1, 0), (MAX_TRIES + 2, 0)]
    assert summary.judge_errors == MAX_TRIES and not summary.interrupted
    with out.open("a", encoding="utf-8") as fh:
        fh.write('{"type": "conversation", "conversation_id": "torn')  # a watcher killed while writing
    again = watch()
    again.max_polls = 1
    asyncio.run(again.run(asyncio.Event()))
    again.remembered.close()
    records = [json.loads(line) for line in out.read_text().splitlines()]  # the torn tail was cut: every line reads
    assert [r["type"] for r in records] == ["header", *["conversation"] * (1 + MAX_TRIES), "summary", "summary"]
    assert records[0]["metrics"][0]["name"] == "turn_relevancy"  # one header; a restart judges nothing again
    for summary_record in records[-2:]:  # each counts the whole file: each thread once, by its last judgement
        assert summary_record["conversations"] == 2
        assert summary_record["statuses"] == {"turn_relevancy": {"passed": 1, "error": 1}}


def test_a_restart_with_other_judging_settings_is_refused_naming_them_and_speed_settings_may_change(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    from judgegraph.judges import resolve_judge
    from judgegraph.judges.scripted import ScriptedChatModel
    from judgegraph.runs.header import RunSettingsChanged
    from judgegraph.runs.runner import MetricPlan
    from judgegraph.runs.watch import CheckpointerThreads, begin

    source = CheckpointerThreads(InMemorySaver(), "memory")
    judge = resolve_judge(model=ScriptedChatModel(default={"reason": "ok", "verdict": "yes"}), cache=False)
    out = tmp_path / "w.jsonl"
    start = begin(out, MetricPlan(["turn_relevancy"], judge, {"threshold": 0.5}), source,
                  judge_settings={"concurrency": 2})
    assert start.fresh and start.header["inputs"] == [{"path": "memory", "sha256": None, "kind": "langgraph threads"}]
    out.write_text(json.dumps(start.header) + "\n", encoding="utf-8")
    again = begin(out, MetricPlan(["turn_relevancy"], judge, {"threshold": 0.5}), source,
                  judge_settings={"concurrency": 9})
    assert not again.fresh and again.old is not None and again.old.data() == start.header
    try:
        begin(out, MetricPlan(["turn_relevancy"], judge, {"threshold": 0.8}), CheckpointerThreads(InMemorySaver(), "b"))
    except RunSettingsChanged as exc:
        assert exc.differences == ["metric turn_relevancy option threshold changed: 0.5 → 0.8",
                                   "input b added", "input memory removed"]
    else:
        raise AssertionError("a restart with another threshold and another source went on")
    older = tmp_path / "older.jsonl"  # a watch file of an older judgegraph: no header, appended to as it is
    older.write_text('{"type": "conversation", "conversation_id": "t0", "source": "memory", "results": {}}\n')
    kept = begin(older, MetricPlan(["turn_relevancy"], judge), source)
    assert kept.old is None and not kept.fresh  # no header is written in the middle of the file
