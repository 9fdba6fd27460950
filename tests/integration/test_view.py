"""``judgegraph view``'s web application through Starlette's TestClient: the runs page over a folder of 50 runs
(trend, any run, any pair, an unreadable file named), the token and CSRF guard, labels appended (never rewritten)
with their annotator and time, the queue resumed after a restart, ``judgegraph agree`` reading the labels, and
people's agreement (Krippendorff's alpha against the reference implementation, Cohen's kappa per pair)."""

from __future__ import annotations

import html
import json
import random
import re
from datetime import datetime
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from judgegraph.cli import main
from judgegraph.trust.labels import read_labels
from judgegraph.view.app import Settings, create_app
from judgegraph.view.queue import LabelsFile, people_agreement
from tests.kit.results import write_runs

pytestmark = pytest.mark.integration

LOCAL = "http://127.0.0.1:8765"


def client(paths: list[Path], labels: Path, **settings: object) -> tuple[TestClient, Settings]:
    s = Settings(paths=[str(p) for p in paths], labels=str(labels), **settings)  # type: ignore[arg-type]
    return TestClient(create_app(s), base_url=LOCAL, follow_redirects=False), s


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("runs")
    write_runs(d, 50, 8)
    (d / "garbage.jsonl").write_text("this is not JSON\n", encoding="utf-8")
    return d


@pytest.fixture
def one_run(tmp_path) -> Path:
    return write_runs(tmp_path / "runs", 1, 8)[0]


def post_label(c: TestClient, s: Settings, run: Path, i: int, label: str, annotator: str = "ann") -> object:
    return c.post(f"/label?run={run}&strategy=random", json={"annotator": annotator, "label": label, "i": i},
                  headers={"X-CSRF-Token": s.csrf})


def test_runs_page_lists_50_runs_newest_first_with_the_trend_and_names_the_garbage_file(folder, tmp_path, capsys):
    c, _ = client([folder], tmp_path / "labels.jsonl")
    page = c.get("/")
    assert page.status_code == 200
    keys = [html.unescape(k) for k in re.findall(r'href="/run\?run=([^"]+)"', page.text)]
    assert [Path(k).name for k in keys] == [f"run-{r:03d}.jsonl" for r in reversed(range(50))]  # newest first
    # the trend: one plot per metric, 50 points of pass rate, the runs that dropped marked
    assert page.text.count('<svg role="img"') == 2
    assert page.text.count('class="point"') + page.text.count('class="regression"') == 100
    assert 'class="regression"' in page.text and "regression" in page.text
    # the garbage file is named with the message the commands print; chats.jsonl (an input file) is passed over
    assert main(["report", str(folder / "garbage.jsonl"), "--out", str(tmp_path / "r.html")]) == 3
    message = capsys.readouterr().err.strip().removeprefix("error: ")
    assert "garbage.jsonl" in message and html.escape(message, quote=True) in page.text
    assert "chats.jsonl" not in page.text.replace(folder.name, "")


@pytest.mark.parametrize("seed", range(3))
def test_any_run_and_any_pair_open(folder, tmp_path, seed):
    c, _ = client([folder], tmp_path / "labels.jsonl")
    rng = random.Random(seed)
    runs = sorted(str(p) for p in folder.glob("run-*.jsonl"))
    one = rng.choice(runs)
    page = c.get("/run", params={"run": one})
    assert page.status_code == 200 and "judgegraph report: " + Path(one).name in page.text
    a, b = rng.sample(runs, 2)
    pair = c.get("/compare", params=[("run", a), ("run", b)])
    assert pair.status_code == 200 and f"{Path(a).name} vs {Path(b).name}" in pair.text
    assert c.get("/run", params={"run": str(folder / "garbage.jsonl")}).status_code == 404  # not a run
    assert c.get("/run", params={"run": "/etc/passwd"}).status_code == 404  # nor a file outside the folder


