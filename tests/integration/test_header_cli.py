"""Issue 18, parts 1 and 5 from the command line: the run header of `eval`, `--resume` refused with other settings,
`--version`, `--config` with `init`'s starter file, `export` to CSV and Parquet, input order in every reader."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from judgegraph import __version__, load_results
from judgegraph.cli import main
from judgegraph.cli.init import STARTER
from tests.kit import cli

pytestmark = pytest.mark.integration

QUESTIONS = ["What is 2+2?", "What is the capital of France?", "How do I reset my password?", "Where is my parcel?"]
REPLIES = ["2+2 is 4.", "Paris is the capital of France.", "The weather in Lisbon is sunny today.",
           "Your parcel is in the warehouse and ships on Monday."]


def write_chats(path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": f"c{i}", "turns": [{"role": "user", "content": q},
                                                                  {"role": "assistant", "content": r}]}) + "\n"
                            for i, (q, r) in enumerate(zip(QUESTIONS, REPLIES))), encoding="utf-8")
    return path


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def run(tmp_path):
    """A finished offline run: (inputs, results file, its eval arguments)."""
    chats = write_chats(tmp_path / "chats.jsonl")
    out = tmp_path / "r.jsonl"
    argv = ["eval", str(chats), "--out", str(out), "-q", "--no-progress", "--threshold", "0.5"]
    assert main(argv) in (0, 1)
    return chats, out, argv


def test_eval_writes_the_header_first_and_the_summary_last(run):
    chats, out, argv = run
    head, *convs, tail = records(out)
    assert head["type"] == "header" and head["argv"] == argv and head["config"] is None
    assert head["judgegraph"] == __version__ and head["started_at"].endswith("Z")
    assert head["metrics"] == [{"name": "turn_relevancy", "options": {"threshold": 0.5}}]
    assert head["judges"] == [{"name": "offline:all-MiniLM-L6-v2", "settings": {"cache": True}, "prompts": {}}]
    assert [i["path"] for i in head["inputs"]] == [str(chats)] and len(head["inputs"][0]["sha256"]) == 64
    assert sorted(c["position"] for c in convs) == [0, 1, 2, 3]
    assert tail["type"] == "summary" and tail["conversations"] == 4 and set(tail["pass_rate"]) == {"turn_relevancy"}


@pytest.mark.parametrize("flags, named", [
    (["--threshold", "0.8"], "metric turn_relevancy option threshold changed: 0.5 → 0.8"),
    (["--threshold", "0.5", "-m", "turn-relevancy", "-m", "conversation-relevance"],
     "metric conversation_relevance added"),
    (["--threshold", "0.5", "--model", "openai:judge-model", "--base-url", "http://127.0.0.1:9/v1"],
     "judge offline:all-MiniLM-L6-v2 changed: offline:all-MiniLM-L6-v2 → llm:judge-model"),
])
def test_resume_with_other_settings_exits_2_naming_each_difference(run, capsys, flags, named):
    chats, out, _ = run
    before = out.read_bytes()
    capsys.readouterr()
    assert main(["eval", str(chats), "--out", str(out), "-q", "--no-progress", "--resume", *flags]) == 2
    err = capsys.readouterr().err
    assert "--resume refused" in err and named in err, err
    assert out.read_bytes() == before  # nothing written, nothing judged


def test_resume_with_the_same_settings_continues(run, capsys):
    chats, out, _ = run
    lines = out.read_text(encoding="utf-8").splitlines()
    out.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")  # the header and 2 conversations: killed
    capsys.readouterr()
    code = main(["eval", str(chats), "--out", str(out), "-q", "--no-progress", "--resume", "--threshold", "0.5",
                 "--concurrency", "4"])  # a speed setting may change
    assert code in (0, 1)
    assert "resuming" in capsys.readouterr().err
    kinds = [r["type"] for r in records(out)]
    assert kinds[0] == "header" and kinds.count("header") == 1 and kinds[-1] == "summary" and kinds.count("conversation") == 4


def test_a_results_file_without_header_resumes_with_a_warning(run, capsys):
    chats, out, _ = run
    convs = [line for line in out.read_text(encoding="utf-8").splitlines() if '"type": "conversation"' in line]
    out.write_text("\n".join(convs[:2]) + "\n", encoding="utf-8")  # as an older judgegraph wrote it
    capsys.readouterr()
    assert main(["eval", str(chats), "--out", str(out), "-q", "--no-progress", "--resume", "--threshold", "0.9"]) in (0, 1)
    err = capsys.readouterr().err
    assert "has no run header" in err and "resuming" in err
    assert sum(r["type"] == "conversation" for r in records(out)) == 4


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"judgegraph {__version__}"


def test_init_writes_a_starter_file_that_eval_config_accepts_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_chats(tmp_path / "chats.jsonl")
    assert main(["init"]) == 0
    assert (tmp_path / "judgegraph.yaml").read_text(encoding="utf-8") == STARTER
    assert main(["init"]) == 2 and "already exists" in capsys.readouterr().err  # never replaced without asking
    assert main(["eval", "--config", "judgegraph.yaml", "-q", "--no-progress"]) in (0, 1)
    head = records(tmp_path / "judgegraph-results.jsonl")[0]
    assert head["argv"] == ["eval", "--config", "judgegraph.yaml", "-q", "--no-progress"]
    assert head["config"]["metrics"] == ["turn-relevancy"] and head["config"]["options"] == {"threshold": 0.5}
    assert head["metrics"] == [{"name": "turn_relevancy", "options": {"threshold": 0.5}}]


CONFIG = """\
inputs: [chats.jsonl]
metrics:
  - turn-relevancy: {threshold: 0.6}
  - conversation-relevance
