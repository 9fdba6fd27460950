"""Juries and --repeat end to end on the loopback OpenAI-compatible server: the real client path,
seeds on the wire, the provider's system_fingerprint in transcripts, and the CLI flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgegraph import resolve_judge
from judgegraph.cli import main
from judgegraph.metrics import get_metric
from tests.kit import cli
from tests.kit.openai_server import ChatRequest, FakeOpenAIServer, error, schema_responder, structured

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CHATS = ROOT / "examples" / "support_chats.jsonl"


def flaky(request: ChatRequest):
    """A judge whose answer flips with the seed: even seeds say yes, odd seeds no."""
    if request.schema_name != "TurnVerdict":
        return schema_responder(request)
    return structured({"reason": f"seed {request.seed}", "verdict": "yes" if (request.seed or 0) % 2 == 0 else "no"})


def by_model(request: ChatRequest):
    """Three jurors: ``b`` always says no, ``c`` is not served (404), the rest say yes."""
    if request.model == "c":
        return error(404, "The model `c` does not exist")
    if request.schema_name != "TurnVerdict":
        return schema_responder(request)
    return structured({"reason": f"judge {request.model}", "verdict": "no" if request.model == "b" else "yes"})


def conversation_lines(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if r.get("type", "conversation") == "conversation"]


def test_repeats_send_distinct_seeds_and_record_them_with_the_fingerprint():
    with FakeOpenAIServer(flaky) as server:
        judge = resolve_judge("openai:judge", base_url=server.base_url, repeat=3, temperature=0.7, cache=False)
        graph = get_metric("turn_relevancy").factory(model=judge)
        res = graph.invoke({"conversation": json.loads(CHATS.read_text().splitlines()[0])})["results"]["turn_relevancy"]
        seeds = sorted({r["seed"] for r in server.requests if "seed" in r})
    assert seeds == [0, 1, 2] and res.judge == "jury(majority):llm:judge*3"
    assert [j["settings"]["seed"] for j in judge.settings["jurors"]] == [0, 1, 2]
    for v in res.verdicts:
        assert v.verdict == "yes"  # seeds 0 and 2 say yes
        assert [(x.repeat, x.verdict) for x in v.votes] == [(0, "yes"), (1, "no"), (2, "yes")]
        assert [a.settings["seed"] for a in v.transcript] == [0, 1, 2]
        assert {a.settings["temperature"] for a in v.transcript} == {0.7}  # left as the user set it
        assert {a.system_fingerprint for a in v.transcript} == {"fp_judgegraph"}


def test_a_repeat_at_temperature_0_of_a_model_with_no_seed_warns_once():
    from judgegraph import ScriptedChatModel
    from judgegraph.judges.llm import LLMJudge

    class Still(ScriptedChatModel):
        temperature: float = 0.0

    with pytest.warns(UserWarning, match="takes no seed and runs at temperature 0"):
        resolve_judge(LLMJudge(Still(default={}, model_name="still-model")), repeat=3)


def test_cli_jury_keeps_every_vote_tolerates_a_dead_juror_and_names_itself(tmp_path, bare_env):
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(by_model) as server:
        proc = cli.run(["eval", str(CHATS), "-q", "--no-progress", "--no-cache",
                        "--model", "openai:a", "--model", "openai:b", "--model", "openai:c", "--base-url", server.base_url,
                        "--out", str(out)], timeout=120, env={**bare_env, "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [r["results"]["turn_relevancy"] for r in conversation_lines(out)]
    assert results and {r["judge"] for r in results} == {"jury(majority):llm:a,llm:b,llm:c"}
    for r in results:
        assert r["status"] == "passed" and not r["errors"]
        for v in r["verdicts"]:
            votes = [(x["judge"], x["verdict"]) for x in v["votes"]]
            assert votes == [("llm:a", "yes"), ("llm:b", "no"), ("llm:c", None)] and v["verdict"] == "yes"
            assert "404" in v["votes"][2]["error"]


def test_cli_repeat_gives_numbered_votes_and_seeds_in_transcripts(tmp_path, bare_env):
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(flaky) as server:
        proc = cli.run(["eval", str(CHATS), "-q", "--no-progress", "--no-cache",
                        "--model", "openai:judge", "--base-url", server.base_url, "--repeat", "3", "--aggregate", "unanimous",
                        "--out", str(out)], timeout=120, env={**bare_env, "HOME": str(tmp_path)})
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # unanimous: repeat 1 says no, so the verdict is no
    for row in conversation_lines(out):
        for v in row["results"]["turn_relevancy"]["verdicts"]:
            assert [x["repeat"] for x in v["votes"]] == [0, 1, 2] and v["verdict"] == "no"
            assert [a["settings"]["seed"] for a in v["transcript"]] == [0, 1, 2]
            assert {a["system_fingerprint"] for a in v["transcript"]} == {"fp_judgegraph"}


@pytest.mark.parametrize(("argv", "msg"), [
    (["--model", "openai:a", "--model", "openai:b", "--quorum", "3"], "quorum must be a whole number from 1 to 2"),
    (["--model", "openai:a", "--repeat", "0"], "--repeat must be"),
    (["--model", "openai:a", "--quorum", "1"], "quorum is a jury's setting"),
    (["--model", "openai:a", "--aggregate", "any"], "aggregate is a jury's setting"),
])
def test_bad_jury_flags_are_usage_errors(argv, msg, tmp_path, capsys):
    code = main(["eval", str(CHATS), "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path / "r.jsonl"), *argv])
    assert code == 2 and msg in capsys.readouterr().err


def test_graph_draws_the_jury_beside_the_metric(capsys):
    assert main(["graph", "turn-relevancy", "--model", "openai:a", "--model", "openai:b"]) == 0
    text = capsys.readouterr().out
    assert "judge_turn" in text and "juror_1 openai/a" in text and "juror_2 openai/b" in text
    assert "aggregate" in text


def dry_total(capsys, *models: str, repeat: int = 1) -> tuple[int, float]:
    """The dry run's total calls and dollars (the table's total row) for a jury of ``models`` (``repeat`` each)."""
    argv = [a for m in models for a in ("--model", m)] + (["--repeat", str(repeat)] if repeat > 1 else [])
    assert main(["eval", str(CHATS), *argv, "--dry-run", "--no-progress", "--out", "unused.jsonl"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "total" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    return int(cells[1]), float(cells[4].lstrip("$"))


def test_a_dry_run_of_a_jury_counts_every_juror_and_repeat_each_at_its_own_price(capsys):
    calls, mini = dry_total(capsys, "openai:gpt-4.1-mini")
    big = dry_total(capsys, "openai:gpt-4.1")[1]
    assert dry_total(capsys, "openai:gpt-4.1-mini", repeat=3) == (3 * calls, pytest.approx(3 * mini, abs=2e-4))
    assert dry_total(capsys, "openai:gpt-4.1-mini", "openai:gpt-4.1") == (2 * calls, pytest.approx(mini + big, abs=2e-4))
    assert big > 2 * mini  # was: 20 calls and the first juror's price for all of them


def test_a_live_run_with_repeat_prices_every_juror_at_the_model_s_listed_price(tmp_path, bare_env):
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(schema_responder) as server:
        proc = cli.run(["eval", str(CHATS), "--no-progress", "--no-cache",
                        "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--repeat", "3", "--out", str(out)], timeout=120, env={**bare_env, "HOME": str(tmp_path)})
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert "cost unknown" not in proc.stdout + proc.stderr  # was: "no price for this model" for gpt-4.1-mini
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    summary = next(r for r in rows if r.get("type") == "summary")
    usage = summary["usage"]
    expected = (usage["input_tokens"] - usage["cached_input_tokens"]) * 0.4 + usage["cached_input_tokens"] * 0.1
    assert usage["calls"] == 60 and summary["cost_usd"] == pytest.approx((expected + usage["output_tokens"] * 1.6) / 1e6)
    assert all(r["cost_usd"] is not None for r in conversation_lines(out))