def test_without_the_token_another_host_gets_403_and_with_it_a_cookie(one_run, tmp_path):
    c, _ = client([one_run], tmp_path / "labels.jsonl", token="s3cret")
    c.base_url = "http://192.0.2.7:8765"  # type: ignore[assignment]
    assert c.get("/").status_code == 403
    assert c.get("/", params={"token": "wrong"}).status_code == 403
    assert c.get("/", headers={"X-Judgegraph-Token": "s3cret"}).status_code == 200
    first = c.get("/", params={"token": "s3cret"})
    assert first.status_code == 200 and "judgegraph_token" in first.headers["set-cookie"]
    assert c.get("/label").status_code == 200  # the cookie from then on


def test_on_loopback_a_request_naming_another_host_is_refused(one_run, tmp_path):
    c, _ = client([one_run], tmp_path / "labels.jsonl")
    assert c.get("/").status_code == 200
    assert c.get("/", headers={"Host": "evil.example:8765"}).status_code == 403  # DNS rebinding


def test_a_post_without_the_csrf_token_or_from_another_site_is_refused(one_run, tmp_path):
    labels = tmp_path / "labels.jsonl"
    c, s = client([one_run], labels)
    body = {"annotator": "ann", "label": "yes", "i": 0}
    assert c.post(f"/label?run={one_run}", json=body).status_code == 403
    assert c.post(f"/label?run={one_run}", json=body, headers={"X-CSRF-Token": "guess"}).status_code == 403
    assert c.post(f"/label?run={one_run}", json=body, headers={"X-CSRF-Token": s.csrf,
                                                            "Origin": "http://evil.example"}).status_code == 403
    assert c.post(f"/label?run={one_run}", json=body, headers={"X-CSRF-Token": s.csrf,
                                                            "Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert not labels.exists()
    assert post_label(c, s, one_run, 0, "yes").status_code == 200 and labels.exists()
    # a page whose item is not the queue's item i any more (the results file was written since) is refused
    stale = c.post(f"/label?run={one_run}&strategy=random", json={**body, "key": ["gone", "turn_relevancy", "0"]},
                   headers={"X-CSRF-Token": s.csrf})
    assert stale.status_code == 409 and labels.read_bytes().count(b"\n") == 1


def test_labels_are_appended_never_rewritten_and_a_restart_resumes_the_queue(one_run, tmp_path):
    labels = tmp_path / "labels.jsonl"
    c, s = client([one_run], labels)
    for i, value in enumerate(["yes", "no", "yes"]):
        assert post_label(c, s, one_run, i, value).status_code == 200
        before = labels.read_bytes()
    assert post_label(c, s, one_run, 3, "no").status_code == 200
    after = labels.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 4
    records = [json.loads(line) for line in after.splitlines()]
    assert [r["label"] for r in records] == ["yes", "no", "yes", "no"]
    for r in records:
        assert r["annotator"] == "ann" and datetime.fromisoformat(r["time"].replace("Z", "+00:00"))
        assert {"conversation_id", "metric", "turn"} <= set(r) and "by" not in r and "note" not in r
    read = read_labels(labels)
    assert not read.errors and [lb.annotator for lb in read.labels] == ["ann"] * 4 and read.labels[0].time
    # a new server (a restart) on the same labels file: the queue resumes at item 5, another annotator at 1
    c2, _ = client([one_run], labels)
    page = c2.get("/label", params={"run": str(one_run), "annotator": "ann", "strategy": "random"})
    assert re.search(r'<span id="position">5</span>', page.text)
    assert "4 of" in page.text
    other = c2.get("/label", params={"run": str(one_run), "annotator": "bob", "strategy": "random"})
    assert re.search(r'<span id="position">1</span>', other.text)
    # the judge's verdict is not on the page (blind), unless asked for after labelling
    assert "The judge said" not in page.text
    shown = c2.get("/label", params={"run": str(one_run), "annotator": "ann", "strategy": "random", "i": "0",
                                     "reveal": "1"})
    assert "The judge said" in shown.text


def test_agree_reads_the_labels_the_app_wrote(one_run, tmp_path, capsys):
    labels = tmp_path / "labels.jsonl"
    c, s = client([one_run], labels)
    items = LabelsFile(labels)
    n = 6
    for i in range(n):
        assert post_label(c, s, one_run, i, "yes" if i % 3 else "no").status_code == 200
    assert len(items.read().labels) == n
    assert main(["agree", str(one_run), "--labels", str(labels), "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert sum(m["n"] for m in report["metrics"].values()) == n
    assert not report.get("unmatched")


def test_a_label_time_that_is_not_a_time_is_an_error_naming_the_field(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"conversation_id": "c", "metric": "m", "label": "yes", "annotator": "ann",
                                "time": "yesterday"}) + "\n"
                    + json.dumps({"conversation_id": "c", "metric": "m", "label": "no", "by": "old"}) + "\n",
                    encoding="utf-8")
    read = read_labels(path)
    (error,) = read.errors
    assert error.field == "time" and error.line == 1 and "ISO 8601" in str(error)
    assert read.labels[0].person == "old"  # an older file: by is who labelled it


def test_two_annotators_alpha_equals_the_reference_and_kappa_per_pair(one_run, tmp_path):
    krippendorff = pytest.importorskip("krippendorff", reason="the reference implementation is in the test extra")
    np = pytest.importorskip("numpy")
    from sklearn.metrics import cohen_kappa_score

    labels = tmp_path / "labels.jsonl"
    c, s = client([one_run], labels)
    rng = random.Random(7)
    said: dict[str, dict[int, str]] = {"ann": {}, "bob": {}, "cy": {}}
    for who, count in (("ann", 14), ("bob", 14), ("cy", 6)):
        for i in range(count):
            said[who][i] = rng.choice(["yes", "no"])
            assert post_label(c, s, one_run, i, said[who][i], who).status_code == 200
    units = sorted({i for v in said.values() for i in v})
    data = np.array([[{"yes": 1.0, "no": 0.0}[said[w][i]] if i in said[w] else np.nan for i in units]
                     for w in sorted(said)])
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    got = people_agreement(read_labels(labels).labels)
    assert got.alpha == pytest.approx(expected, abs=1e-9)
    pairs = {(p.a, p.b): p for p in got.pairs}
    assert set(pairs) == {("ann", "bob"), ("ann", "cy"), ("bob", "cy")}
    shared = sorted(set(said["ann"]) & set(said["bob"]))
    kappa = cohen_kappa_score([said["ann"][i] for i in shared], [said["bob"][i] for i in shared])
    assert pairs[("ann", "bob")].n == 14 and pairs[("ann", "bob")].kappa == pytest.approx(kappa, abs=1e-9)
    page = c.get("/trust", params={"run": str(one_run)})
    assert f'<b id="alpha">{expected:.4f}</b>' in page.text
    assert f"<td>ann · bob</td><td>14</td><td>{kappa:.3f}</td>" in page.text
    disagreed = sum(len({said[w][i] for w in said if i in said[w]}) > 1 for i in units)
    assert page.text.count("<li>", page.text.index('id="disagreed"')) >= disagreed > 0
    assert "judgegraph align" in page.text and str(labels) in page.text


def test_the_load_benchmark_runs_and_prints_its_figures():
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    proc = subprocess.run([sys.executable, "view_load.py", "--runs", "2", "--conversations", "6", "--gets", "1"],
                          cwd=bench, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header, row = proc.stdout.splitlines()
    assert "server peak RSS MB" in header and row.split()[:2] == ["2", "6"] and float(row.split()[-1]) > 0


def test_a_labels_file_that_cannot_be_read_or_written_is_named_and_the_rest_served(one_run, tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.mkdir()  # a folder where the labels file should be
    c, s = client([one_run], labels)
    assert c.get("/").status_code == 200
    page = c.get("/label", params={"run": str(one_run), "annotator": "ann"})
    assert page.status_code == 200 and f"{labels}: cannot be read" in page.text and 'id="position"' in page.text
    trust = c.get("/trust")
    assert trust.status_code == 200 and f"{labels}: cannot be read" in trust.text
    refused = post_label(c, s, one_run, 0, "yes")
    assert refused.status_code == 500 and f"{labels}: cannot be written" in refused.json()["error"]


def test_krippendorff_alpha_on_krippendorff_s_own_example():
    """Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the nominal example: 4 observers, 12 units,
    missing values; alpha = 0.743. Also against the reference implementation, to 1e-9."""
    krippendorff = pytest.importorskip("krippendorff", reason="the reference implementation is in the test extra")
    np = pytest.importorskip("numpy")
    from judgegraph.stats.raters import krippendorff_alpha

    nan = None
    observers = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
                 [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
                 [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
                 [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    units = [[o[u] for o in observers if o[u] is not None] for u in range(12)]
    got = krippendorff_alpha(units)
    data = np.array([[np.nan if v is None else float(v) for v in o] for o in observers])
    assert got == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-9)
    assert round(got, 3) == 0.743
    assert krippendorff_alpha([["yes", "yes"], ["yes", "yes", "yes"]]) is None  # one value: undefined
    assert krippendorff_alpha([["yes"], ["no"]]) is None  # nothing pairable


def test_a_label_names_its_turn_when_that_names_the_verdict_alone_else_its_verdict_id(tmp_path):
    from judgegraph.runs import ConversationLine
    from judgegraph.view.queue import build_queue

    verdicts = [{"id": "0", "turns": [1], "verdict": "yes"}, {"id": "1", "turns": [3], "verdict": "no"},
                {"id": "2", "turns": [1, 3], "verdict": "no"}, {"id": "3", "turns": [5], "verdict": None}]
    records = [ConversationLine(conversation_id="c", results={"m": {"verdicts": verdicts, "passed": False}}),
               ConversationLine(conversation_id="d", results={"r": {"verdicts": [], "passed": True, "score": 1.0}})]
    items = {i.verdict_id or i.metric: i for i in build_queue(records, "random")}
    assert set(items) == {"0", "1", "2", "r"}  # a verdict the judge could not give is not labelled
    assert items["0"].turn == 2 and items["0"].key == ("c", "m", "turn 2")
    assert items["1"].turn is None and items["2"].turn is None  # two verdicts end at turn 4
    assert items["r"].key == ("d", "r", "result")
    labels = LabelsFile(tmp_path / "labels.jsonl")
    written = [labels.append(items[k], "yes", "ann") for k in ("0", "1", "r")]
    assert [{k: w.get(k) for k in ("turn", "verdict_id")} for w in written] == [
        {"turn": 2, "verdict_id": None}, {"turn": None, "verdict_id": "1"}, {"turn": None, "verdict_id": None}]
    assert set(labels.labelled("ann")) == {items["0"].key, items["1"].key, items["r"].key}


def test_the_align_command_on_the_trust_page_runs_as_shown(tmp_path, monkeypatch, capsys):
    """On the offline judge's run of the example conversations, labelled in the app: the command copied from the
    trust page aligns the judge (the offline fit reads the labels by turn)."""
    import shlex
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "support_chats.jsonl", "chats.jsonl")
    assert main(["eval", "chats.jsonl", "--out", "results.jsonl", "--no-progress", "-q"]) in (0, 1)
    c, s = client([Path("results.jsonl")], Path("labels.jsonl"))
    n = 0
    while (r := post_label(c, s, Path("results.jsonl"), n, "yes" if n % 2 else "no")).status_code == 200:
        n += 1
    assert n >= 10 and r.status_code == 400  # past the queue's end
    page = c.get("/trust")
    command = html.unescape(re.search(r'<pre id="align-command">([^<]*)</pre>', page.text).group(1))
    assert command.startswith("judgegraph align chats.jsonl --metric turn_relevancy --labels labels.jsonl")
    capsys.readouterr()
    assert main(shlex.split(command)[1:]) == 0
    assert "wrote aligned/" in capsys.readouterr().out
