"""`judgegraph` as a user runs it, with the offline judge (no key, no LLM)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judgegraph.cli import main
from tests.kit import cli

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"


def records(path):
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return [r for r in lines if r["type"] not in ("header", "summary")]  # the run's own records


def test_first_readme_command_prints_a_table_and_writes_results(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    code = main(["eval", str(EX / "support_chats.jsonl"), "--out", str(out), "--no-progress"])
    printed = capsys.readouterr()
    assert code == 0
    assert "offline" in printed.err and "all-MiniLM-L6-v2" in printed.err
    assert "judgegraph results" in printed.out and "refund-ok" in printed.out and "turn_relevancy" in printed.out
    rows = records(out)
    assert {r["conversation_id"] for r in rows} == {"refund-ok", "password-reset", "shipping-delay", "size-exchange", "warranty-policy", "discount-code"}
    shipping = next(r for r in rows if r["conversation_id"] == "shipping-delay")["results"]["turn_relevancy"]
    assert [v["verdict"] for v in shipping["verdicts"]].count("no") == 1  # the running-shoe history detour
    assert shipping["judge"] == "offline:all-MiniLM-L6-v2" and "judge_rule" in shipping["details"]


def test_failed_threshold_exits_1_and_file_options_are_honoured(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(EX / "promptfoo_tests.yaml"), "--out", str(out), "--no-progress"]) == 1
    math = next(r for r in records(out) if r["conversation_id"].startswith("math"))["results"]["conversation_relevance"]
    assert math["threshold"] == 0.8 and math["details"]["window_size"] == 2
    assert math["score"] == pytest.approx(2 / 3) and math["passed"] is False


def test_command_line_overrides_the_file(tmp_path):
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(EX / "promptfoo_tests.yaml"), "--threshold", "0.5", "--out", str(out), "--no-progress", "-q"]) == 0
    assert {r["results"]["conversation_relevance"]["threshold"] for r in records(out)} == {0.5}


def test_bad_records_are_reported_the_rest_judged_exit_3(tmp_path, capsys):
    bad = tmp_path / "mixed.jsonl"
    good = (EX / "support_chats.jsonl").read_text().splitlines()[0]
    bad.write_text("\n".join([good, '{"id": "x", "turns": [{"role": "bot", "content": "hi"}]}', "{not json"]) + "\n")
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(bad), "--out", str(out), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert f"{bad}:2: turns.0.role" in err and f"{bad}:3" in err
    rows = records(out)
    assert [r["conversation_id"] for r in rows if r["type"] == "conversation"] == ["refund-ok"]
    assert [(r["line"], r["field"]) for r in rows if r["type"] == "input_error"] == [(2, "turns.0.role"), (3, None)]


@pytest.mark.parametrize("argv,msg", [
    (["-m", "no-such-metric"], "unknown metric"),
    (["-m", "turn-relevance"], "(did you mean 'turn-relevancy'?)"),  # issue 27.6
    (["--window-size", "0"], "window-size"),
    (["--reason", "llm"], "needs an LLM judge"),
    (["--threshold", "1.5"], "--threshold must be between 0 and 1"),
    (["--threshold", "nan"], "--threshold must be between 0 and 1"),
    (["--max-tries", "0"], "--max-tries must be a whole number >= 1, got 0"),
    (["--window-size", "0"], "--window-size must be a whole number >= 1, got 0"),
    (["--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --model"),
])
def test_usage_errors_exit_2(argv, msg, capsys, tmp_path):
    assert main(["eval", str(EX / "support_chats.jsonl"), "--out", str(tmp_path / "r.jsonl"), *argv]) == 2
    assert msg in capsys.readouterr().err


def test_graph_command_prints_mermaid(capsys):
    assert main(["graph", "turn-relevancy"]) == 0
    text = capsys.readouterr().out
    assert "window_turns" in text and "judge_turn" in text and "reduce_score" in text and "graph TD" in text


def test_graph_command_takes_the_options_a_metric_needs(capsys):
    assert main(["graph", "conversational-guidelines"]) == 2
    assert "needs at least one --guideline TEXT" in capsys.readouterr().err
    assert main(["graph", "conversational-guidelines", "--guideline", "Be kind."]) == 0
    assert "judge_guideline" in capsys.readouterr().out


def test_metrics_command_lists_both(capsys):
    assert main(["metrics"]) == 0
    out = capsys.readouterr().out
    assert "turn-relevancy" in out and "conversation-relevance" in out


def test_installed_console_script_runs(tmp_path):
    exe = Path(sys.executable).with_name("judgegraph")
    proc = subprocess.run([str(exe), "graph", "conversation-relevance"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "judge_turn" in proc.stdout


def test_graph_of_several_metrics_draws_the_report(capsys):
    assert main(["graph", "turn-relevancy", "response-relevancy"]) == 0
    text = capsys.readouterr().out
    assert "prepare" in text and "turn_relevancy" in text and "response_relevancy" in text and "subgraph" in text


@pytest.mark.parametrize("argv,msg", [
    (["-m", "conversational-guidelines"], "needs at least one --guideline TEXT"),
    (["-m", "turn-contextual-relevancy", "--verify"], "needs an LLM judge"),
])
def test_metric_settings_are_checked_before_any_work(argv, msg, capsys, tmp_path):
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(EX / "session_chats.jsonl"), "--out", str(out), *argv]) == 2
    assert msg in capsys.readouterr().err and not out.exists()


def test_guidelines_and_role_reach_the_judge(tmp_path, bare_env):
    from tests.kit.openai_server import FakeOpenAIServer, schema_responder, structured

    def responder(request):
        """A verdict for each turn a role-adherence call lists; a schema example for the rest."""
        if "<turns_to_judge>" not in request.text:
            return schema_responder(request)
        listed = request.text.split("<turns_to_judge>\n")[1].split("\n</turns_to_judge>")[0]
        return structured({"verdicts": [{"turn": int(n), "reason": "In role.", "verdict": "yes"}
                                        for n in listed.split(",")]})

    rules = tmp_path / "rules.txt"
    rules.write_text("Never ask for the card number.\n\nAlways offer a human agent.\n")
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(EX / "session_chats.jsonl"), "-q", "--no-progress",
                        "-m", "conversational-guidelines", "--guideline", "Apologise for problems.", "--guideline", f"@{rules}",
                        "-m", "role-adherence", "--role", "A cheerful pirate.",
                        "--model", "openai:judge", "--base-url", server.base_url, "--out", str(tmp_path / "r.jsonl")], timeout=120, env={**bare_env, "HOME": str(tmp_path)})
        bodies = json.dumps(server.requests)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # judged, every conversation passed; 3 would be errors
    for text in ("Apologise for problems.", "Never ask for the card number.", "Always offer a human agent.", "A cheerful pirate."):
        assert text in bodies
    rows = [r for r in records(tmp_path / "r.jsonl") if r["type"] == "conversation"]
    assert {k for r in rows for k in r["results"]} == {"conversational_guidelines", "role_adherence"}
    assert {res["status"] for r in rows for res in r["results"].values()} == {"passed"}


def test_response_relevancy_with_llm_questions_and_server_embeddings(tmp_path, bare_env):
    from tests.kit.openai_server import FakeOpenAIServer, structured

    def responder(request):
        return structured({"reason": "what the reply answers", "questions": [
            {"question": f"Question {i} about the reply?", "noncommittal": False} for i in range(1, 4)]})

    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(responder) as server:
        proc = cli.run(["eval", str(EX / "ragas_samples.jsonl"), "-q", "--no-progress",
                        "-m", "response-relevancy", "--n-questions", "3", "--embeddings", "openai:text-embedding-3-small",
                        "--model", "openai:judge", "--base-url", server.base_url, "--out", str(out)], timeout=120, env={**bare_env, "HOME": str(tmp_path)})
        chats, embeds = server.calls["/v1/chat/completions"], server.calls["/v1/embeddings"]
    assert proc.returncode in (0, 1), proc.stderr
    rows = [r for r in records(out) if r["type"] == "conversation"]
    assert chats == embeds == len(rows) == 5  # one generation and one embedding batch per exchange
    assert all(r["results"]["response_relevancy"]["details"]["embedding_calls"] == 1 for r in rows)
