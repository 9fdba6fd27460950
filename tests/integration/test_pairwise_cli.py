"""`judgegraph pairwise` end to end through the real client on the loopback OpenAI-compatible server: a judge that
prefers one version, one that always picks the first position (all ties, position bias 100 %), judge errors
(counted, never a win, exit 3), three versions ranked, the judge cache, the dry run and the usage errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judgegraph.cli import main
from tests.kit import cli
from tests.kit.openai_server import ChatRequest, FakeOpenAIServer, Reply, ScriptedResponder, error, structured

pytestmark = pytest.mark.integration

QUALITY = {"meh": 0, "good": 1, "great": 2}


def write_version(path: Path, word: str, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": cid, "turns": [
        {"role": "user", "content": f"Question {cid}: how do I export my data?"},
        {"role": "assistant", "content": f"A {word} answer for {cid}."}]}) + "\n" for cid in ids))
    return path


def section(request: ChatRequest, tag: str) -> str:
    m = re.search(rf"<{tag}>(.*?)</{tag}>", request.text, re.S)
    assert m, f"no <{tag}> in the judge prompt"
    return m.group(1)


def quality(text: str) -> int:
    return max(q for word, q in QUALITY.items() if f"A {word} answer" in text)


def fair(request: ChatRequest) -> Reply:
    """Prefers the better answer wherever it is shown."""
    a, b = quality(section(request, "conversation_a")), quality(section(request, "conversation_b"))
    return structured({"reason": f"A has quality {a}, B {b}", "winner": "A" if a > b else "B" if b > a else "tie"})


def first_always(request: ChatRequest) -> Reply:
    return structured({"reason": "the first one reads better", "winner": "A"})


@pytest.fixture
def files(tmp_path):
    ids = ["c1", "c2", "c3", "c4"]
    return (write_version(tmp_path / "v1.jsonl", "meh", ids + ["only-old"]),
            write_version(tmp_path / "v2.jsonl", "good", ids),
            write_version(tmp_path / "v3.jsonl", "great", list(reversed(ids))))


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_judge_preferring_the_new_version_gives_it_every_win_with_intervals(files, tmp_path, capsys):
    v1, v2, _ = files
    out = tmp_path / "verdicts.jsonl"
    with FakeOpenAIServer(ScriptedResponder(default=fair)) as server:
        status, stdout, stderr = run(["pairwise", str(v1), str(v2), "--model", "openai:judge", "--base-url",
                                      server.base_url, "--json", "--out", str(out)], capsys)
        calls = server.calls["/v1/chat/completions"]
    assert status == 0, stderr
    assert calls == 2 * 4  # 4 shared conversations x 1 criterion x 2 orders
    report = json.loads(stdout)
    (pair,) = report["pairs"]
    assert (pair["a"], pair["b"], pair["criterion"], pair["n"]) == ("v1", "v2", "helpfulness", 4)
    assert pair["b_wins"]["count"] == 4 and pair["b_wins"]["rate"] == 1.0
    assert pair["b_wins"]["low"] == pytest.approx(0.5101, abs=1e-4) and pair["b_wins"]["high"] == pytest.approx(1.0)
    assert pair["a_wins"]["count"] == 0 and pair["ties"]["count"] == 0 and pair["order_dependent"]["count"] == 0
    assert report["missing"] == {"only-old": ["v2"]} and "'only-old' is missing from v2" in stderr
    assert report["rankings"] == {}  # two versions: no ranking
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["conversation_id"] for line in lines) == ["c1", "c2", "c3", "c4"]
    line = lines[0]
    assert line["type"] == "pairwise" and line["outcomes"][0]["winner"] == "v2"
    verdicts = line["result"]["verdicts"]
    assert [(v["order"], v["said"], v["verdict"]) for v in verdicts] == [("ab", "B", "b"), ("ba", "A", "b")]
    assert all(v["transcript"][0]["reply"] and "<conversation_a>" in v["transcript"][0]["messages"][0]["content"]
               for v in verdicts)


def test_a_judge_that_always_picks_the_first_position_gives_only_ties_and_full_position_bias(files, capsys):
    v1, v2, _ = files
    with FakeOpenAIServer(ScriptedResponder(default=first_always)) as server:
        status, stdout, stderr = run(["pairwise", str(v1), str(v2), "--model", "openai:judge", "--base-url",
                                      server.base_url], capsys)
    assert status == 0, stderr
    assert re.search(r"v1 vs v2\s+│\s+helpfulness\s+│\s+4\s+│\s+0% \[0%, 49%\]\s+│\s+100% \[51%, 100%\]", stdout), stdout
    assert "position bias: 100% [51%, 100%] of the decided comparisons" in stdout


def test_judge_errors_are_counted_never_a_win_and_exit_3(files, capsys):
    v1, v2, _ = files

    def broken_for_c2(request: ChatRequest) -> Reply:
        return error(400, "bad request") if "Question c2:" in request.text else fair(request)

    with FakeOpenAIServer(ScriptedResponder(default=broken_for_c2)) as server:
        status, stdout, stderr = run(["pairwise", str(v1), str(v2), "--model", "openai:judge", "--base-url",
                                      server.base_url, "--json", "--max-tries", "1"], capsys)
    assert status == 3
    report = json.loads(stdout)
    (pair,) = report["pairs"]
    assert (pair["n"], pair["undecided"], pair["b_wins"]["count"], pair["a_wins"]["count"]) == (3, 1, 3, 0)
    assert report["judge_errors"] == 2  # both orders of c2
    assert "judge error:" in stderr and "'c2'" in stderr and "(exit 3)" in stderr


def test_three_versions_are_ranked_with_bootstrap_intervals(files, capsys):
    with FakeOpenAIServer(ScriptedResponder(default=fair)) as server:
        status, stdout, stderr = run(["pairwise", *map(str, files), "--model", "openai:judge", "--base-url",
                                      server.base_url, "--json", "--bootstrap", "200"], capsys)
        calls = server.calls["/v1/chat/completions"]
    assert status == 0, stderr
    assert calls == 2 * 4 * 3  # 3 pairs of versions, 4 shared conversations each
    report = json.loads(stdout)
    ranking = report["rankings"]["helpfulness"]
    assert [r["version"] for r in ranking] == ["v3", "v2", "v1"]
    assert all(r["low"] <= r["strength"] <= r["high"] for r in ranking)
    assert ranking[0]["low"] > ranking[2]["high"]
    assert [(p["a"], p["b"], p["b_wins"]["count"]) for p in report["pairs"]] == [
        ("v1", "v2", 4), ("v1", "v3", 4), ("v2", "v3", 4)]


def test_the_judge_cache_answers_a_second_run_and_the_dry_run_counts_two_calls_per_pair_per_criterion(
        files, tmp_path, capsys):
    v1, v2, v3 = files
    cache = tmp_path / "cache.sqlite"
    argv = ["pairwise", str(v1), str(v2), "-m", "helpfulness", "--criterion", "Which answer is more concise?",
            "--model", "openai:judge", "--cache", str(cache), "--json"]
    with FakeOpenAIServer(ScriptedResponder(default=fair)) as server:
        first = run([*argv, "--base-url", server.base_url], capsys)
        second = run([*argv, "--base-url", server.base_url], capsys)
        calls = server.calls["/v1/chat/completions"]
    assert first[0] == second[0] == 0
    assert calls == 2 * 4 * 2  # the first run only: 4 conversations x 2 criteria x 2 orders
    assert json.loads(first[1])["pairs"] == json.loads(second[1])["pairs"]
    criteria = tmp_path / "criteria.txt"
    criteria.write_text("Which answer is more concise?\n\nWhich is friendlier?\n")
    status, stdout, _ = run(["pairwise", *map(str, files), "--criterion", f"@{criteria}",
                             "--model", "openai:gpt-4.1-mini", "--dry-run"], capsys)  # no server: nothing is sent
    assert status == 0
    assert "12 comparisons (conversation × pair of versions) × 2 criteria × 2 orders = 48 judge calls" in stdout
    assert "counted 48 calls" in stdout and "No call was made." in stdout


@pytest.mark.parametrize(("extra", "message"), [
    (["--model", "openai:x"], "two or more files"),
    (["SECOND", "--model", "openai:x", "-m", "helpfulnes"], "unknown pairwise criterion 'helpfulnes'"),
    (["SECOND"], "pairwise needs an LLM judge: pass --model"),
    (["SECOND", "--model", "openai:x", "--bootstrap", "-1"], "--bootstrap must be 0 or more"),
    (["SECOND", "--model", "openai:x", "--criterion", "@/nonexistent/criteria.txt"],
     "--criterion /nonexistent/criteria.txt: cannot read it"),
    (["SECOND", "--model", "openai:x", "--out", "SECOND", "--overwrite"], "is one of the input files"),
])
def test_usage_errors_exit_2(files, capsys, extra, message):
    v1, v2, _ = files
    before = v2.read_text()
    status, _, stderr = run(["pairwise", str(v1), *[str(v2) if x == "SECOND" else x for x in extra]], capsys)
    assert status == 2 and message.replace("SECOND", str(v2)) in stderr
    assert v2.read_text() == before  # an input given as --out is never touched


def test_unreadable_input_and_an_eval_results_file_exit_3_naming_the_file(files, tmp_path, capsys):
    v1, v2, _ = files
    results = tmp_path / "eval-results.jsonl"
    results.write_text(json.dumps({"type": "conversation", "conversation_id": "c1", "source": "x", "results": {},
                                   "error": None}) + "\n")
    with FakeOpenAIServer(ScriptedResponder(default=fair)) as server:
        status, _, stderr = run(["pairwise", str(v1), str(tmp_path / "nope.jsonl"), "--model", "openai:x",
                                 "--base-url", server.base_url], capsys)
        assert status == 3 and f"{tmp_path / 'nope.jsonl'}: file not found" in stderr
        status, _, stderr = run(["pairwise", str(v1), str(results), "--model", "openai:x",
                                 "--base-url", server.base_url], capsys)
        assert status == 3 and f"{results}:1: conversation 'c1'" in stderr and "holds verdicts only" in stderr
        assert server.calls["/v1/chat/completions"] == 0


def test_the_command_runs_as_a_subprocess(files, bare_env):
    v1, v2, _ = files
    with FakeOpenAIServer(ScriptedResponder(default=fair)) as server:
        proc = cli.run(["pairwise", str(v1), str(v2), "--model",
                        "openai:judge", "--base-url", server.base_url], timeout=120, env=bare_env)
    assert proc.returncode == 0, proc.stderr
    assert "v1 vs v2" in proc.stdout and "100% [51%, 100%]" in proc.stdout


def test_versions_sharing_no_conversation_exit_3_saying_so(tmp_path, capsys):
    old = write_version(tmp_path / "old.jsonl", "meh", ["a1", "a2"])
    new = write_version(tmp_path / "new.jsonl", "good", ["b1"])
    with FakeOpenAIServer(ScriptedResponder(default=fair)) as server:
        status, _, stderr = run(["pairwise", str(old), str(new), "--model", "openai:x", "--base-url",
                                 server.base_url], capsys)
        assert server.calls["/v1/chat/completions"] == 0
    assert status == 3
    assert "no conversation id is in two of the versions: nothing to compare (exit 3)" in stderr
    assert "'a1' is missing from new" in stderr and "'b1' is missing from old" in stderr
