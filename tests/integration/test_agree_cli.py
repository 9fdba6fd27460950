"""``judgegraph agree`` on a results file judged over the loopback OpenAI server: the figures, JSON, HTML and
the exit statuses of a CI gate (1 below --min-kappa, 3 for labels matching no verdict, 2 for usage errors)."""

import json

import pytest

from judgegraph.cli import main
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

YES = structured({"reason": "It answers the question.", "verdict": "yes"})
NO = structured({"reason": "Six is vague <b>guessing</b>.", "verdict": "no"})
CONVS = [
    {"id": "math", "turns": [
        {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
        {"role": "user", "content": "What about 3+3?"}, {"role": "assistant", "content": "About six, I think."},
        {"role": "user", "content": "Can you solve 5+5?"}, {"role": "assistant", "content": "5+5 equals 10."},
    ]},
    {"id": "other", "turns": [
        {"role": "user", "content": "Hi, what is 1+1?"}, {"role": "assistant", "content": "1+1 is 2."},
        {"role": "user", "content": "And 7+1?"}, {"role": "assistant", "content": "Let me tell you about cats."},
    ]},
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agree")
    conv, out = tmp / "chats.jsonl", tmp / "results.jsonl"
    conv.write_text("".join(json.dumps(c) + "\n" for c in CONVS), encoding="utf-8")

    responder = ScriptedResponder([(lambda req: "About six" in req.text.split("What about 3+3?")[-1]
                                    and "5+5" not in req.text, [NO])], default=YES)
    with FakeOpenAIServer(responder) as server:
        assert main(["eval", str(conv), "-m", "turn-relevancy", "--model", "gpt-4.1-mini", "--base-url",
                     server.base_url, "--window-size", "1", "--no-cache", "--out", str(out), "-q", "--no-progress"]) in (0, 1)
    return out


def verdicts(path):
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["type"] != "conversation":  # the run header and summary
            continue
        for v in rec["results"]["turn_relevancy"]["verdicts"]:
            found[(rec["conversation_id"], max(v["turns"]) + 1)] = v["verdict"]
    return found


def write_labels(path, labels):
    path.write_text("".join(json.dumps(lb) + "\n" for lb in labels), encoding="utf-8")
    return path


@pytest.fixture
def labels(results, tmp_path):
    judged = verdicts(results)
    assert judged[("math", 4)] == "no" and judged[("other", 4)] == "yes"  # what the scripted judge said
    people = {("math", 2): "yes", ("math", 4): "no", ("math", 6): "yes", ("other", 2): "yes", ("other", 4): "no"}
    return judged, people, write_labels(tmp_path / "labels.jsonl", [
        {"conversation_id": c, "metric": "turn_relevancy", "turn": t, "label": lb} for (c, t), lb in people.items()])


def test_agree_prints_the_figures_and_lists_the_disagreement_with_the_judge_s_reason(results, labels, capsys):
    judged, people, path = labels
    assert main(["agree", str(results), "--labels", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    m = report["metrics"]["turn_relevancy"]
    keys = sorted(people)
    from sklearn.metrics import cohen_kappa_score  # here: importing scikit-learn costs every worker's collection 3 s

    expected = cohen_kappa_score([people[k] for k in keys], [judged[k] for k in keys])
    assert m["n"] == 5 and m["agreement"] == pytest.approx(0.8)
    assert m["kappa"] == pytest.approx(expected, abs=1e-9)
    assert m["scale"] == ["no", "yes"] and m["confusion"] == [[1, 1], [0, 3]]
    (dis,) = m["disagreements"]
    assert (dis["conversation_id"], dis["turns"], dis["human"], dis["judge"]) == ("other", [4], "no", "yes")
    assert dis["reason"] == "It answers the question."
    assert report["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95}
    assert set(m["intervals"]) == {"agreement", "kappa"}

    assert main(["agree", str(results), "--labels", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "turn_relevancy" in shown and "It answers the question." in shown and "person (rows)" in shown


def test_min_kappa_is_a_ci_gate(results, labels, capsys):
    _, _, path = labels
    assert main(["agree", str(results), "--labels", str(path), "--min-kappa", "0.5"]) == 0
    assert main(["agree", str(results), "--labels", str(path), "--min-kappa", "0.9"]) == 1
    assert "turn_relevancy: kappa 0.545 < 0.9" in capsys.readouterr().err
    assert main(["agree", str(results), "--labels", str(path), "--min-kappa", "0.5", "-m", "role-adherence"]) == 1
    assert "no metric has a labelled verdict" in capsys.readouterr().err


def test_labels_that_match_no_verdict_exit_3_and_are_named(results, labels, tmp_path, capsys):
    _, _, path = labels
    extra = write_labels(tmp_path / "more.jsonl", [
        {"conversation_id": "gone", "metric": "turn_relevancy", "turn": 2, "label": "yes"},
        {"conversation_id": "math", "metric": "turn_relevancy", "verdict_id": "12", "label": "yes"},
        {"conversation_id": "math", "metric": "turn_relevancy", "label": "maybe", "turn": "x"}])
    assert main(["agree", str(results), "--labels", str(path), "--labels", str(extra), "--min-kappa", "0.1"]) == 3
    err = capsys.readouterr().err
    assert f"{extra}:1: conversation 'gone', turn_relevancy, turn 2: no such conversation" in err
    assert "verdict 12: no verdict '12'" in err
    assert f"{extra}:3: turn: must be a turn number" in err


def test_usage_errors_exit_2(results, tmp_path, capsys):
    # a missing file, labels or results, exits 3 as in every command (an input that cannot be used)
    assert main(["agree", str(results), "--labels", str(tmp_path / "missing.jsonl")]) == 3
    assert "missing.jsonl" in capsys.readouterr().err
    assert main(["agree", str(tmp_path / "no-results.jsonl"), "--labels", str(results)]) == 3
    assert f"{tmp_path / 'no-results.jsonl'}: no such file" in capsys.readouterr().err
    assert main(["agree", str(results)]) == 2  # no labels and no reviews
    assert "no labels" in capsys.readouterr().err
    for bad in (["--min-kappa", "nan"], ["--min-kappa", "1.5"], ["--bootstrap", "-1"]):
        assert main(["agree", str(results), "--labels", str(tmp_path / "x.jsonl"), *bad]) == 2
        assert f"{bad[0]} must be" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["agree", str(results), "--min-kappa", "high"])
    assert exit_.value.code == 2


def test_html_page_escapes_reasons_and_the_real_command_runs(results, tmp_path):
    path = write_labels(tmp_path / "labels.jsonl", [
        {"conversation_id": "math", "metric": "turn_relevancy", "turn": 4, "label": "yes", "note": "<i>fine</i>"}])
    page = tmp_path / "agree.html"
    done = cli.run(["agree", str(results), "--labels", str(path), "--html", str(page), "--bootstrap", "100"],
                   timeout=120)
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    assert '<section id="agreement">' in html and "B = 100" in html
    assert "Six is vague &lt;b&gt;guessing&lt;/b&gt;." in html and "<b>" not in html  # a reason is data, not markup
    assert "<script" not in html


def test_report_with_labels_has_the_agreement_section_in_its_main(results, tmp_path, capsys):
    path = write_labels(tmp_path / "labels.jsonl", [
        {"conversation_id": "math", "metric": "turn_relevancy", "turn": 4, "label": "yes"}])
    page = tmp_path / "report.html"
    assert main(["report", str(results), "-o", str(page), "--labels", str(path)]) == 0
    html = page.read_text(encoding="utf-8")
    main_part = html.split("<main>", 1)[1].split("</main>", 1)[0]
    assert '<section id="agreement">' in main_part and "Six is vague &lt;b&gt;guessing&lt;/b&gt;." in main_part
    assert html.count('<section id="agreement">') == 1 and 'id="report-data"' in html.split("</main>", 1)[1]

    stray = write_labels(tmp_path / "stray.jsonl", [
        {"conversation_id": "nobody", "metric": "turn_relevancy", "turn": 2, "label": "yes"}])
    capsys.readouterr()
    assert main(["report", str(results), "-o", str(page), "--labels", str(stray)]) == 3
    assert "conversation 'nobody'" in capsys.readouterr().err
    assert main(["report", str(results), "-o", str(page), "--labels", str(tmp_path / "none.jsonl")]) == 3


@pytest.mark.slow
def test_the_readme_s_try_it_commands_run_with_the_offline_judge_as_written(tmp_path, bare_env):
    """README "Can I trust this judge?": eval the example chats with the offline judge, then agree with the
    example labels (a support lead's, one per reply), from the repository's root as written."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    lines = [line.split("  #", 1)[0].split() for line in (root / "README.md").read_text(encoding="utf-8").splitlines()
             if "# try it" in line or line.startswith("judgegraph agree judgegraph-results.jsonl")]
    assert [argv[1] for argv in lines] == ["eval", "agree"]
    for argv in lines:
        argv = [str(root / a) if a.startswith("examples/") else a for a in argv[1:]]
        done = cli.run(argv, timeout=300, env=bare_env, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "turn_relevancy" in done.stdout and "unmatched" not in done.stderr


def test_an_unreadable_results_line_is_named_and_exit_3_the_rest_still_compared(results, labels, tmp_path, capsys):
    _, _, path = labels
    torn = tmp_path / "torn.jsonl"
    torn.write_text(results.read_text(encoding="utf-8") + '{"type": "conversation", "conversation_id": "x', "utf-8")
    assert main(["agree", str(torn), "--labels", str(path), "--json"]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["metrics"]["turn_relevancy"]["n"] == 5
    n = len(results.read_text(encoding="utf-8").splitlines()) + 1  # after the header, 2 conversations, the summary
    assert f"{torn}:{n}: a torn last line" in captured.err  # named as torn, as diff and report name it


@pytest.mark.parametrize(("line", "field", "why"), [  # where the offline fit's reader and agree's disagreed
    ({"turn": "2"}, "turn", "must be a turn number (1-based)"),  # agree read it, the offline fit refused it
    ({"label": ""}, "label", "must be a non-empty string"),  # the offline fit read it, agree refused it
    ({"rater": "ann"}, "rater", "unknown field"),  # the offline fit read it, agree refused it
    ({"conversation_id": 7}, "conversation_id", "must be the conversation id (a string)"),  # agree read it as "7"
])
def test_a_labels_file_is_refused_alike_by_every_command_that_reads_labels(results, tmp_path, capsys, line, field,
                                                                         why):
    good = {"conversation_id": "math", "metric": "turn_relevancy", "turn": 2, "label": "yes"}
    path = write_labels(tmp_path / "labels.jsonl", [good, {**good, "turn": 4, **line}])
    where = f"{path}:2: {field}: {why}"
    chats = str(results.parent / "chats.jsonl")
    for argv in (["agree", str(results), "--labels", str(path)],
                 ["align", chats, "-m", "turn-relevancy", "--labels", str(path), "--model", "offline",
                  "--out", str(tmp_path / "rule")],
                 ["align", chats, "-m", "turn-relevancy", "--labels", str(path), "--model", "gpt-4.1-mini",
                  "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "aligned")]):
        assert main(argv) == 3, argv
        assert where in " ".join(capsys.readouterr().err.split()), argv
