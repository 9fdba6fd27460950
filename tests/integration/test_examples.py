"""The runnable examples run as a new user would run them, with no key."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def run(env, *argv, timeout=180):
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**env, "HOME": str(Path.home()), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_report_example_streams_every_metric_and_prints_results(bare_env):
    out = run(bare_env, "examples/report.py")
    assert "subgraph turn_contextual_relevancy" in out
    for metric in ("turn_relevancy", "turn_contextual_relevancy", "response_relevancy"):
        assert f"{metric:28} window_turns" in out or f"{metric:28} split_exchanges" in out
    assert out.count("== rag-") == 3
    bad = out.split("== rag-tracking-bad-retrieval")[1]
    assert re.search(r"turn_contextual_relevancy\s+0\.17\s+failed", bad)


def test_custom_judges_example_runs_on_canned_answers(bare_env):
    out = run(bare_env, "examples/custom_judges.py")
    assert "canned" in out.lower() and "politeness" in out


def test_review_loop_example_reviews_resumes_and_rejudges_one_window(bare_env):
    out = run(bare_env, "examples/review_loop.py")
    assert "paused for review: 3 verdicts, 3 judge calls" in out
    after_review = out.split("== after review")[1].split("==")[0]
    assert "score 0.67 (passed)" in after_review and "[person; judge said 'yes']" in after_review
    last = out.split("stricter rubric")[1]
    assert "(1 call): score 0.33 (failed)" in last
    assert "window 1: no  Opening hours" in last and "window 2: no  'Usually'" in last


def test_guardrail_chatbot_regenerates_the_off_topic_reply_with_the_judges_reason(bare_env):
    out = run(bare_env, "examples/guardrail_chatbot.py")
    lines = [line for line in out.splitlines() if line.split(" ")[0] in ("chatbot", "judge", "regenerate")]
    assert [line.split()[0] for line in lines] == ["chatbot", "judge", "regenerate", "judge"]
    assert "Sunny" in lines[0] and lines[1].split()[1] == "failed" and "weather" in lines[1]
    assert "Block card" in lines[2] and lines[3].split()[1] == "passed"
    assert "judge -.-> regenerate" in out and "regenerate --> judge" in out


@pytest.mark.parametrize("example", ["examples/custom_judges.py", "examples/session_judges.py",
                                     "examples/policy_judge/run.py", "examples/review_loop.py",
                                     "examples/guardrail_chatbot.py"])
def test_examples_leave_the_users_judge_cache_alone(bare_env, tmp_path, example):
    """Canned answers from an example must never land in the persistent judge cache
    (they used to, for every example whose canned judge runs at temperature 0)."""
    cache = tmp_path / "users-judge-cache.sqlite"
    run({**bare_env, "JUDGEGRAPH_JUDGE_CACHE": str(cache)}, example)
    assert not cache.exists()
