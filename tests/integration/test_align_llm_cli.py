"""``judgegraph align --model M`` on the loopback OpenAI server: the judge answers as people do only when its
prompt holds the distilled guideline, so alignment measurably raises held-out agreement; the aligned file is
then used by ``eval --aligned`` and ``rejudge --aligned`` (its hash in every result), and the exit statuses."""

from __future__ import annotations

import json
import re
import threading

import pytest

from judgegraph.cli import main
from tests.kit.openai_server import ChatRequest, FakeOpenAIServer, Reply, structured

pytestmark = pytest.mark.integration

GUIDE = "A greeting that offers help answers a user's hello: it is relevant."
N = 20


def conversations() -> list[dict]:
    out = []
    for i in range(N):
        greeting = i % 2 == 0
        reply = f"Hello {i}! How can I help you today?" if greeting else f"Bananas ripen in {i} days."
        out.append({"id": f"c{i:02d}", "turns": [{"role": "user", "content": f"Hello there, it is me, user {i}."},
                                                 {"role": "assistant", "content": reply}]})
    return out


class Judge:
    """Scripted: the plain judge calls every reply to a hello off-topic; with the guideline, it follows people."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request: ChatRequest) -> Reply:
        with self.lock:
            self.texts.append(request.text)
        if request.schema_name == "DistilledGuidelines":
            return structured({"reason": "People count an offer of help.", "guidelines": [GUIDE]})
        task = request.text.split("The task:")[-1]
        relevant = GUIDE in request.text and "How can I help" in task
        return structured({"reason": "Scripted.", "verdict": "yes" if relevant else "no"})


@pytest.fixture
def files(tmp_path):
    convs = tmp_path / "chats.jsonl"
    convs.write_text("".join(json.dumps(c) + "\n" for c in conversations()), encoding="utf-8")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"conversation_id": c["id"], "metric": "turn_relevancy", "turn": 2,
                                          "label": "yes" if "How can I help" in c["turns"][1]["content"] else "no"}) + "\n"
                              for c in conversations()), encoding="utf-8")
    return convs, labels


def records(path):
    """The conversation records of a results file (a run header or summary line left out)."""
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return [r for r in lines if r.get("type", "conversation") == "conversation"]


def align(server, convs, labels, out, *extra):
    return main(["align", str(convs), "-m", "turn-relevancy", "--labels", str(labels), "--model", "gpt-4.1-mini",
                 "--base-url", server.base_url, "--out", str(out), "--no-cache", *extra])


def test_align_raises_held_out_agreement_and_eval_and_rejudge_use_the_file(files, tmp_path, capsys):
    convs, labels = files
    judge = Judge()
    with FakeOpenAIServer(judge) as server:
        assert align(server, convs, labels, tmp_path / "aligned", "--json", "--test-fraction", "0.5") == 0
        report = json.loads(capsys.readouterr().out)
        (path,) = (tmp_path / "aligned").glob("aligned-turn_relevancy-*.json")
        assert path.name == f"aligned-turn_relevancy-{report['sha256'][:12]}.json" and report["file"] == str(path)
        before, after = report["held_out"]["before"], report["held_out"]["after"]
        assert before["n"] == after["n"] == report["held_out"]["labels"] == N // 2
        assert before["agreement"] < 0.75 and before["kappa"] == 0.0  # the plain judge says "no" to every reply
        assert after["agreement"] == 1.0 and after["kappa"] == 1.0
        assert report["guidelines"] == [GUIDE]
        # the cost: each train conversation judged once, one distilling call; then the held-out part twice
        assert report["alignment_cost"]["calls"] == report["train"]["conversations"] + 1
        assert len(judge.texts) == report["alignment_cost"]["calls"] + 2 * report["held_out"]["conversations"]
        assert report["alignment_cost"]["input_tokens"] > 0

        # eval --aligned: the guideline in every request, the hash in every result
        judge.texts.clear()
        results = tmp_path / "results.jsonl"
        assert main(["eval", str(convs), "--model", "gpt-4.1-mini", "--base-url", server.base_url, "--aligned",
                     str(path), "--no-cache", "--out", str(results), "-q", "--no-progress"]) == 1  # off-topic replies fail
        judged = [r["results"]["turn_relevancy"] for r in records(results)]
        assert len(judged) == N and len(judge.texts) == N and all(GUIDE in t for t in judge.texts)
        assert {r["judge"] for r in judged} == {f"llm:gpt-4.1-mini+aligned-{report['sha256'][:12]}"}

        # rejudge --aligned: plain results re-judged by the aligned judge
        plain = tmp_path / "plain.jsonl"
        assert main(["eval", str(convs), "--model", "gpt-4.1-mini", "--base-url", server.base_url, "--no-cache",
                     "--out", str(plain), "-q", "--no-progress"]) == 1
        assert sum(r["results"]["turn_relevancy"]["status"] == "passed" for r in records(plain)) == 0
        again = tmp_path / "again.jsonl"
        assert main(["rejudge", str(plain), "--input", str(convs), "-m", "turn-relevancy", "--model", "gpt-4.1-mini",
                     "--base-url", server.base_url, "--aligned", str(path), "--out", str(again)]) == 1
        rejudged = [r["results"]["turn_relevancy"] for r in records(again)]
        assert {r["judge"] for r in rejudged} == {f"llm:gpt-4.1-mini+aligned-{report['sha256'][:12]}"}
        assert sum(r["status"] == "passed" for r in rejudged) == N // 2  # the greetings, as people said


def test_eval_refuses_a_tampered_file_another_metric_or_no_model(files, tmp_path, capsys):
    convs, labels = files
    with FakeOpenAIServer(Judge()) as server:
        assert align(server, convs, labels, tmp_path / "aligned") == 0
        assert "held-out labels" in capsys.readouterr().out
        (path,) = (tmp_path / "aligned").glob("aligned-*.json")
        common = ["eval", str(convs), "--base-url", server.base_url, "--out", str(tmp_path / "r.jsonl"), "-q"]
        assert main([*common, "--aligned", str(path)]) == 2
        assert "needs --model" in capsys.readouterr().err
        assert main([*common, "--model", "gpt-4.1-mini", "-m", "role-adherence", "--aligned", str(path)]) == 2
        assert "judge that metric alone" in capsys.readouterr().err
        assert main([*common, "--model", "gpt-4.1", "--aligned", str(path)]) == 2
        assert "made for model 'gpt-4.1-mini'" in capsys.readouterr().err
        data = json.loads(path.read_text(encoding="utf-8"))
        data["examples"][0]["label"] = "maybe"
        path.write_text(json.dumps(data), encoding="utf-8")
        assert main([*common, "--model", "gpt-4.1-mini", "--aligned", str(path)]) == 2
        assert "field 'sha256'" in capsys.readouterr().err
        assert not (tmp_path / "r.jsonl").exists()


def test_align_exit_statuses(files, tmp_path, capsys):
    convs, labels = files
    with FakeOpenAIServer(Judge()) as server:
        out = tmp_path / "aligned"
        assert align(server, convs, tmp_path / "missing.jsonl", out) == 3
        assert "missing.jsonl" in capsys.readouterr().err
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"conversation_id": "c00", "metric": "turn_relevancy", "turn": 0, "label": "yes"}\n')
        assert align(server, convs, bad, out) == 3
        assert "bad.jsonl:1: turn" in capsys.readouterr().err
        nowhere = tmp_path / "nowhere.jsonl"
        nowhere.write_text('{"conversation_id": "zz", "metric": "turn_relevancy", "turn": 2, "label": "yes"}\n')
        assert align(server, convs, nowhere, out) == 3
        assert "no labelled conversation" in capsys.readouterr().err
        other = tmp_path / "other.jsonl"
        other.write_text('{"conversation_id": "c00", "metric": "role_adherence", "label": "yes"}\n')
        assert align(server, convs, other, out) == 3
        assert "no label is about turn_relevancy" in capsys.readouterr().err
        assert main(["align", str(convs), "-m", "no-such-metric", "--labels", str(labels), "--model", "gpt-4.1-mini",
                     "--base-url", server.base_url, "--out", str(out)]) == 2
        assert align(server, convs, labels, out, "--positive", ">=2") == 2
        assert align(server, convs, labels, out, "--max-example-chars", "10") == 2
        assert server.calls.get("/v1/chat/completions", 0) == 0  # nothing was judged for any of them
        assert not out.exists()


def test_align_reads_the_offline_fit_s_labels_too(files, tmp_path, capsys):
    convs, _ = files
    legacy = tmp_path / "legacy.jsonl"  # {"id", "turn"?, "label"}: about -m's metric; no turn: the last reply
    legacy.write_text("".join(json.dumps({"id": c["id"], "label": "How can I help" in c["turns"][1]["content"]}) + "\n"
                              for c in conversations()), encoding="utf-8")
    with FakeOpenAIServer(Judge()) as server:
        assert align(server, convs, legacy, tmp_path / "aligned", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["train"]["labels"] + report["held_out"]["labels"] == N and not report["unmatched"]
    assert report["held_out"]["after"]["agreement"] == 1.0


def test_align_reads_label_words_as_agree_does_and_names_a_word_outside_them(files, tmp_path, capsys):
    convs, labels = files
    words = tmp_path / "words.jsonl"  # relevant/irrelevant: the judge's yes/no, as agree and the offline fit read them
    words.write_text(labels.read_text().replace('"yes"', '"relevant"').replace('"no"', '"irrelevant"'))
    with FakeOpenAIServer(Judge()) as server:
        assert align(server, convs, words, tmp_path / "aligned", "--json", "--test-fraction", "0.5") == 0
        report = json.loads(capsys.readouterr().out)
        assert report["held_out"]["after"]["agreement"] == 1.0 and report["held_out"]["after"]["kappa"] == 1.0
        lines = words.read_text().splitlines()
        lines[3] = lines[3].replace('"irrelevant"', '"meh"').replace('"relevant"', '"meh"')
        words.write_text("\n".join(lines) + "\n")
        assert align(server, convs, words, tmp_path / "aligned2") == 3
    err = capsys.readouterr().err
    assert f"{words}:4: label: \"meh\" is not a word of turn_relevancy's yes/no verdicts" in " ".join(err.split())


class WorseJudge(Judge):
    """Follows people without the guideline except on every other greeting; with it, calls every reply relevant."""

    def __call__(self, request: ChatRequest) -> Reply:
        if request.schema_name == "DistilledGuidelines":
            return structured({"reason": "People count an offer of help.", "guidelines": [GUIDE]})
        task = request.text.split("The task:")[-1]
        missed = re.search(r"Hello (\d+)!", task)
        relevant = GUIDE in request.text or ("How can I help" in task and int(missed.group(1)) % 4 != 0)
        return structured({"reason": "Scripted.", "verdict": "yes" if relevant else "no"})


def test_align_warns_when_the_aligned_judge_did_worse_on_its_held_out_labels(files, tmp_path, capsys):
    convs, labels = files
    with FakeOpenAIServer(WorseJudge()) as server:
        assert align(server, convs, labels, tmp_path / "aligned", "--test-fraction", "0.5") == 0
    err = " ".join(capsys.readouterr().err.split())
    said = re.search(r"warning: the aligned judge did worse on its (\d+) held-out labels than the plain judge: "
                     r"([\d.]+) % agreement vs ([\d.]+) % \(n=(\d+), kappa", err)
    assert said, err
    assert said.group(1) == said.group(4) == "10" and float(said.group(2)) < float(said.group(3))
    assert list((tmp_path / "aligned").glob("aligned-*.json"))  # written all the same: the user decides
