"""The watcher's choices: which threads are due, the seeded sample, and what is remembered on disk."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from judgegraph.loaders.langgraph_threads import ThreadInfo
from judgegraph.watch import MAX_TRIES, Remembered, is_due, sampled

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
