"""``judgegraph diff`` on results files made by the real eval path with no key: the offline judge on an old and
a new version of a support bot's conversations, and the loopback OpenAI server as another judge. The pairs, the
figures (checked against scipy), the judge change, the CI gate's exit statuses, JSON and Markdown."""

import json
from pathlib import Path

import numpy as np
import pytest

from judgegraph.cli import main
from judgegraph.compare import diff_runs
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured, text

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "support_chats.jsonl"
OFF_TOPIC = ["Did you know the first running shoes were made in the 1830s?",
             "Our founder once hiked the whole Appalachian Trail in sandals.",
             "Penguins can drink sea water, which is a fun fact."]


def chats():
    return {c["id"]: c for c in map(json.loads, EXAMPLES.read_text(encoding="utf-8").splitlines())}


def derail(conv, keep=1):
    """``conv`` with every assistant reply after the first ``keep`` replaced by an off-topic one."""
    conv = json.loads(json.dumps(conv))
    replies = [t for t in conv["turns"] if t["role"] == "assistant"]
    for i, turn in enumerate(replies[keep:]):
        turn["content"] = OFF_TOPIC[i % len(OFF_TOPIC)]
        turn.pop("retrieval_context", None)
    return conv


def write_chats(path, convs):
    path.write_text("".join(json.dumps(c) + "\n" for c in convs), encoding="utf-8")
    return path


def evaluate(inputs, out, *extra):
    status = main(["eval", str(inputs), "-m", "turn-relevancy", "--out", str(out), "--overwrite", "-q",
                   "--no-progress", *extra])
    assert status in (0, 1, 3), status
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """OLD: the bot derails in refund-ok. NEW: refund-ok fixed, password-reset derails, discount-code dropped,
    a gift-card conversation added."""
    tmp = tmp_path_factory.mktemp("diff")
    c = chats()
    old = [derail(c["refund-ok"]), *(v for k, v in c.items() if k != "refund-ok")]
    gift = {"id": "gift-card", "turns": [
        {"role": "user", "content": "Can I pay with a gift card?"},
        {"role": "assistant", "content": "Yes, enter the gift card code at checkout under 'Payment'."}]}
    new = [c["refund-ok"], derail(c["password-reset"]), c["shipping-delay"], c["size-exchange"],
           c["warranty-policy"], gift]
    return (evaluate(write_chats(tmp / "old_chats.jsonl", old), tmp / "old.jsonl"),
            evaluate(write_chats(tmp / "new_chats.jsonl", new), tmp / "new.jsonl"))


def scores(path):
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == "conversation":
            found[rec["conversation_id"]] = rec["results"]["turn_relevancy"]
    return found


def test_the_diff_of_two_offline_runs(runs):
    old, new = runs
    diff = diff_runs(old, new)
    kinds = {p.conversation_id: p.kind for p in diff.pairs}
    assert kinds == {"refund-ok": "fixed", "password-reset": "regressed", "shipping-delay": "unchanged",
                     "size-exchange": "unchanged", "warranty-policy": "unchanged", "discount-code": "missing",
                     "gift-card": "new"}
    regressed = next(p for p in diff.pairs if p.kind == "regressed")
    assert {v.verdict_id for v in regressed.verdicts} == {"1", "2"}  # the two derailed replies' windows
    flip = regressed.verdicts[0]
    assert (flip.old.verdict, flip.new.verdict) == ("yes", "no")
    assert "similarity" in flip.old.reason and "similarity" in flip.new.reason
    assert diff.settings.unknown is not None or diff.settings.headers == (True, True)
    assert diff.settings.same_judging is not False  # one judge for both runs


