"""``judgegraph rejudge`` against the loopback OpenAI server: exactly the chosen windows cost calls."""

import json

import pytest

from judgegraph.cli import main
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured, text

pytestmark = pytest.mark.integration

YES = structured({"reason": "It answers the question.", "verdict": "yes"})
NO = structured({"reason": "Not exact enough for the strict rubric.", "verdict": "no"})
CONVS = [
    {"id": "math", "turns": [
        {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
        {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "About six, I think."},
        {"role": "user", "content": "Can you solve 5+5?"}, {"role": "assistant", "content": "5+5 equals 10."},
    ]},
    {"id": "other", "turns": [
        {"role": "user", "content": "Hi, what is 1+1?"}, {"role": "assistant", "content": "1+1 is 2."},
    ]},
]


def strict_rule(req):
    return "STRICT" in req.text


@pytest.fixture
def files(tmp_path):
    conv = tmp_path / "chats.jsonl"
    conv.write_text("".join(json.dumps(c) + "\n" for c in CONVS), encoding="utf-8")
    return tmp_path, conv


def lines(path):
    """Result lines by conversation id (eval writes them in the order they finish)."""
    return {r["conversation_id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())
            if r["type"] == "conversation"}


def test_rejudge_cli_calls_only_the_chosen_window(files, capsys):
    tmp, conv = files
    results, new = tmp / "results.jsonl", tmp / "new.jsonl"
    # a malformed first reply under the strict rubric: re-asked, still one window
    responder = ScriptedResponder([(strict_rule, [text("not json"), NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        common = ["--model", "gpt-4.1-mini", "--base-url", server.base_url]
        assert main(["eval", str(conv), "-m", "turn-relevancy", *common, "--out", str(results), "-q",
                     "--no-progress"]) == 0
        assert server.calls["/v1/chat/completions"] == 4  # 3 + 1 windows
        status = main(["rejudge", str(results), "--input", str(conv), "-m", "turn-relevancy",
                       "--conversation", "math", "--window", "1", "--rubric", "STRICT: exact numbers only.",
                       *common, "--out", str(new)])
        assert server.calls["/v1/chat/completions"] == 4 + 2  # the chosen window only (asked, re-asked)
    assert status == 0  # 2 of 3 still pass 0.5
    before, after = lines(results), lines(new)
    assert after["other"] == before["other"]  # the other conversation is copied as it was
    old, res = before["math"]["results"]["turn_relevancy"], after["math"]["results"]["turn_relevancy"]
    assert [v["verdict"] for v in old["verdicts"]] == ["yes", "yes", "yes"]
    assert [v["verdict"] for v in res["verdicts"]] == ["yes", "no", "yes"]
    assert res["verdicts"][1]["attempts"] == 2 and res["verdicts"][0] == old["verdicts"][0]
    assert res["score"] == pytest.approx(2 / 3) and "turn 4" in res["reason"]
    assert res["details"]["rejudged"]["windows"] == [1]
    assert res["usage"]["calls"] == 4  # 2 kept + 2 new
    assert "2 judge call(s)" in capsys.readouterr().out


def test_rejudge_cli_all_windows_of_one_conversation_with_a_prompt_file(files, tmp_path):
    tmp, conv = files
    results, new = tmp / "results.jsonl", tmp / "new.jsonl"
    prompt = tmp_path / "strict_turn.md"
    prompt.write_text("STRICT prompt. User: {{ user_message }}\nReply: <reply_to_judge>{{ reply }}</reply_to_judge>\n",
                      encoding="utf-8")
    with FakeOpenAIServer(ScriptedResponder([(strict_rule, NO)], default=YES)) as server:
        common = ["--model", "gpt-4.1-mini", "--base-url", server.base_url]
        main(["eval", str(conv), "-m", "turn-relevancy", *common, "--out", str(results), "-q", "--no-progress"])
        status = main(["rejudge", str(results), "--input", str(conv), "-m", "turn-relevancy", "--conversation",
                       "other", "--prompt", str(prompt), *common, "--out", str(new)])
        assert server.calls["/v1/chat/completions"] == 4 + 1
    assert status == 1  # the re-judged conversation now fails
    after = lines(new)
    assert after["other"]["results"]["turn_relevancy"]["status"] == "failed"
    assert after["math"] == lines(results)["math"]


def test_rejudge_cli_bad_window_keeps_the_result_and_exits_3(files, capsys):
    tmp, conv = files
    results, new = tmp / "results.jsonl", tmp / "new.jsonl"
    with FakeOpenAIServer(ScriptedResponder([], default=YES)) as server:
        common = ["--model", "gpt-4.1-mini", "--base-url", server.base_url]
        main(["eval", str(conv), "-m", "turn-relevancy", *common, "--out", str(results), "-q", "--no-progress"])
        status = main(["rejudge", str(results), "--input", str(conv), "-m", "turn-relevancy", "--window", "2",
                       "--rubric", "STRICT", *common, "--out", str(new)])
        assert server.calls["/v1/chat/completions"] == 4 + 1  # window 2 of "math"; "other" has no window 2
    assert status == 3
    err = capsys.readouterr().err
    assert "conversation 'other'" in err and "no window 2" in err
    assert lines(new)["other"] == lines(results)["other"]
    assert lines(new)["math"]["results"]["turn_relevancy"]["details"]["rejudged"]["windows"] == [2]


def test_rejudge_cli_refuses_uncovered_metrics_and_missing_model(files):
    tmp, conv = files
    assert main(["rejudge", str(conv), "--input", str(conv), "-m", "user-frustration", "--rubric", "x",
                 "--model", "gpt-4.1-mini", "--out", str(tmp / "n.jsonl")]) == 2
    assert main(["rejudge", str(conv), "--input", str(conv), "-m", "turn-relevancy", "--rubric", "x",
                 "--out", str(tmp / "n.jsonl")]) == 2


def test_rejudge_refuses_to_replace_an_existing_out_without_overwrite(files, capsys):
    tmp, conv = files
    results, new = tmp / "results.jsonl", tmp / "new.jsonl"
    with FakeOpenAIServer(ScriptedResponder([(strict_rule, NO)], default=YES)) as server:
        common = ["--model", "gpt-4.1-mini", "--base-url", server.base_url]
        main(["eval", str(conv), "-m", "turn-relevancy", *common, "--out", str(results), "-q", "--no-progress"])
        new.write_text('{"precious": true}\n', encoding="utf-8")
        rejudge = ["rejudge", str(results), "--input", str(conv), "-m", "turn-relevancy", "--rubric", "STRICT.",
                   *common, "--out", str(new)]
        calls = server.calls["/v1/chat/completions"]
        assert main(rejudge) == 2  # the old rejudge replaced it silently
        err = capsys.readouterr().err
        assert "already holds results" in err and str(new) in err and "--overwrite" in err
        assert new.read_text(encoding="utf-8") == '{"precious": true}\n'
        assert server.calls["/v1/chat/completions"] == calls  # refused before any call
        assert main([*rejudge, "--overwrite"]) in (0, 1)
    assert set(lines(new)) == {"math", "other"} and not (tmp / "new.jsonl.lock").exists()


def test_rejudge_writes_its_own_header_and_diff_names_what_was_rejudged(files, capsys):
    """Issue 25: rejudge copied the old header, so `diff old new` said 'same judges, prompts and metric options'
    though a verdict used a new rubric and another model; and a result half judged by each named only the new one."""
    tmp, conv = files
    results, new = tmp / "results.jsonl", tmp / "new.jsonl"
    responder = ScriptedResponder([(strict_rule, NO)], default=YES)
    with FakeOpenAIServer(responder) as server:
        url = ["--base-url", server.base_url]
        assert main(["eval", str(conv), "-m", "turn-relevancy", "--model", "gpt-4.1-mini", *url, "--out", str(results),
                     "-q", "--no-progress"]) == 0
        assert main(["rejudge", str(results), "--input", str(conv), "-m", "turn-relevancy", "--conversation", "math",
                     "--window", "1", "--rubric", "STRICT: exact numbers only.", "--model", "gpt-4.1", *url,
                     "--out", str(new)]) == 0
    records = [json.loads(line) for line in new.read_text(encoding="utf-8").splitlines()]
    header = records[0]
    assert header["type"] == "header" and sum(r["type"] == "header" for r in records) == 1
    assert not any(r["type"] == "summary" for r in records)  # the old summary's pass rates no longer hold
    assert [j["name"] for j in header["judges"]] == ["llm:gpt-4.1-mini", "llm:gpt-4.1"]
    assert header["rejudged"]["from"]["path"] == str(results) and len(header["rejudged"]["from"]["sha256"]) == 64
    assert header["rejudged"]["rubric"] == "STRICT: exact numbers only."
    assert header["rejudged"]["conversations"] == ["math"] and header["rejudged"]["verdicts"] == ["1"]
    res = lines(new)["math"]["results"]["turn_relevancy"]
    assert res["details"]["rejudged"]["judges"] == {"llm:gpt-4.1": ["1"], "llm:gpt-4.1-mini": ["0", "2"]}
    capsys.readouterr()
    main(["diff", str(results), str(new)])
    out = capsys.readouterr().out
    assert "same judges, prompts and metric options" not in out
    assert "re-judged" in out and "rubric" in out and "gpt-4.1" in out
    assert main(["show", str(new), "--conversation", "math", "--metric", "turn_relevancy"]) == 0
    assert "verdicts by two judges: llm:gpt-4.1: 1; llm:gpt-4.1-mini: 0, 2" in capsys.readouterr().out


@pytest.mark.parametrize("target", ["results", "chats", "folder"])
def test_rejudge_refuses_an_out_that_is_results_an_input_or_a_folder(files, capsys, target):
    """rejudge's --out is checked as eval's (resultsfile.check_out_path): the conversations file given with --input
    was not protected: with --overwrite the new file replaced it."""
    tmp, conv = files
    results = tmp / "results.jsonl"
    results.write_text('{"type": "header"}\n', encoding="utf-8")
    out = {"results": results, "chats": conv, "folder": tmp}[target]
    before = conv.read_bytes()
    status = main(["rejudge", str(results), "--input", str(conv), "-m", "turn-relevancy", "--rubric", "R",
                   "--model", "gpt-4.1-mini", "--base-url", "http://127.0.0.1:9", "--out", str(out), "--overwrite"])
    assert status == 2 and conv.read_bytes() == before
    assert ("is a directory" if target == "folder" else "is one of the input files") in capsys.readouterr().err
