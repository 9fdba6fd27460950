"""``judgegraph eval --batch``: the judge's requests through OpenAI's Batch API (/v1/files,
/v1/batches), against the loopback server's fake of it (tests.kit.openai_server.FakeBatches)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from pathlib import Path

import pytest

from judgegraph.batch import NoBatchAPI, batch_judges, evaluate_batch_to_file
from judgegraph.cost.pricing import prices_for
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.runs import is_results_file, read_run
from judgegraph.runs.runner import MetricPlan
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, error, structured, text

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

YES = structured({"reason": "It answers the question.", "verdict": "yes"})
NO = structured({"reason": "It is about Paris, not arithmetic.", "verdict": "no"})
BROKEN = text('{"reason": "cut off", "verdict": ')
MATH = {"id": "math", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "Can you solve 5+5?"}, {"role": "assistant", "content": "5+5 equals 10."},
]}
HELLO = {"id": "hello", "turns": [
    {"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Thanks, bye"}, {"role": "assistant", "content": "Goodbye, have a nice day."},
]}


def reply_is(fragment):
    return lambda req: fragment in req.text.split("<reply_to_judge>")[-1]


def reasks(req):
    return "could not be used" in req.text


@pytest.fixture
def inputs(tmp_path):
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in (MATH, HELLO)))
    return path


def batch_eval(inputs, out, server, *extra, env, batch=True, timeout=120):
    flags = ["--batch", "--batch-poll", "0.01"] if batch else []
    return cli.run(["eval", inputs, "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--out", out,
                    "--no-progress", *([] if "--cache" in extra else ["--no-cache"]), *flags, *extra], env=env,
                   timeout=timeout)


def records(out, kind):
    return [r for r in map(json.loads, Path(out).read_text().splitlines()) if r["type"] == kind]


def verdicts(out):
    """conversation → metric → (status, score, [(verdict, attempts)])."""
    return {r["conversation_id"]: {k: (v["status"], v["score"], [(x["verdict"], x["attempts"]) for x in v["verdicts"]])
                                   for k, v in r["results"].items()} for r in records(out, "conversation")}


@pytest.fixture
def env(bare_env, tmp_path):
    return {**bare_env, "HOME": str(tmp_path), "OPENAI_API_KEY": "sk-batch-secret"}


def test_a_batch_run_gives_the_verdicts_of_a_live_run(inputs, tmp_path, env):
    rules = [(reasks, NO), (reply_is("Paris"), [BROKEN, NO])]  # Paris: invalid once, then "no"
    with FakeOpenAIServer(ScriptedResponder(rules, default=YES)) as live:
        lived = batch_eval(inputs, tmp_path / "live.jsonl", live, env=env, batch=False)
    with FakeOpenAIServer(ScriptedResponder(rules, default=YES)) as server:
        batched = batch_eval(inputs, tmp_path / "batch.jsonl", server, env=env)
        assert server.calls["/v1/chat/completions"] == 0  # every request went through a batch
        assert server.batches.created == 2  # the re-ask of the invalid reply: a follow-up batch
    assert lived.returncode == batched.returncode == 0, batched.stdout + batched.stderr
    assert verdicts(tmp_path / "batch.jsonl") == verdicts(tmp_path / "live.jsonl")
    assert verdicts(tmp_path / "batch.jsonl")["math"]["turn_relevancy"][2] == [("yes", 1), ("no", 2), ("yes", 1)]
    ended = [r for r in records(tmp_path / "batch.jsonl", "batch") if r["status"] != "submitted"]
    assert [(r["round"], r["status"], r["requests"]) for r in ended] == [(1, "completed", 5), (2, "completed", 1)]
    # half the list price, on the tokens the batches reported
    assert all(r["cost_usd"] == pytest.approx(r["list_cost_usd"] / 2) and r["usage"]["input_tokens"] > 0 for r in ended)
    assert "at batch price (list price $" in batched.stdout
    assert "round 2): 1 requests submitted" in batched.stderr
    # the same calls and tokens as the live run (each reply's own usage), at half its price
    spent = [re.search(r"calls \d+, tokens \d+ in / \d+ out", p.stdout) for p in (lived, batched)]
    assert spent[0] and spent[1] and spent[0].group() == spent[1].group() and "calls 6," in spent[0].group()
    costs = [float(re.search(r"\$([0-9.]+)", p.stdout.split("tokens", 1)[1]).group(1)) for p in (lived, batched)]
    assert costs[1] == pytest.approx(costs[0] / 2, abs=1e-4)
    assert "sk-batch-secret" not in (tmp_path / "batch.jsonl").read_text() + batched.stdout + batched.stderr
    # the table in input order (issue 25), though math, re-asked, finished a round after hello
    assert [r["conversation_id"] for r in records(tmp_path / "batch.jsonl", "conversation")] == ["hello", "math"]
    assert batched.stdout.index("│ math") < batched.stdout.index("│ hello")
    read = read_run(tmp_path / "batch.jsonl")  # the HTML report reads the file, batch records and all
    assert read.problems == [] and len(read.batches) > 0 and len(read.conversations) == 2
    assert is_results_file(tmp_path / "batch.jsonl")  # though its first line is a batch record


def test_the_judge_cache_serves_a_rerun_without_a_batch(inputs, tmp_path, env):
    cache = ["--cache", tmp_path / "cache.sqlite"]
    with FakeOpenAIServer(ScriptedResponder([(reasks, NO), (reply_is("Paris"), [BROKEN, NO])], default=YES)) as server:
        first = batch_eval(inputs, tmp_path / "a.jsonl", server, *cache, env=env)
        again = batch_eval(inputs, tmp_path / "b.jsonl", server, *cache, env=env)
        assert server.batches.created == 2  # the first run's two; the rerun sends none
    assert first.returncode == again.returncode == 0, first.stdout + first.stderr + again.stdout + again.stderr
    assert "calls 6," in first.stdout  # answers of the first batch, served to the second pass, still counted
    assert "calls 0," in again.stdout and "answers from the cache" in again.stdout
    assert [v[:2] for v in verdicts(tmp_path / "b.jsonl")["math"].values()] == \
        [v[:2] for v in verdicts(tmp_path / "a.jsonl")["math"].values()]


def test_invalid_replies_are_reasked_in_follow_up_batches_up_to_max_tries(inputs, tmp_path, env):
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), BROKEN)], default=YES)) as server:
        proc = batch_eval(inputs, tmp_path / "out.jsonl", server, "--max-tries", "3", env=env)
        sent = server.requests
        created = server.batches.created
    assert proc.returncode == 3, proc.stdout + proc.stderr  # a judge error: counted, never a verdict
    assert created == 3  # the first ask, then one re-ask per follow-up batch
    batched = [b for b in sent if "messages" in b]
    judged = [b for b in batched if "Paris" in b["messages"][0]["content"].split("<reply_to_judge>")[-1]]
    assert sorted(len(b["messages"]) for b in judged) == [1, 3, 5]
    (math,) = [r for r in records(tmp_path / "out.jsonl", "conversation") if r["conversation_id"] == "math"]
    (failed,) = [v for v in math["results"]["turn_relevancy"]["verdicts"] if v["error"]]
    assert "invalid output after 3 tries" in failed["error"] and len(failed["transcript"]) == 3


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM])
def test_killed_after_submit_then_resumed_collects_without_resubmitting(inputs, tmp_path, env, stop):
    out = tmp_path / "out.jsonl"
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), NO)], default=YES)) as server:
        server.batches.hold.set()  # the batch stays in progress until the first run is killed
        args = ["eval", str(inputs), "--model", "openai:gpt-4.1-mini",
                "--base-url", server.base_url, "--out", str(out), "--no-progress", "--no-cache", "--batch",
                "--batch-poll", "0.01"]
        proc = cli.start(args, env=env)
        try:
            for _ in range(600):  # at most 60 s
                if out.exists() and '"type": "batch"' in out.read_text():
                    break
                time.sleep(0.1)
        finally:
            proc.send_signal(stop)
            stdout, stderr = proc.communicate(timeout=30)
        if stop == signal.SIGTERM:  # stopped cleanly: the batch is left to the provider, the run says so
            assert proc.returncode == 143, stdout + stderr
            assert "left running at the provider: --resume collects it" in stderr
        assert records(out, "batch")[0]["status"] == "submitted" and not records(out, "conversation")
        server.batches.hold.clear()
        resumed = batch_eval(inputs, out, server, "--resume", env=env)
        assert server.batches.created == 1  # collected, not sent again
        assert server.calls["/v1/files"] == 1
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert verdicts(out)["math"]["turn_relevancy"][2] == [("yes", 1), ("no", 1), ("yes", 1)]
    assert set(verdicts(out)) == {"math", "hello"}


def test_a_recorded_batch_the_endpoint_no_longer_knows_is_sent_again(inputs, tmp_path, env):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"type": "batch", "id": "batch_deleted", "round": 1, "status": "submitted",
                               "requests": 5}) + "\n")
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), NO)], default=YES)) as server:
        proc = batch_eval(inputs, out, server, "--resume", env=env)
        assert server.batches.created == 1
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "batch_deleted is unknown to the endpoint (404)" in proc.stderr
    assert [r["status"] for r in records(out, "batch")][:2] == ["submitted", "gone"]
    assert set(verdicts(out)) == {"math", "hello"}


def test_a_failed_batch_exits_3_and_loses_nothing(inputs, tmp_path, env):
    out = tmp_path / "out.jsonl"
    with FakeOpenAIServer(ScriptedResponder([(reasks, NO), (reply_is("Paris"), BROKEN)], default=YES)) as server:
        server.batches.outcomes = ["completed", "failed"]  # the follow-up batch (the re-ask) fails
        proc = batch_eval(inputs, out, server, env=env)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "failed" in proc.stdout and "--resume sends the rest" in proc.stdout
        assert set(verdicts(out)) == {"hello"}  # judged from the first batch, written
        assert [r["status"] for r in records(out, "batch")] == ["submitted", "completed", "submitted", "failed"]
        assert "invalid_request" in records(out, "batch")[-1]["errors"][0]
        resumed = batch_eval(inputs, out, server, "--resume", env=env)
        assert server.batches.created == 3  # the first batch collected again, only the failed one's request resent
        last = server.batches.batches[list(server.batches.batches)[-1]]["request_counts"]
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert last["total"] == 1
    assert set(verdicts(out)) == {"hello", "math"}
    assert verdicts(out)["math"]["turn_relevancy"][2] == [("yes", 1), ("no", 2), ("yes", 1)]


def test_an_expired_batch_keeps_its_answers_and_resume_sends_the_rest(inputs, tmp_path, env):
    out = tmp_path / "out.jsonl"
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), NO)], default=YES)) as server:
        server.batches.outcomes = ["expired"]  # 2 of its 5 requests answered, 3 expired
        proc = batch_eval(inputs, out, server, env=env)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert "expired" in proc.stdout
        (ended,) = [r for r in records(out, "batch") if r["status"] == "expired"]
        assert (ended["completed"], ended["failed"]) == (2, 3)
        resumed = batch_eval(inputs, out, server, "--resume", env=env)
        assert server.batches.created == 2
        second = server.batches.batches[list(server.batches.batches)[-1]]["request_counts"]
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert second["total"] == 3  # only the expired requests are sent again
    assert set(verdicts(out)) == {"hello", "math"}


def test_requests_in_the_error_file_are_retried_or_counted(inputs, tmp_path, env):
    rules = [(reply_is("Paris"), [error(500), NO]), (reply_is("Goodbye"), error(400, "bad request"))]
    with FakeOpenAIServer(ScriptedResponder(rules, default=YES)) as server:
        proc = batch_eval(inputs, tmp_path / "out.jsonl", server, env=env)
        assert server.batches.created == 2  # the 500 sent again in a follow-up batch; the 400 is not
    assert proc.returncode == 3, proc.stdout + proc.stderr  # the 400: a judge error, counted
    got = verdicts(tmp_path / "out.jsonl")
    assert got["math"]["turn_relevancy"][2] == [("yes", 1), ("no", 1), ("yes", 1)]
    (hello,) = [r for r in records(tmp_path / "out.jsonl", "conversation") if r["conversation_id"] == "hello"]
    errors = [v["error"] for v in hello["results"]["turn_relevancy"]["verdicts"] if v["error"]]
    assert len(errors) == 1 and "batch request failed" in errors[0] and "bad request" in errors[0]


def test_no_batch_api_is_said_at_once_with_exit_2(inputs, tmp_path, env):
    offline = cli.run(["eval", inputs, "--batch", "--out", tmp_path / "a.jsonl", "--no-progress"], env=env)
    assert offline.returncode == 2 and "nothing to batch" in offline.stderr
    with FakeOpenAIServer(batch_api=False) as server:  # an OpenAI-compatible server without /v1/batches
        proc = batch_eval(inputs, tmp_path / "b.jsonl", server, env=env)
        assert server.calls["/v1/chat/completions"] == 0 and server.calls["/v1/files"] == 0
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "has no batch API (GET /v1/batches answered 404)" in proc.stderr
    assert not (tmp_path / "b.jsonl").exists()


def test_a_judge_without_an_openai_endpoint_has_no_batch_api():
    scripted = resolve_judge(ScriptedChatModel(responses=[]), cache=False)
    with pytest.raises(NoBatchAPI, match="OpenAI-compatible model"):
        batch_judges(scripted)


def test_a_chat_model_object_on_its_own_http_clients_has_no_batch_api():
    """Batch mode answers at judgegraph's HTTP clients: a ChatOpenAI built elsewhere would send live."""
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", api_key="not-needed")
    with pytest.raises(NoBatchAPI, match="give the model as a string"):
        batch_judges(resolve_judge(model, cache=False))


