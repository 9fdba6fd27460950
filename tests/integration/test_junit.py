"""`judgegraph eval --junit FILE`: one test case per conversation × metric;
threshold failures, judge errors, run/input errors and n/a told apart."""

import json
import xml.etree.ElementTree as ET

import pytest

from judgegraph.apps.junit import junit_from_results, write_junit
from judgegraph.cli import main
from judgegraph.runs import read_run
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured, text

pytestmark = pytest.mark.integration

YES = structured({"reason": "It answers the question.", "verdict": "yes"})
NO = structured({"reason": "It is about Paris, not sums.", "verdict": "no"})


def chat(cid, reply):
    return {"id": cid, "turns": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": reply}]}


def test_junit_xml_counts_failures_errors_and_skips(tmp_path):
    data = tmp_path / "chats.jsonl"
    rows = [chat("good", "2+2 equals 4."), chat("off-topic", "The capital of France is Paris."),
            chat("broken-judge", "BROKEN <b>&amp; reply"),
            {"id": "no-reply", "turns": [{"role": "user", "content": "hello?"}]}]
    data.write_text("\n".join(json.dumps(r) for r in rows) + '\n{"id": "x", "turns": [{"role": "bot", "content": "hi"}]}\n')
    responder = ScriptedResponder([("Paris", NO), ("BROKEN", text("not json"))], default=YES)
    junit, out = tmp_path / "ci" / "junit.xml", tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder) as server:
        code = main(["eval", str(data), "-m", "turn-relevancy", "-m", "conversation-relevance", "--model", "openai:judge",
                     "--base-url", server.base_url, "--max-tries", "1", "--out", str(out), "--junit", str(junit),
                     "--no-progress", "-q"])
    assert code == 3
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    # 4 conversations × 2 metrics + 1 input error
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("9", "2", "3", "2")
    assert root.get("tests") == "9"
    for metric in ("turn_relevancy", "conversation_relevance"):
        assert list(cases[("good", metric)]) == [cases[("good", metric)].find("system-out")]
        failure = cases[("off-topic", metric)].find("failure")
        assert failure.get("type") == "threshold" and "Paris, not sums" in failure.text
        assert cases[("off-topic", metric)].find("error") is None
        error = cases[("broken-judge", metric)].find("error")
        assert error.get("type") == "judge_error" and cases[("broken-judge", metric)].find("failure") is None
        assert "1 judgement(s) could not be made" == error.get("message")
        assert cases[("no-reply", metric)].find("skipped") is not None
    (input_case,) = [c for (cls, _), c in cases.items() if cls == "input"]
    assert input_case.get("name") == f"{data}:5 turns.0.role" and input_case.find("error").get("type") == "input_error"
    assert "turns.0" in input_case.find("error").get("message")


def test_a_failed_run_is_an_error_case_and_content_stays_text():
    records = [{"type": "conversation", "conversation_id": "c<1>", "source": "f", "results": {}, "error": "Boom: <x/>"}]
    root = junit_from_results(records).getroot()
    (case,) = root.iter("testcase")
    assert (case.get("classname"), case.get("name")) == ("c<1>", "run")
    assert case.find("error").get("type") == "run_error" and case.find("error").text == "Boom: <x/>"
    assert ET.fromstring(ET.tostring(root)).find("testsuite").get("errors") == "1"


def test_control_characters_and_surrogates_still_make_xml_that_parses(tmp_path):
    bad = "id\x1b[31m\x00\x0b\udfff\ufffe"
    results = tmp_path / "r.jsonl"
    records = [
        {"type": "conversation", "conversation_id": bad, "source": f"f\x01:{bad}", "results": {
            f"m\x02{bad}": {"status": "failed", "score": 0.1, "threshold": 0.5, "judge": "j\x03", "reason": f"r\x04{bad}",
                            "errors": []},
            "odd": {"status": "passed", "score": None, "threshold": None, "reason": "ok"}},
         "error": f"boom\x05{bad}"},
        {"type": "input_error", "file": "in\x06.jsonl", "line": 3, "field": "turns.0\x07", "error": f"bad\x08{bad}"},
    ]
    lines = [json.dumps(rec).encode() for rec in records]  # the lone surrogate as the escape "\\udfff"
    lines.append(b'{"type": "conversation", "conversation_id": "bytes\xff\\u001b", "results": {}, "error": "x"}')
    lines.append(b'[' * 100_000 + b']' * 100_000)
    results.write_bytes(b"\n".join(lines) + b"\n")
    out = write_junit(results, tmp_path / "junit.xml")
    root = ET.parse(out).getroot()  # the old writer wrote "\x1b" raw: "not well-formed (invalid token)"
    classes = {c.get("classname") for c in root.iter("testcase")}
    assert "id\\x1b[31m\\x00\\x0b\\udfff\\ufffe" in classes
    # a line that is not UTF-8 is left out and named, as every reader of a results file does (judgegraph.runs)
    assert not any(c.startswith("bytes") for c in classes)
    assert f"{results}:3: not valid UTF-8" in read_run(results).problems[0]
    failure = next(root.iter("failure"))
    assert failure.text.startswith("r\\x04id\\x1b")