options:
  threshold: 0.3
  window_size: 2
outputs:
  out: results/r.jsonl
"""


@pytest.mark.parametrize("flags, expected", [
    ([], {"turn_relevancy": {"threshold": 0.6, "window_size": 2},  # a metric's own option wins over options:
          "conversation_relevance": {"threshold": 0.3, "window_size": 2}}),
    (["--threshold", "0.9"], {"turn_relevancy": {"threshold": 0.9, "window_size": 2},  # the command line wins
                              "conversation_relevance": {"threshold": 0.9, "window_size": 2}}),
    (["-m", "conversation-relevance"], {"conversation_relevance": {"threshold": 0.3, "window_size": 2}}),  # replaced
])
def test_the_command_line_overrides_the_config_file(tmp_path, monkeypatch, flags, expected):
    folder = tmp_path / "project"
    folder.mkdir()
    write_chats(folder / "chats.jsonl")
    (folder / "judgegraph.yaml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # paths in the file are read from its folder, wherever the command runs
    assert main(["eval", "--config", "project/judgegraph.yaml", "-q", "--no-progress", *flags]) in (0, 1)
    head = records(folder / "results" / "r.jsonl")[0]
    assert {m["name"]: m["options"] for m in head["metrics"]} == expected
    assert [i["path"] for i in head["inputs"]] == [str(Path("project") / "chats.jsonl")]


def test_thresholds_in_the_config_set_each_metric_s_threshold(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_chats(tmp_path / "chats.jsonl")
    config = "inputs: [chats.jsonl]\nmetrics: [turn-relevancy, conversation-relevance]\nthresholds:\n  turn-relevancy: 0.7\n"
    (tmp_path / "judgegraph.yaml").write_text(config, encoding="utf-8")
    assert main(["eval", "--config", "judgegraph.yaml", "-q", "--no-progress"]) in (0, 1)
    head = records(tmp_path / "judgegraph-results.jsonl")[0]
    assert {m["name"]: m["options"] for m in head["metrics"]} == {"turn_relevancy": {"threshold": 0.7},
                                                                  "conversation_relevance": {}}
    convs = [r for r in records(tmp_path / "judgegraph-results.jsonl") if r["type"] == "conversation"]
    assert {c["results"]["turn_relevancy"]["threshold"] for c in convs} == {0.7}
    (tmp_path / "judgegraph.yaml").write_text(config.replace("turn-relevancy: 0.7", "user-frustration: 2"))
    assert main(["eval", "--config", "judgegraph.yaml", "-q", "--no-progress", "--overwrite"]) == 2
    assert "judgegraph.yaml:4: thresholds.user-frustration.threshold: threshold must be between 0 and 1, got 2" in capsys.readouterr().err


def test_the_same_input_under_another_path_resumes(run, capsys, monkeypatch):
    chats, out, _ = run
    monkeypatch.chdir(chats.parent)
    lines = out.read_text(encoding="utf-8").splitlines()
    out.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    assert main(["eval", chats.name, "--out", str(out), "-q", "--no-progress", "--resume", "--threshold", "0.5"]) in (0, 1)
    assert sum(r["type"] == "conversation" for r in records(out)) == 4


def test_an_out_given_on_the_command_line_overrides_the_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_chats(tmp_path / "chats.jsonl")
    (tmp_path / "judgegraph.yaml").write_text(CONFIG, encoding="utf-8")
    assert main(["eval", "--config", "judgegraph.yaml", "--out", "mine.jsonl", "-q", "--no-progress"]) in (0, 1)
    assert (tmp_path / "mine.jsonl").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("text, message", [
    ("inputs: [chats.jsonl]\njudge:\n  modle: openai:x\n", "judgegraph.yaml:3: judge.modle: unknown key (known here: model,"),
    ("inputs: [chats.jsonl]\noptions:\n  threshold: 1.5\n", "judgegraph.yaml:3: options.threshold: threshold must be between 0 and 1, got 1.5"),
    ("inputs: chats.jsonl\n", "judgegraph.yaml:1: inputs: expected a valid list"),
    ("inputs: [chats.jsonl]\nmetrics:\n  - turn-relevancy\n  - nosuch\n", "judgegraph.yaml:4: metrics[1]: unknown metric 'nosuch'"),
    ("metrics:\n  - user-frustration: {window_size: 2}\n",
     "judgegraph.yaml:2: metrics[0].user-frustration.window_size: user-frustration takes no window_size"),
    ("metrics:\n  - turn-relevancy: {treshold: 0.6}\n",
     "judgegraph.yaml:2: metrics[0].turn-relevancy.treshold: unknown key"),
    ("inputs: [chats.jsonl\n", "judgegraph.yaml:2: not valid YAML"),
    ("- chats.jsonl\n", "judgegraph.yaml:1: expected a mapping of settings"),
])
def test_a_bad_config_file_is_a_usage_error_naming_file_line_and_key(tmp_path, monkeypatch, capsys, text, message):
    monkeypatch.chdir(tmp_path)
    write_chats(tmp_path / "chats.jsonl")
    (tmp_path / "judgegraph.yaml").write_text(text, encoding="utf-8")
    assert main(["eval", "--config", "judgegraph.yaml", "-q", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not (tmp_path / "judgegraph-results.jsonl").exists()


def completion_order(out: Path) -> None:
    """The results file's conversation lines reversed, as a run finishing them in another order writes them."""
    head, *convs, tail = out.read_text(encoding="utf-8").splitlines()
    out.write_text("\n".join([head, *reversed(convs), tail]) + "\n", encoding="utf-8")