def test_python_api_and_dry_run_at_batch_price(inputs, tmp_path, env):
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), NO)], default=YES)) as server:
        judge = resolve_judge("openai:gpt-4.1-mini", base_url=server.base_url, cache=False)
        lines: list[str] = []
        summary = asyncio.run(evaluate_batch_to_file([inputs], MetricPlan(None, judge), tmp_path / "py.jsonl",
                                                     prices=prices_for(judge.name), poll_s=0.01,
                                                     on_batch=lines.append))
        assert judge.via is None  # the judge is given back as it was
    assert summary.exit_code == 0 and summary.conversations == 2 and summary.usage.calls == 5
    assert summary.cost_usd == pytest.approx(summary.list_cost_usd / 2)
    assert [b.status for b in summary.batches] == ["completed"]
    assert any("completed, 5/5 done" in line for line in lines)
    dry = cli.run(["eval", inputs, "--model", "openai:gpt-4.1-mini", "--dry-run", "--batch"], env=env)
    assert dry.returncode == 0 and "batch price, 0.5 of list" in dry.stdout


def test_the_documented_python_snippet_runs_as_written(inputs, tmp_path, env):
    """docs/batch.md's snippet, as `python -c` (forked by the test kit), against the loopback server (OPENAI_BASE_URL)."""
    snippet = re.search(r"```python\n(.*?)```", (ROOT / "docs/batch.md").read_text(), re.S).group(1)
    (tmp_path / "chats.jsonl").write_text(inputs.read_text())
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), NO)], default=YES), batch_polls=0) as server:
        proc = cli.run([], code=snippet, cwd=tmp_path, timeout=120, env={**env, "OPENAI_BASE_URL": server.base_url})
        assert server.batches.created == 1
    assert proc.returncode == 0, proc.stdout + proc.stderr
    code, paid, listed = proc.stdout.split()[-3:]
    assert code == "0" and float(paid) == pytest.approx(float(listed) / 2)
    assert set(verdicts(tmp_path / "batch-results.jsonl")) == {"math", "hello"}