def test_json_figures_match_scipy(runs, capsys):
    from scipy.stats import binomtest, bootstrap

    old, new = runs
    assert main(["diff", str(old), str(new), "--json", "--bootstrap", "500", "--seed", "11"]) == 0
    report = json.loads(capsys.readouterr().out)
    m = report["metrics"]["turn_relevancy"]
    a, b = scores(old), scores(new)
    both = [k for k in a if k in b]
    rates = [sum(r["status"] == "passed" for r in side.values()) / sum(r["status"] in ("passed", "failed", "error")
             for r in side.values()) for side in (a, b)]
    assert (m["old"]["pass_rate"], m["new"]["pass_rate"]) == (pytest.approx(rates[0]), pytest.approx(rates[1]))
    assert (m["mcnemar"]["regressed"], m["mcnemar"]["fixed"], m["mcnemar"]["method"]) == (1, 1, "exact")
    assert m["mcnemar"]["p_value"] == pytest.approx(binomtest(1, 2).pvalue, abs=1e-9)
    x = np.array([a[k]["score"] for k in both])
    y = np.array([b[k]["score"] for k in both])
    ref = bootstrap((x, y), lambda p, q, axis: np.mean(q - p, axis=axis), paired=True, vectorized=True,
                    n_resamples=500, method="percentile", rng=np.random.default_rng(11))
    s = m["scores"]
    assert s["n"] == len(both) == 5
    assert s["mean"] == pytest.approx(float(np.mean(y - x)), abs=1e-12)
    assert (s["low"], s["high"]) == (pytest.approx(ref.confidence_interval.low, abs=1e-9),
                                     pytest.approx(ref.confidence_interval.high, abs=1e-9))
    pairs = {p["conversation_id"]: p for p in report["pairs"]}
    assert pairs["password-reset"]["delta"] == pytest.approx(b["password-reset"]["score"] - a["password-reset"]["score"])
    assert report["regressions"] == 1


def test_the_ci_gate(runs, capsys):
    old, new = [str(p) for p in runs]
    assert main(["diff", old, new]) == 0  # no gate asked: a report
    out = capsys.readouterr().out
    assert "password-reset" in out and "regressed" in out and "changed verdicts" in out
    assert main(["diff", old, new, "--fail-on-regression"]) == 1
    assert "1 results regressed" in capsys.readouterr().err
    assert main(["diff", old, new, "--max-regressions", "1"]) == 0
    assert main(["diff", old, new, "--max-regressions", "0"]) == 1
    assert main(["diff", new, new, "--fail-on-regression"]) == 0
    assert main(["diff", old, new, "--max-regressions", "-1"]) == 2
    assert main(["diff", old, new, "-m", "knowledge-retention"]) == 2
    assert "no knowledge-retention results" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["diff", old, new, "--json", "--markdown"])
    assert stop.value.code == 2


def test_unreadable_files_are_exit_3_naming_the_file_and_line(runs, tmp_path, capsys):
    old, new = runs
    assert main(["diff", str(old), str(tmp_path / "nope.jsonl")]) == 3
    assert f"error: {tmp_path / 'nope.jsonl'}: no such file" in capsys.readouterr().err.replace("\n", "")  # as every command says it
    torn = tmp_path / "torn.jsonl"
    data = new.read_bytes()
    torn.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 60])  # killed while writing the last line
    lines = torn.read_bytes().count(b"\n") + 1
    assert main(["diff", str(old), str(torn), "--fail-on-regression"]) == 3  # 3 before 1: the file is partial
    err = capsys.readouterr().err.replace("\n", "")
    assert f"{torn}:{lines}: a torn last line" in err
    conversations = tmp_path / "chats.jsonl"
    conversations.write_text(json.dumps(chats()["refund-ok"]) + "\n", encoding="utf-8")
    assert main(["diff", str(old), str(conversations)]) == 3  # an input file, not results
    assert ": a conversations file (what `eval` reads), not a results file" in capsys.readouterr().err.replace("\n", "")