def test_export_csv_has_a_row_per_conversation_and_metric_in_input_order(run, tmp_path, capsys):
    _, out, _ = run
    completion_order(out)
    target = tmp_path / "r.csv"
    assert main(["export", str(out), "--format", "csv", "--out", str(target)]) == 0
    assert "4 result rows" in capsys.readouterr().out
    with target.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["position"], r["conversation_id"], r["metric"]) for r in rows] == \
        [(str(i), f"c{i}", "turn_relevancy") for i in range(4)]
    by_id = {c["conversation_id"]: c for c in records(out) if c["type"] == "conversation"}
    for r in rows:
        result = by_id[r["conversation_id"]]["results"]["turn_relevancy"]
        assert (r["status"], float(r["score"]), r["reason"]) == (result["status"], result["score"], result["reason"])
    assert main(["export", str(out), "--verdicts", "--out", str(tmp_path / "v.csv")]) == 0
    with (tmp_path / "v.csv").open(encoding="utf-8", newline="") as fh:
        verdicts = list(csv.DictReader(fh))
    assert [v["conversation_id"] for v in verdicts] == [f"c{i}" for i in range(4)]
    assert {v["verdict"] for v in verdicts} <= {"yes", "no"} and all(v["reason"] for v in verdicts)


def test_export_parquet_reads_back_as_load_results_to_pandas(run, tmp_path):
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    _, out, _ = run
    completion_order(out)
    target = tmp_path / "r.parquet"
    assert main(["export", str(out), "--format", "parquet", "--out", str(target)]) == 0
    frame = pandas.read_parquet(target)
    expected = load_results(out).to_pandas()
    pandas.testing.assert_frame_equal(frame, expected)
    assert list(frame["conversation_id"]) == [f"c{i}" for i in range(4)] and list(frame["position"]) == [0, 1, 2, 3]
    assert len(load_results(out).to_pandas(verdicts=True)) == 4


@pytest.mark.parametrize("missing, argv", [("pyarrow", ["--format", "parquet"]), ("pandas", ["--format", "parquet"])])
def test_export_without_the_extra_is_a_clear_usage_error(run, tmp_path, monkeypatch, capsys, missing, argv):
    _, out, _ = run
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    assert main(["export", str(out), *argv, "--out", str(tmp_path / "x.parquet")]) == 2
    assert "pip install 'judgegraph[export]'" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
    from judgegraph.outputs.export import ExportExtraMissing

    if missing == "pandas":
        with pytest.raises(ExportExtraMissing, match="judgegraph\\[export\\]"):
            load_results(out).to_pandas()


def test_the_html_report_of_a_file_with_a_header_shows_input_order(run, tmp_path):
    chats, out, _ = run
    # every conversation passes (threshold 0): the order is the input's, whatever the page puts first
    assert main(["eval", str(chats), "--out", str(out), "-q", "--no-progress", "--threshold", "0", "--overwrite"]) == 0
    completion_order(out)
    page = tmp_path / "r.html"
    assert main(["report", str(out), "-o", str(page)]) == 0  # the header and summary lines are not "unreadable"
    html = page.read_text(encoding="utf-8")
    start = html.index('id="report-data"')
    data = json.loads(html[html.index(">", start) + 1:html.index("</script>", start)])
    assert [c["id"] for c in data["conversations"]] == [f"c{i}" for i in range(4)]


def test_the_docs_load_results_snippet_runs_as_written(run, tmp_path, bare_env):
    import re
    import shutil

    _, out, _ = run
    docs = (Path(__file__).resolve().parents[2] / "docs" / "runs.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", docs, re.S) if b.startswith("from judgegraph import load")]
    shutil.copy(out, tmp_path / "results.jsonl")
    proc = cli.run([], code=block + "\nprint(len(df), results.summary.conversations)", env=bare_env, cwd=tmp_path,
                   timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-2:] == ["4", "4"]
