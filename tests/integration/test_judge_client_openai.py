"""The LLM judge client against the loopback OpenAI-compatible server: transcripts,
replies real servers give, a server that is down or wrong, prompt size, retries,
rate limits and the persistent cache."""

import asyncio
import json
import socket
import threading
import time

import pytest
from langchain_openai import ChatOpenAI

from judgegraph.judges import resolve_judge
from judgegraph.metrics.relevancy import create_turn_relevancy_metric
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, error, structured, text

pytestmark = pytest.mark.integration

YES = structured({"reason": "It answers the question.", "verdict": "yes"})
NO = structured({"reason": "It is about Paris, not arithmetic.", "verdict": "no"})
MATH = {"id": "math", "turns": [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "Can you solve 5+5?"}, {"role": "assistant", "content": "5+5 equals 10."},
]}


def reply_is(fragment):
    return lambda req: fragment in req.text.split("<reply_to_judge>")[-1]


def chat(server, **kw):
    return ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="sk-secret-test-key", **kw)


def judged(model, conversation=MATH, **judge_kw):
    judge = resolve_judge(model=model, **judge_kw)
    graph = create_turn_relevancy_metric(model=judge)
    return graph.invoke({"conversation": conversation})["results"]["turn_relevancy"], judge


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


# -- transcripts -----------------------------------------------------------------

