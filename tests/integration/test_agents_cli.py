"""tool_correctness and goal_completion through the command line: reference checks with no judge at all (results,
``show`` and the HTML turn view), ``--trajectory`` / ``--tool-arguments``, a bad ``expected_tools`` as an input error
naming file, line and field, and both metrics judged over the loopback OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judgegraph.cli import main
from judgegraph.outputs.html import report_data
from judgegraph.runs import read_run
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

WEATHER = {"id": "weather", "expected_outcome": "The user learns the weather in SF and London.", "turns": [
    {"role": "user", "content": "What is the weather in SF and London?",
     "metadata": {"expected_tools": [[{"name": "get_weather", "args": {"city": "London"}},
                                      {"name": "get_weather", "args": {"city": "SF"}}]]}},
    {"role": "assistant", "content": "", "tool_calls": [
        {"name": "get_weather", "arguments": {"city": "SF"}, "id": "1", "output": "80 and sunny"},
        {"name": "get_weather", "arguments": {"city": "London"}, "id": "2", "output": "90 and rainy"}]},
    {"role": "tool", "content": "80 and sunny"},
    {"role": "tool", "content": "90 and rainy"},
    {"role": "assistant", "content": "SF: 80 and sunny. London: 90 and rainy."},
    {"role": "user", "content": "And Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "3", "output": "70 and cloudy"},
        {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "4", "output": "70 and cloudy"}]},
    {"role": "assistant", "content": "Paris: 70 and cloudy."},
]}


def write(tmp: Path, *records: dict[str, Any]) -> Path:
    path = tmp / "chats.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def results_of(path: Path, metric: str) -> dict[str, Any]:
    (line,) = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()
               if json.loads(x).get("type", "conversation") == "conversation"]
    return line["results"][metric]


def test_reference_checks_run_with_no_judge_and_show_in_show_and_the_html_turn_view(tmp_path, capsys):
    conv, out = write(tmp_path, WEATHER), tmp_path / "results.jsonl"
    code = main(["eval", str(conv), "-m", "tool_correctness", "--out", str(out), "-q", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    res = results_of(out, "tool_correctness")
    (v,) = res["verdicts"]  # exchange 2 has no reference: the offline judge leaves it unchecked
    assert v["id"] == "exchange-1" and v["by"] == "reference" and v["verdict"] == "yes" and v["transcript"] == []
    assert res["usage"]["calls"] == 0 and res["score"] == 1.0
    capsys.readouterr()
    assert main(["show", str(out), "--conversation", "weather", "--metric", "tool_correctness"]) == 0
    assert "Called get_weather" in capsys.readouterr().out
    assert main(["report", str(out), "-o", str(tmp_path / "r.html"), "--input", str(conv)]) == 0
    data, problems = report_data(read_run(out), inputs=[conv])
    (shown,) = data["conversations"]
    (html_v,) = shown["results"]["tool_correctness"]["verdicts"]
    assert not problems and html_v["turns"] == [1, 4] and len(shown["turns"]) == len(WEATHER["turns"])


def test_the_trajectory_flag_is_the_metric_s_match_mode(tmp_path, capsys):
    conv = write(tmp_path, WEATHER)
    strict, subset = tmp_path / "strict.jsonl", tmp_path / "subset.jsonl"
    assert main(["eval", str(conv), "-m", "tool_correctness", "--trajectory", "strict", "--out", str(strict), "-q",
                 "--no-progress"]) == 0  # the reference's nested list: one step, its calls in any order
    one = {**WEATHER, "turns": [{**WEATHER["turns"][0], "metadata": {"expected_tools": ["get_weather"]}},
                                *WEATHER["turns"][1:]]}
    conv = write(tmp_path, one)
    assert main(["eval", str(conv), "-m", "tool_correctness", "--trajectory", "subset", "--out", str(subset), "-q",
                 "--no-progress"]) == 1  # two calls, the reference has one: the second is not in it
    assert "not in the reference" in results_of(subset, "tool_correctness")["reason"]


def test_a_bad_expected_tools_is_an_input_error_naming_file_line_and_field(tmp_path, capsys):
    bad = {**WEATHER, "id": "bad", "turns": [{**WEATHER["turns"][0], "metadata": {"expected_tools": [{"tool": "x"}]}},
                                             *WEATHER["turns"][1:]]}
    conv, out = write(tmp_path, WEATHER, bad), tmp_path / "results.jsonl"
    code = main(["eval", str(conv), "-m", "tool_correctness", "--out", str(out), "-q", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 3  # could not judge everything: never a pass, never a crash
    assert f"{conv}:2" in err and "turns.0.metadata" in err and "expected_tools[0]: unknown key 'tool'" in err
    assert results_of(out, "tool_correctness")["score"] == 1.0  # the good conversation is judged and kept


def responder() -> ScriptedResponder:
    def reply(request):
        if request.schema_name == "GoalCompletionJudgement":
            return structured({"user_goal": "Weather in SF and London.", "end_state": "Both given.",
                               "reason": "Turn 5 gives both.", "turn": 5, "verdict": "yes"})
        if request.schema_name == "ToolCallJudgement":
            return structured({"reason": "Call 2 repeats call 1 with the same arguments.", "verdict": "no"})
        raise LookupError(request.schema_name)

    return ScriptedResponder(default=reply)


def test_both_metrics_judged_over_the_loopback_server(tmp_path, capsys):
    conv, out = write(tmp_path, WEATHER), tmp_path / "results.jsonl"
    with FakeOpenAIServer(responder()) as server:
        code = main(["eval", str(conv), "-m", "tool_correctness", "-m", "goal_completion", "--model", "gpt-4.1-mini",
                     "--base-url", server.base_url, "--no-cache", "--out", str(out), "-q", "--no-progress"])
        sent = [json.dumps(body["messages"]) for body in server.chat_requests]
    assert code == 0, capsys.readouterr().err  # 1 of 2 checks right: 0.5, at the threshold
    tools, goal = results_of(out, "tool_correctness"), results_of(out, "goal_completion")
    assert [v["by"] for v in tools["verdicts"]] == ["reference", "judge"] and tools["score"] == 0.5
    assert goal["score"] == 1.0 and goal["details"]["reached_in_turn"] == 5
    assert len(sent) == 2 and any("[call 2] get_weather" in s for s in sent)  # one tool judgement, one goal judgement
