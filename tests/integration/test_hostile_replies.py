"""The LLM judge against a hostile OpenAI-compatible server (the loopback one,
scripted to misbehave), through the real ChatOpenAI -> openai -> httpx path:
a reply trickled a byte at a time, an endless chunked body, a huge body, a
gzip bomb, an error body that echoes the request's headers. Each ends as a
reported judge error within the judge's limits; the run goes on."""

import asyncio
import json
import os

import pytest

from judgegraph.judges import resolve_judge
from judgegraph.metrics.relevancy import create_turn_relevancy_metric
from tests.kit import cli
from tests.kit.openai_server import (
    FakeOpenAIServer,
    ScriptedResponder,
    echo_headers,
    endless,
    gzip_bomb,
    huge,
    structured,
    trickle,
)

pytestmark = pytest.mark.integration

VERDICT = {"reason": "It answers the question.", "verdict": "yes"}
YES = structured(VERDICT)
SECRET = "sk-test-SECRET-0123456789abcdefXYZ"


def conversation(tag: str) -> dict:
    return {"id": tag, "turns": [{"role": "user", "content": f"What is 2+2? {tag}"},
                                 {"role": "assistant", "content": "2+2 equals 4."}]}


def write_conversations(tmp_path, tags):
    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(conversation(t)) + "\n" for t in tags))
    return path


def env_at(tmp_path, **extra):
    """This process's environment with HOME and the model cache in the test's folder."""
    return {**os.environ, "HOME": str(tmp_path), "JUDGEGRAPH_CACHE_DIR": str(tmp_path / "cache"), **extra}


def results_by_id(path):
    out = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "conversation":
            out[record["conversation_id"]] = record["results"]["turn_relevancy"]
    return out


def judge_once(server, *, asynchronous, **settings):
    judge = resolve_judge(model="gpt-4.1-mini", base_url=server.base_url, api_key=SECRET, cache=False, **settings)
    graph = create_turn_relevancy_metric(model=judge)
    state = {"conversation": conversation("hostile")}
    out = asyncio.run(graph.ainvoke(state)) if asynchronous else graph.invoke(state)
    return out["results"]["turn_relevancy"]


# -- C.5: --timeout is a deadline for the whole request ------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("headers", [False, True], ids=["body-trickles", "headers-trickle"])
def test_a_trickling_server_ends_at_the_deadline_as_a_timeout_retried_per_max_retries(asynchronous, headers):
    # one byte every 0.5 s: each read is quick, so a per-read timeout never fires (the old client waited ~5 min)
    with FakeOpenAIServer(ScriptedResponder([], default=trickle(VERDICT, interval=0.5, headers=headers))) as server:
        result = judge_once(server, asynchronous=asynchronous, timeout=2, max_retries=1)
        sent = server.calls["/v1/chat/completions"]
    assert result.status == "error"
    [message] = [e.message for e in result.errors]
    assert "timed out" in message.lower() and "deadline of 2 s" in message, message
    assert sent == 2  # a timeout like any other: retried once (max_retries=1), then a judge error
    assert result.errors[0].attempts == 2


@pytest.mark.timeout(90)
def test_cli_timeout_is_a_deadline_for_a_trickled_reply(tmp_path):
    out = tmp_path / "r.jsonl"
    responder = ScriptedResponder([("SLOW", trickle(VERDICT, interval=0.5))], default=YES)
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(write_conversations(tmp_path, ["SLOW", "fine"])), "--model", "judge-model",
                        "--base-url", server.base_url, "--timeout", "2", "--max-retries", "0", "--no-cache",
                        "--out", str(out), "--no-progress"], env=env_at(tmp_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    results = results_by_id(out)
    assert results["fine"]["status"] != "error"
    [error] = results["SLOW"]["errors"]
    assert "timed out" in error["message"].lower() and "deadline of 2 s" in error["message"]


# -- C.6: a reply size limit, on the decoded stream ----------------------------------------------------------

@pytest.mark.timeout(120)
def test_huge_gzip_bomb_and_endless_replies_are_judge_errors_naming_the_limit_and_the_run_goes_on(tmp_path):
    out = tmp_path / "r.jsonl"
    responder = ScriptedResponder([
        ("HUGE", huge(VERDICT, 16 << 20)),            # a valid verdict after 16 MiB of whitespace
        ("BOMB", gzip_bomb(VERDICT, 64 << 20)),       # 64 KiB on the wire, 64 MiB decoded, a valid verdict
        ("ENDLESS", endless(max_seconds=30)),         # chunked, never ends
    ], default=YES)
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(write_conversations(tmp_path, ["HUGE", "ok1", "BOMB", "ok2", "ENDLESS"])),
                        "--model", "judge-model", "--base-url", server.base_url, "--no-cache", "--concurrency", "2",
                        "--out", str(out), "--no-progress"], env=env_at(tmp_path))
        hostile_calls = {tag: responder.hits[tag] for tag in ("HUGE", "BOMB", "ENDLESS")}
    assert proc.returncode == 3, proc.stdout + proc.stderr
    results = results_by_id(out)
    assert results["ok1"]["status"] != "error" and results["ok2"]["status"] != "error"
    for tag in ("HUGE", "BOMB", "ENDLESS"):
        assert results[tag]["status"] == "error", (tag, results[tag])
        [error] = results[tag]["errors"]
        assert "max_reply_bytes" in error["message"] and "8,388,608 bytes" in error["message"], error
    assert hostile_calls == {"HUGE": 1, "BOMB": 1, "ENDLESS": 1}  # not retried: the same reply would come again


