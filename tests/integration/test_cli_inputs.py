"""Input that cannot break a run, as a user meets it on the command line."""

import json
from pathlib import Path

import pytest

from judgegraph.cli import main

pytestmark = pytest.mark.integration
EX = Path(__file__).resolve().parents[2] / "examples"


def rows(path):
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    return [r for r in lines if r["type"] not in ("header", "summary")]  # the run's own records


@pytest.mark.parametrize("name,content", [("empty.jsonl", ""), ("blank.yaml", "\n\n"), ("none.json", "[]")])
def test_empty_input_file_exits_3_never_a_passing_gate(tmp_path, capsys, name, content):
    path = tmp_path / name
    path.write_text(content)
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(path), "--out", str(out), "--no-progress"]) == 3
    assert "file is empty" in capsys.readouterr().err
    assert [r["type"] for r in rows(out)] == ["input_error"]


def test_bad_records_of_every_kind_are_reported_the_rest_judged(tmp_path, capsys):
    good = (EX / "support_chats.jsonl").read_text().splitlines()[0]
    lol = ['a0: &a0 "lololololol"'] + [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    (tmp_path / "lol.yaml").write_text("- id: lol\n  turns: [{role: user, content: q}, {role: assistant, content: a}]\n"
                                       "  metadata:\n" + "".join(f"    {a}\n" for a in lol))
    (tmp_path / "mix.jsonl").write_text("\n".join([
        good,
        '{"id": "sur", "turns": [{"role": "user", "content": "\\udfff"}, {"role": "assistant", "content": "a"}]}',
        '{"id": "deep", "metadata": ' + "[" * 3000 + "]" * 3000 + "}",
    ]) + "\n")
    out = tmp_path / "r.jsonl"
    code = main(["eval", str(tmp_path / "mix.jsonl"), str(tmp_path / "lol.yaml"), "--out", str(out), "--no-progress"])
    assert code == 3
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    results = rows(out)
    assert [r["conversation_id"] for r in results if r["type"] == "conversation"] == ["refund-ok"]
    errors = [(Path(r["file"]).name, r["line"], r["field"]) for r in results if r["type"] == "input_error"]
    assert errors == [("mix.jsonl", 2, "turns.0.content"), ("mix.jsonl", 3, None), ("lol.yaml", 10, "metadata.a6")]


def test_allow_outside_files_flag(tmp_path, capsys):
    (tmp_path / "rubric.txt").write_text("Shipping questions only.\n")
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "promptfooconfig.yaml").write_text(
        "tests:\n  - vars:\n      _conversation: [{input: q, output: a}]\n    assert:\n"
        "      - type: conversation-relevance\n        rubricPrompt: file://../rubric.txt\n")
    args = ["eval", str(cfg / "promptfooconfig.yaml"), "--out", str(tmp_path / "r.jsonl"), "--no-progress", "-q"]
    assert main(args) == 3
    assert "leaves the folder" in capsys.readouterr().err
    assert main([*args, "--allow-outside-files", "--overwrite"]) in (0, 1)  # --out holds the first run


def test_same_file_name_in_two_folders_judged_and_resumed_by_distinct_ids(tmp_path, capsys):
    line = json.dumps({"turns": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}]})
    paths = []
    for folder in ("monday", "tuesday"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "chats.jsonl").write_text(line + "\n")
        paths.append(str(tmp_path / folder / "chats.jsonl"))
    out = tmp_path / "r.jsonl"
    assert main(["eval", *paths, "--out", str(out), "--no-progress", "-q"]) == 0, capsys.readouterr().err
    assert sorted(r["conversation_id"] for r in rows(out)) == ["monday/chats:1", "tuesday/chats:1"]
    assert main(["eval", *paths, "--out", str(out), "--no-progress", "-q", "--resume"]) == 0
    assert "2 conversations already judged" in capsys.readouterr().err
    assert len(rows(out)) == 2  # nothing judged twice


def test_a_missing_input_writes_no_results_file_so_the_corrected_command_runs(tmp_path, capsys):
    """Issue 25: `eval nosuch.jsonl --out x.jsonl` wrote x.jsonl, and the corrected command was then refused."""
    from judgegraph.cli import main

    out = tmp_path / "x.jsonl"
    assert main(["eval", str(tmp_path / "nosuch.jsonl"), "--out", str(out), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nosuch.jsonl'}: file not found" in err and "nothing written" in err
    assert not out.exists()
    chats = tmp_path / "chats.jsonl"
    chats.write_text('{"id": "a", "turns": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}\n')
    assert main(["eval", str(chats), "--out", str(out), "--no-progress", "-q"]) in (0, 1)


def test_a_results_file_given_to_eval_is_named_as_one(tmp_path, capsys):
    """Issue 25 / 27.6: eval read a results file's header as a promptfoo config (43 input errors)."""
    from judgegraph.cli import main

    chats, results = tmp_path / "chats.jsonl", tmp_path / "results.jsonl"
    chats.write_text('{"id": "a", "turns": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}\n')
    assert main(["eval", str(chats), "--out", str(results), "--no-progress", "-q"]) in (0, 1)
    capsys.readouterr()
    assert main(["eval", str(results), "--out", str(tmp_path / "again.jsonl"), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert f"{results} is a judgegraph results file (verdicts, not conversations)" in err
    assert "judgegraph report" in err and "promptfoo" not in err and not (tmp_path / "again.jsonl").exists()


def test_max_rows_counts_table_rows_not_conversations(tmp_path, capsys):
    """Issue 25: --max-rows 2 with two metrics showed two conversations (four rows)."""
    from judgegraph.cli import main

    chats = tmp_path / "chats.jsonl"
    turns = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    chats.write_text("".join(json.dumps({"id": f"c{i}", "turns": turns}) + "\n" for i in range(3)))
    status = main(["eval", str(chats), "-m", "turn-relevancy", "-m", "conversation-relevance", "--max-rows", "2",
                   "--out", str(tmp_path / "r.jsonl"), "--no-progress"])
    assert status in (0, 1)
    out = capsys.readouterr().out
    assert sum(line.startswith("│ c") for line in out.splitlines()) == 2, out
    assert "4 more rows not shown" in out