def test_markdown_for_a_pull_request(runs, capsys):
    old, new = runs
    assert main(["diff", str(old), str(new), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("### judgegraph diff: ")
    assert "**1 regressed**, 1 fixed" in md and "| turn\\_relevancy | password\\-reset | regressed |" not in md
    assert "| turn\\_relevancy | password-reset | regressed |" in md
    assert "<details><summary>Changed verdicts" in md


def test_another_judge_is_named_and_its_errors_hold_the_gate(runs, tmp_path, capsys):
    """NEW judged by an LLM (the loopback server): the judge change is reported from the results lines, and a
    conversation the judge could not judge makes the gate exit 3, not 0."""
    old, _ = runs
    c = chats()
    responder = ScriptedResponder([("sole of my hiking boots", [text("I think it is relevant!")]),
                                   ("1830s", [structured({"reason": "Trivia, not an answer.", "verdict": "no"})])],
                                  default=structured({"reason": "It answers the question.", "verdict": "yes"}))
    new_chats = write_chats(tmp_path / "chats.jsonl", [c[k] for k in c])
    with FakeOpenAIServer(responder) as server:
        new = evaluate(new_chats, tmp_path / "llm.jsonl", "--model", "gpt-4.1-mini", "--base-url", server.base_url,
                       "--no-cache", "--max-tries", "1")
    assert main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "offline:all-MiniLM-L6-v2 → llm:gpt-4.1-mini" in out  # from the headers, else from the results lines
    assert "The judging differs" in out
    diff = diff_runs(old, new)
    assert diff.settings.same_judging is False
    assert {p.conversation_id for p in diff.undecided} == {"warranty-policy"}
    assert main(["diff", str(old), str(new), "--fail-on-regression"]) == 3
    assert "1 results NEW could not judge" in capsys.readouterr().err


def test_the_command_in_a_subprocess(runs, bare_env):
    old, new = runs
    done = cli.run(["diff", str(old), str(new), "--fail-on-regression"], env=bare_env, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "password-reset" in done.stdout and "regressed" in done.stderr


def test_the_docs_python_snippet_runs_as_written(runs, tmp_path, bare_env):
    from tests.integration.test_documented_snippets import ROOT, python_block

    for path, name in zip(runs, ("old-results.jsonl", "new-results.jsonl")):
        (tmp_path / name).write_bytes(path.read_bytes())
    snippet = python_block(ROOT / "docs" / "diff.md", "from judgegraph.compare import diff_runs")
    done = cli.run([], code=snippet, env=bare_env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "turn_relevancy password-reset 1.0 -> 0.3333333333333333"
    assert "similarity" in lines[1] and lines[-1] == "1.0 True"


def test_json_and_markdown_of_data_with_a_lone_surrogate_and_escapes(runs, tmp_path, bare_env):
    """A results file can hold a lone surrogate (JSON "\\udfff", from the input) and escape sequences: --json
    writes the same escape (exit 0, it reads back as the same id), the other outputs show them visibly."""
    old, _ = runs
    records = [json.loads(line) for line in old.read_text(encoding="utf-8").splitlines()]
    conv = next(r for r in records if r.get("type") == "conversation")
    conv["conversation_id"] = "odd\udfffid\x1b[31m"
    odd = tmp_path / "odd.jsonl"
    odd.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")  # ASCII: "\udfff" escaped
    outputs = {}
    for fmt in ("--json", "--markdown", None):
        done = cli.run(["diff", str(old), str(odd), *([fmt] if fmt else [])], env=bare_env, timeout=120, text=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        outputs[fmt] = done.stdout.decode("utf-8")
    ids = {p["conversation_id"] for p in json.loads(outputs["--json"])["pairs"]}
    assert "odd\udfffid\x1b[31m" in ids
    assert r"odd\\udfffid\\x1b\[31m" in outputs["--markdown"]  # rendered: odd\udfffid\x1b[31m
    assert "odd\\udfffid\\x1b[31m" in outputs[None] and "\x1b" not in outputs[None]