def test_requests_still_unanswered_after_max_rounds_are_counted_judge_errors(inputs, tmp_path):
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), BROKEN)], default=YES), batch_polls=0) as server:
        judge = resolve_judge("openai:gpt-4.1-mini", base_url=server.base_url, cache=False)
        summary = asyncio.run(evaluate_batch_to_file([inputs], MetricPlan(None, judge), tmp_path / "out.jsonl",
                                                     poll_s=0.01, max_rounds=1))
        assert server.batches.created == 1  # the re-ask would need a second batch
    assert summary.exit_code == 3 and summary.judge_errors == 1 and summary.conversations == 2
    assert "1 requests still had no answer after 1 batches" in summary.problem
    (math,) = [r for r in records(tmp_path / "out.jsonl", "conversation") if r["conversation_id"] == "math"]
    (failed,) = [v for v in math["results"]["turn_relevancy"]["verdicts"] if v["error"]]
    assert "no answer from the batches of this run" in failed["error"]


def test_evaluate_batch_to_file_from_python(inputs, tmp_path):
    from judgegraph.batch import evaluate_batch_to_file

    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), NO)], default=YES), batch_polls=0) as server:
        judge = resolve_judge("openai:gpt-4.1-mini", base_url=server.base_url, cache=False)
        summary = asyncio.run(evaluate_batch_to_file([inputs], MetricPlan(None, judge), tmp_path / "out.jsonl"))
        assert server.batches.created == 1 and server.calls["/v1/chat/completions"] == 0
    assert summary.exit_code == 0 and summary.conversations == 2
    assert verdicts(tmp_path / "out.jsonl")["math"]["turn_relevancy"][2] == [("yes", 1), ("no", 1), ("yes", 1)]


