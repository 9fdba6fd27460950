"""Every metric through the command line, against the loopback OpenAI-compatible
server: ``eval`` then ``rejudge --verdict ID`` pays only for the chosen verdict,
and ``show`` prints every request behind the result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from judgegraph.cli import main
from judgegraph.outputs.html import report_data
from judgegraph.runs import read_run
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured
from tests.unit.metric_cases import CASES, CONVERSATION, IDS, ROOT, answer

pytestmark = pytest.mark.integration

MAKE_JUDGE = """from functools import partial

from judgegraph import make_metric

resolves_issue = partial(make_metric, name="resolves_issue",
                         instructions="Did the assistant resolve the user's issue? {{ conversation }}")
"""


def responder(verdict: str) -> ScriptedResponder:
    reply = answer(verdict)
    return ScriptedResponder(default=lambda request: structured(reply(request)))


def metric_args(name: str, tmp: Path) -> list[str]:
    if name == "resolves_issue":
        (tmp / "capability_judges.py").write_text(MAKE_JUDGE, encoding="utf-8")
        return ["-m", "capability_judges:resolves_issue"]
    if name == "reply_language":
        return ["-m", "examples.reply_language:SPEC"]
    extra = {"conversational_guidelines": ["--guideline", "Answer in one sentence.", "--guideline", "Be polite."],
             "response_relevancy": ["--embeddings", "openai:text-embedding-3-small"],
             "topic_adherence": ["--topic", "The bookshop: opening hours, returns, shipping"]}
    return ["-m", name, *extra.get(name, [])]


def conversation_line(path: Path) -> dict:
    """The one conversation record of a results file (its run header and summary aside)."""
    (record,) = [r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r["type"] == "conversation"]
    return record


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_eval_then_rejudge_one_verdict_then_show(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT))
    conv = tmp_path / "chats.jsonl"
    conv.write_text(json.dumps(CONVERSATION) + "\n", encoding="utf-8")
    results, new = tmp_path / "results.jsonl", tmp_path / "new.jsonl"
    metric = metric_args(case.name, tmp_path)
    with FakeOpenAIServer(responder("yes")) as first:
        common = ["--model", "gpt-4.1-mini", "--base-url", first.base_url, "--no-cache"]
        assert main(["eval", str(conv), *metric, *common, "--out", str(results), "-q", "--no-progress"]) in (0, 1)
        paid = len(first.chat_requests)
    old = conversation_line(results)["results"][case.name]
    chosen = old["verdicts"][0]["id"]
    capsys.readouterr()
    with FakeOpenAIServer(responder("no")) as second:
        code = main(["rejudge", str(results), "--input", str(conv), *metric[:2],
                     *(metric[2:] if case.name == "conversational_guidelines" else []), "--verdict", chosen,
                     "--model", "gpt-4.1-mini", "--base-url", second.base_url, "--out", str(new)])
        assert code in (0, 1), capsys.readouterr().err
        again = len(second.chat_requests)
    assert 0 < again <= paid and (again < paid or len({a["request"] for v in old["verdicts"]
                                                        for a in v["transcript"]} | {a["request"] for a in old["transcript"]}) == 1)
    fresh = conversation_line(new)["results"][case.name]
    by_id = {v["id"]: v for v in fresh["verdicts"]}
    assert chosen in fresh["details"]["rejudged"]["verdicts"]
    assert by_id[chosen]["reason"] == "Scripted no." or by_id[chosen]["verdict"] != old["verdicts"][0]["verdict"]
    for v in old["verdicts"]:
        if v["id"] not in fresh["details"]["rejudged"]["verdicts"]:
            assert by_id[v["id"]]["verdict"] == v["verdict"]
    capsys.readouterr()
    assert main(["show", str(new), "--conversation", CONVERSATION["id"], "--metric", case.name]) == 0
    shown = capsys.readouterr().out
    assert "no verdicts" not in shown and "Scripted no." in shown
    # the HTML report's turn view: every verdict sits under a turn of the conversation, with its transcript
    assert main(["report", str(new), "-o", str(tmp_path / "r.html"), "--input", str(conv)]) == 0
    data, problems = report_data(read_run(new), inputs=[conv])
    (shown_conv,) = data["conversations"]
    result = shown_conv["results"][case.name]
    assert not problems and len(shown_conv["turns"]) == len(CONVERSATION["turns"])
    for v in result["verdicts"]:
        assert all(0 <= t < len(shown_conv["turns"]) for t in v["turns"])  # report.js shows turn t as "turn t+1"
        assert v["transcript"] or result["transcript"]


def test_the_capability_cases_import_from_the_repository_root():
    assert str(ROOT) in sys.path or (ROOT / "tests" / "__init__.py").exists()


ALIGNED_GUIDE = "ALIGNED-GUIDELINE-91: judge as the people labelled."


def aligned_responder() -> ScriptedResponder:
    """The people's answer ("yes") when the prompt holds the guideline, else the other one; the distilling
    step writes the guideline."""
    yes, no = answer("yes"), answer("no")

    def reply(request):
        if request.schema_name == "DistilledGuidelines":
            return structured({"reason": "Scripted.", "guidelines": [ALIGNED_GUIDE]})
        return structured((yes if ALIGNED_GUIDE in request.text else no)(request))

    return ScriptedResponder(default=reply)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_align_then_eval_aligned_every_request_carries_it_and_every_result_its_hash(case, tmp_path, monkeypatch,
                                                                                    capsys):
    from judgegraph.trust.labels import label_value
    from tests.unit.metric_cases import model

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT))
    convs = [{**CONVERSATION, "id": f"capabilities-{i}"} for i in range(4)]
    conv = tmp_path / "chats.jsonl"
    conv.write_text("".join(json.dumps(c) + "\n" for c in convs), encoding="utf-8")
    people = case.build(model("yes")).invoke({"conversation": CONVERSATION})["results"][case.name]
    label = label_value(people.to_feedback()["value"])  # the label people gave: what the "yes" judge says
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"conversation_id": c["id"], "metric": case.name, "label": label}) + "\n"
                              for c in convs), encoding="utf-8")
    metric = metric_args(case.name, tmp_path)
    with FakeOpenAIServer(aligned_responder()) as server:
        common = ["--model", "gpt-4.1-mini", "--base-url", server.base_url, "--no-cache"]
        assert main(["align", str(conv), *metric, "--labels", str(labels), *common, "--test-fraction", "0.5",
                     "--out", str(tmp_path / "aligned"), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        after, before = report["held_out"]["after"]["agreement"], report["held_out"]["before"]["agreement"]
        # the plain judge answers the other way, which every metric but response relevancy (whose score over the
        # loopback embeddings passes either way) turns into the other label: then a guideline is distilled
        assert after == 1.0 and (before < after or case.name == "response_relevancy")
        assert report["guidelines"] == ([ALIGNED_GUIDE] if before < after else [])
        (path,) = (tmp_path / "aligned").glob("aligned-*.json")
        before = len(server.chat_requests)
        results = tmp_path / "results.jsonl"
        assert main(["eval", str(conv), *metric, *common, "--aligned", str(path), "--out", str(results), "-q",
                     "--no-progress"]) in (0, 1)
        sent = [json.dumps(body["messages"]) for body in server.chat_requests[before:]]
    assert sent and all("Label people gave" in s and (ALIGNED_GUIDE in s or not report["guidelines"]) for s in sent)
    judged = [json.loads(x) for x in results.read_text(encoding="utf-8").splitlines()]
    names = {r["results"][case.name]["judge"] for r in judged if r.get("type", "conversation") == "conversation"}
    assert names == {f"llm:gpt-4.1-mini+aligned-{report['sha256'][:12]}"}