@pytest.mark.timeout(60)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_gzip_bomb_is_cut_on_the_decoded_bytes_with_a_configurable_limit(asynchronous):
    with FakeOpenAIServer(ScriptedResponder([], default=gzip_bomb(VERDICT, 4 << 20))) as server:
        small = judge_once(server, asynchronous=asynchronous, max_reply_bytes=1 << 20)
        big = judge_once(server, asynchronous=asynchronous, max_reply_bytes=8 << 20)
    assert small.status == "error" and "1,048,576 bytes" in small.errors[0].message
    assert big.status != "error"  # 4 MiB decoded fits 8 MiB: decoded here, the verdict read


def test_max_reply_bytes_zero_is_a_usage_error(tmp_path):
    proc = cli.run(["eval", str(write_conversations(tmp_path, ["a"])), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                    "--max-reply-bytes", "0", "--out", str(tmp_path / "r.jsonl")], env=env_at(tmp_path))
    assert proc.returncode == 2 and "--max-reply-bytes" in proc.stderr


# -- C.12: credentials never stored ---------------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_an_error_body_echoing_the_headers_leaves_no_key_in_results_report_or_cache(tmp_path):
    out, html, cache = tmp_path / "r.jsonl", tmp_path / "report.html", tmp_path / "jc.sqlite"
    responder = ScriptedResponder([("ECHO400", echo_headers(400)), ("ECHO500", echo_headers(500))], default=YES)
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(write_conversations(tmp_path, ["ECHO400", "ok", "ECHO500"])), "--model", "judge-model",
                        "--base-url", server.base_url, "--max-retries", "1", "--cache", str(cache), "--html", str(html),
                        "--out", str(out), "--no-progress"], env=env_at(tmp_path, OPENAI_API_KEY=SECRET))
        echoed = responder.hits["ECHO400"] + responder.hits["ECHO500"]
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert echoed == 1 + 2  # the 400 once; the 500 retried once
    results = results_by_id(out)
    assert "authorization: [REDACTED]" in results["ECHO400"]["errors"][0]["message"]  # the echo is there, redacted
    assert results["ok"]["status"] != "error"
    assert b"authorization: [REDACTED]" in html.read_bytes()  # the report shows the error, redacted
    for path in (out, html, cache):
        data = path.read_bytes()
        assert SECRET.encode() not in data and b"SECRET" not in data, path
        assert b"Bearer sk-" not in data, path
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.timeout(120)
def test_a_successful_reply_echoing_the_headers_leaves_no_key_in_results_report_cache_or_output(tmp_path):
    """Issue 27.13: a 200 whose verdict reason repeats the request's headers put `Bearer sk-...` into the reason,
    the results file, the HTML report and the cache (only error bodies were redacted)."""
    out, html, cache = tmp_path / "r.jsonl", tmp_path / "report.html", tmp_path / "jc.sqlite"
    echo = echo_headers(200, {"reason": "Fine. Request headers were {headers}", "verdict": "yes"})
    responder = ScriptedResponder([("ECHO200", echo)], default=YES)
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(write_conversations(tmp_path, ["ECHO200", "ok"])), "--model", "judge-model",
                        "--base-url", server.base_url, "--cache", str(cache), "--html", str(html), "--out", str(out),
                        "--no-progress"], env=env_at(tmp_path, OPENAI_API_KEY=SECRET))
        assert responder.hits["ECHO200"] == 1
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict = results_by_id(out)["ECHO200"]["verdicts"][0]
    assert verdict["verdict"] == "yes" and "authorization: [REDACTED]" in verdict["reason"]
    for path in (out, html, cache):
        data = path.read_bytes()
        assert SECRET.encode() not in data and b"SECRET" not in data, path
        assert b"Bearer sk-" not in data, path
    assert SECRET not in proc.stdout + proc.stderr