def test_every_request_behind_a_verdict_is_in_its_transcript_without_the_key():
    responder = ScriptedResponder([(reply_is("Paris"), [text('{"reason": "cut off", "verdict": '), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        res, _ = judged(chat(server, temperature=0, max_tokens=200), cache=False)
        sent = [r["messages"] for r in server.chat_requests]
    paris = res.verdicts[1]
    assert [len(a.messages) for a in paris.transcript] == [1, 3]  # the re-ask carries the bad reply and the error
    first, second = paris.transcript
    assert first.reply == '{"reason": "cut off", "verdict": ' and first.error and second.error is None
    assert second.messages[1] == {"role": "assistant", "content": first.reply}
    assert second.messages in [[{"role": m["role"], "content": m["content"]} for m in s] for s in sent]
    assert json.loads(second.reply)["verdict"] == "no"
    assert first.model == "gpt-4.1-mini" and first.settings["temperature"] == 0 and first.settings["max_tokens"] == 200
    assert all(a.latency_s > 0 and a.usage.calls == 1 and not a.cached for a in paris.transcript)
    assert [len(v.transcript) for v in res.verdicts] == [1, 2, 1]
    dumped = res.model_dump_json()
    assert "sk-secret-test-key" not in dumped and "uthorization" not in dumped
    assert json.loads(dumped)["verdicts"][1]["transcript"][0]["step"] == "turn_relevancy/judge_turn"


# -- replies real servers give ---------------------------------------------------

@pytest.mark.parametrize("reply, verdict", [
    (text('```json\n{"reason": "About Paris.", "verdict": "no"}\n```'), "no"),
    (text('Sure! Here it is:\n```\n{"reason": "About Paris.", "verdict": "no"}\n```'), "no"),
    (text("No, this is off-topic."), "no"),
    (text("**No** - the reply talks about Paris."), "no"),
    (text("Yes."), "yes"),
])
def test_fenced_json_and_verdict_sentences_are_read_without_a_reask(reply, verdict):
    with FakeOpenAIServer(ScriptedResponder([(reply_is("Paris"), reply)], default=YES)) as server:
        res, _ = judged(chat(server), cache=False)
        assert server.calls["/v1/chat/completions"] == 3
    assert res.verdicts[1].verdict == verdict and res.verdicts[1].attempts == 1 and res.errors == []
    if reply.content.startswith(("No", "**No", "Yes")):
        assert res.verdicts[1].reason == reply.content


def test_a_sentence_that_is_no_verdict_is_still_reasked():
    responder = ScriptedResponder([(reply_is("Paris"), [text("Nothing to say."), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        res, _ = judged(chat(server), cache=False)
        assert server.calls["/v1/chat/completions"] == 4
    assert res.verdicts[1].verdict == "no" and res.verdicts[1].attempts == 2


@pytest.mark.parametrize("idiom", ["No doubt, the reply is fully relevant.", "No problem here: the reply is relevant."])
def test_an_idiom_starting_with_no_is_reasked_not_read_as_no(idiom):
    """A sentence that only starts like a "no" is no verdict: the judge is asked
    again and the structured answer ("yes") is the verdict."""
    responder = ScriptedResponder([(reply_is("Paris"), [text(idiom), YES])], default=YES)
    with FakeOpenAIServer(responder) as server:
        res, _ = judged(chat(server), cache=False)
        assert server.calls["/v1/chat/completions"] == 4
    paris = res.verdicts[1]
    assert paris.verdict == "yes" and paris.attempts == 2 and paris.transcript[0].reply == idiom
    assert paris.transcript[0].error is not None


def test_an_idiom_every_time_is_a_judge_error_never_a_verdict():
    responder = ScriptedResponder([(reply_is("Paris"), text("No doubt, the reply is fully relevant."))], default=YES)
    with FakeOpenAIServer(responder) as server:
        res, _ = judged(chat(server), cache=False, max_tries=2)
    assert len(res.errors) == 1 and "invalid output after 2 tries" in res.errors[0].message
    assert [v.verdict for v in res.verdicts if v.verdict is not None] == ["yes", "yes"]


# -- a server that is down, wrong or hung ---------------------------------------

def test_a_refused_connection_stops_the_judge_after_the_first_request():
    url = f"http://127.0.0.1:{dead_port()}/v1"
    started = time.monotonic()
    res, _ = judged("openai:judge-model", base_url=url, max_concurrency=1, cache=False)
    assert time.monotonic() - started < 10
    assert res.status == "error" and len(res.errors) == 3
    first = [e for e in res.errors if e.attempts == 1]
    assert len(first) == 1 and "refused" in first[0].message.lower() and url in first[0].message
    assert all(e.attempts == 0 and "judge stopped" in e.message and url in e.message for e in res.errors if e.attempts == 0)


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_not_found_are_not_retried_and_stop_the_judge(status):
    with FakeOpenAIServer(ScriptedResponder([], default=error(status))) as server:
        res, judge = judged("openai:judge-model", base_url=server.base_url, max_concurrency=1, max_retries=5, cache=False)
        assert server.calls["/v1/chat/completions"] == 1
        url = server.base_url
    assert res.status == "error" and f"HTTP {status}" in res.errors[0].message
    assert url in judge.breaker.reason


def test_transient_failures_are_retried_and_attempts_count_the_requests_made():
    responder = ScriptedResponder([(reply_is("Paris"), [error(503), error(500), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        res, _ = judged("openai:judge-model", base_url=server.base_url, max_retries=3, cache=False)
        assert server.calls["/v1/chat/completions"] == 5
    paris = res.verdicts[1]
    assert paris.verdict == "no" and paris.attempts == 3
    assert [a.error is not None for a in paris.transcript] == [True, True, False]


def test_a_failure_that_persists_reports_every_request_made():
    responder = ScriptedResponder([(reply_is("Paris"), error(503))], default=YES)
    with FakeOpenAIServer(responder) as server:
        res, _ = judged("openai:judge-model", base_url=server.base_url, max_retries=2, cache=False)
        assert server.calls["/v1/chat/completions"] == 2 + 3
    (err,) = res.errors
    assert err.attempts == 3 and "HTTP 503" in err.message and "(3 requests)" in err.message


def test_retry_after_on_429_is_honoured():
    responder = ScriptedResponder([(reply_is("Paris"), [error(429, retry_after=0.6), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        started = time.monotonic()
        res, _ = judged("openai:judge-model", base_url=server.base_url, max_retries=1, cache=False)
        elapsed = time.monotonic() - started
    assert res.verdicts[1].verdict == "no" and res.verdicts[1].attempts == 2
    assert elapsed >= 0.6


def test_a_hung_server_times_out_per_request():
    responder = ScriptedResponder([(reply_is("Paris"), structured({"reason": "late", "verdict": "no"}, delay=5.0))],
                                  default=YES)
    with FakeOpenAIServer(responder) as server:
        res, _ = judged("openai:judge-model", base_url=server.base_url, timeout=0.3, max_retries=1, cache=False)
        assert server.calls["/v1/chat/completions"] == 2 + 2
    assert "Timeout" in res.errors[0].message and res.errors[0].attempts == 2


# -- prompt size -----------------------------------------------------------------

def test_a_prompt_over_the_limit_is_a_judge_error_not_a_call():
    long = {"id": "long", "turns": [{"role": "user", "content": "Tell me everything."},
                                   {"role": "assistant", "content": "word " * 3000}]}
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        res, _ = judged("openai:judge-model", long, base_url=server.base_url, max_prompt_tokens=2000, cache=False)
        ok, _ = judged("openai:judge-model", long, base_url=server.base_url, cache=False)
        assert server.calls["/v1/chat/completions"] == 1
    assert res.status == "error" and "prompt too long" in res.errors[0].message and res.errors[0].attempts == 0
    assert ok.status == "passed"


# -- rate limits -----------------------------------------------------------------

def test_rpm_spaces_the_requests_of_the_whole_run():
    times: list[float] = []
    lock = threading.Lock()

    def responder(request):
        with lock:
            times.append(time.monotonic())
        return YES

    convs = [{**MATH, "id": str(i)} for i in range(2)]  # 6 requests
    with FakeOpenAIServer(responder) as server:
        judge = resolve_judge(model="openai:judge-model", base_url=server.base_url, rpm=120, cache=False)
        graph = create_turn_relevancy_metric(model=judge)
        asyncio.run(graph.abatch([{"conversation": c} for c in convs]))
    # 120/min = 2/s with a burst of 2: the 6th request starts at least 2 s after the 1st
    # paced from the 3rd request on, 0.5 s apart (the 1st may reach the server late: its connection is opened)
    assert len(times) == 6 and max(times) - sorted(times)[2] >= 3 * 0.5 * 0.95
    assert judge.limiter.requests == 6


# -- the persistent cache --------------------------------------------------------

def test_a_second_run_is_answered_from_disk_with_zero_calls(tmp_path):
    path = tmp_path / "cache.sqlite"
    responder = ScriptedResponder([(reply_is("Paris"), NO)], default=YES)
    with FakeOpenAIServer(responder) as server:
        first, _ = judged("openai:judge-model", base_url=server.base_url, cache=path)
        calls = server.calls["/v1/chat/completions"]
        second, judge2 = judged("openai:judge-model", base_url=server.base_url, cache=path)  # a new judge: a new run
        assert server.calls["/v1/chat/completions"] == calls == 3
    assert [v.verdict for v in second.verdicts] == [v.verdict for v in first.verdicts]
    assert [v.reason for v in second.verdicts] == [v.reason for v in first.verdicts]
    assert second.score == first.score and second.usage.calls == 0 and second.usage.total_tokens == 0
    assert all(v.transcript[0].cached and v.transcript[0].reply for v in second.verdicts)
    assert judge2.cache.disk.hits == 3


def test_the_disk_cache_is_on_by_default_at_temperature_0_only(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGEGRAPH_JUDGE_CACHE", str(tmp_path / "default.sqlite"))
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        judged("openai:judge-model", base_url=server.base_url)
        judged("openai:judge-model", base_url=server.base_url)
        assert server.calls["/v1/chat/completions"] == 3  # built from a string: temperature 0
        judged(chat(server, temperature=0.7))
        judged(chat(server, temperature=0.7))
        assert server.calls["/v1/chat/completions"] == 3 + 6  # sampling: nothing kept on disk
    assert (tmp_path / "default.sqlite").exists()


def test_a_changed_rubric_or_prompt_file_misses(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        def run(**kw):
            judge = resolve_judge(model="openai:judge-model", base_url=server.base_url, cache=path)
            create_turn_relevancy_metric(model=judge, **kw).invoke({"conversation": MATH})
            return server.calls["/v1/chat/completions"]

        assert run() == 3 and run() == 3
        assert run(rubric="Relevant means on topic.") == 6
        prompts = tmp_path / "prompts" / "turn_relevancy"
        prompts.mkdir(parents=True)
        from judgegraph.data.prompts import load_prompt

        original = load_prompt("turn_relevancy/judge_turn").path.read_text()
        (prompts / "judge_turn.md").write_text(original.replace("First give a short reason", "Give a short reason"))
        monkeypatch.setenv("JUDGEGRAPH_PROMPTS_DIR", str(tmp_path / "prompts"))
        assert run() == 9 and run() == 9


def test_only_valid_answers_are_stored(tmp_path):
    path = tmp_path / "cache.sqlite"
    responder = ScriptedResponder([(reply_is("Paris"), [text("junk"), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        bad, _ = judged("openai:judge-model", base_url=server.base_url, cache=path, max_tries=1)
        good, _ = judged("openai:judge-model", base_url=server.base_url, cache=path, max_tries=1)
        assert server.calls["/v1/chat/completions"] == 3 + 1
    assert bad.verdicts[1].verdict is None and good.verdicts[1].verdict == "no"


def test_the_request_on_the_wire_is_the_strict_json_schema_structured_output_sends():
    from openai.lib._pydantic import to_strict_json_schema  # the SDK's own, as with_structured_output sends it

    from judgegraph.core.statements import StatementVerdicts
    from judgegraph.metrics.relevancy import TurnVerdict

    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        judged("openai:judge-model", base_url=server.base_url, cache=False)
        (body, *_) = server.chat_requests
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "TurnVerdict"
    assert fmt["json_schema"]["schema"] == to_strict_json_schema(TurnVerdict)
    from judgegraph.providers.openai import strict_json_schema

    assert strict_json_schema(StatementVerdicts) == to_strict_json_schema(StatementVerdicts)