def test_a_batch_run_has_the_run_header_and_summary_and_resume_refuses_other_settings(inputs, tmp_path, env):
    """A --batch results file says what made it, as a live run's does: a header first, a summary last; and a
    --resume with another threshold is refused before any batch is sent."""
    out = tmp_path / "batch.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        done = batch_eval(inputs, out, server, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert lines[0]["type"] == "header" and lines[-1]["type"] == "summary"
        assert lines[0]["judges"][0]["name"].endswith("gpt-4.1-mini") and lines[-1]["conversations"] == 2
        created = server.batches.created
        again = batch_eval(inputs, out, server, "--resume", "--threshold", "0.9", env=env)
        assert again.returncode == 2 and "threshold" in again.stderr, again.stdout + again.stderr
        assert server.batches.created == created


def test_a_batch_run_is_the_runners_one_loop_a_pass_per_batch_round(inputs, tmp_path, loop_passes):
    """Issue 25: the Batch API answers judge requests under runner.evaluate_to_file's loop (OpenRun.execute), not
    a loop of its own; round 2 (the re-ask of an invalid reply) is a second pass of that loop."""
    with FakeOpenAIServer(ScriptedResponder([(reasks, NO), (reply_is("Paris"), [BROKEN, NO])], default=YES),
                          batch_polls=0) as server:
        judge = resolve_judge("openai:gpt-4.1-mini", base_url=server.base_url, cache=False)
        summary = asyncio.run(evaluate_batch_to_file([inputs], MetricPlan(None, judge), tmp_path / "out.jsonl",
                                                     poll_s=0.01))
        assert server.batches.created == 2
    assert loop_passes == [3]  # a pass per round, and the last finding nothing left to ask
    assert summary.exit_code == 0 and summary.conversations == 2 and summary.unfinished == 0
    kinds = [r["type"] for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())]
    assert kinds[0] == "header" and kinds[-1] == "summary" and kinds.count("conversation") == 2
