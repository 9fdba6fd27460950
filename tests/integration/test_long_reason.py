"""A long verdict reason is stored once per results line (issue 21 C.16), and
every reader (show, the HTML report, JUnit, --resume, rejudge) still has it whole."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from judgegraph.cli import main
from judgegraph.runs import elide_duplicates, restore_elided
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

REASON = 'Début "quoted"\n' + "off topic " * 30_000 + "END-OF-REASON"  # 300 KB


@pytest.fixture
def run(tmp_path):
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"id": "c", "turns": [{"role": "user", "content": "What is 2+2?"},
                                                      {"role": "assistant", "content": "Paris."}]}) + "\n")
    out = tmp_path / "r.jsonl"
    server = FakeOpenAIServer(ScriptedResponder([], default=structured({"reason": REASON, "verdict": "no"})))
    with server:
        args = ["eval", str(chats), "-m", "turn-relevancy", "--model", "openai:judge", "--base-url", server.base_url,
                "--no-cache", "--no-progress", "-q", "--out", str(out)]
        assert main([*args, "--junit", str(tmp_path / "junit.xml")]) == 1
        yield tmp_path, chats, out, args


def test_the_results_line_holds_a_long_reason_once(run):
    _, _, out, _ = run
    (line,) = [x for x in out.read_text(encoding="utf-8").splitlines() if json.loads(x)["type"] == "conversation"]
    assert line.count("END-OF-REASON") == 1  # 3 before: the verdict, the result's reason, the judge's raw reply
    assert len(line) < 1.2 * len(REASON)
    result = json.loads(line)["results"]["turn_relevancy"]
    assert result["verdicts"][0]["reason"] == REASON


def test_every_reader_gets_the_reason_back_whole(run, capsys):
    tmp_path, chats, out, args = run
    assert main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert json.dumps(REASON)[1:-1] in shown  # the judge's reply as it was sent (its JSON escapes included)
    html = tmp_path / "r.html"
    assert main(["report", str(out), "-o", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
                      .group(1))
    result = data["conversations"][0]["results"]["turn_relevancy"]
    assert result["verdicts"][0]["reason"] == REASON and REASON in result["reason"]
    assert json.loads(result["verdicts"][0]["transcript"][0]["reply"])["reason"] == REASON
    assert "reason_elided" not in result and "reply_elided" not in result["verdicts"][0]["transcript"][0]
    failure = next(ET.parse(tmp_path / "junit.xml").getroot().iter("failure"))
    assert "END-OF-REASON" in failure.text
    assert main([*args, "--resume"]) == 1  # read back for the summary: still a failure with its reason
    assert "1 conversation already judged" in capsys.readouterr().err


@pytest.mark.parametrize("ascii_reply", [True, False])
def test_elided_texts_come_back_exactly(ascii_reply):
    reason = "é\"\\\n\t\u2028" + "x" * 300
    reply = "  {\"verdict\": \"no\",  \"reason\": " + json.dumps(reason, ensure_ascii=ascii_reply) + "} trailing"
    record = {"type": "conversation", "results": {"m": {
        "reason": f"Turn 2: {reason}; turn 4: {reason}.",
        "verdicts": [{"reason": reason, "transcript": [{"reply": reply}, {"reply": None}, {"reply": "other"}]},
                     {"reason": reason, "transcript": [{"reply": reply}]},
                     {"reason": "short", "transcript": [{"reply": '{"reason": "short"}'}]}]}}}
    original = json.loads(json.dumps(record))
    stored = json.loads(json.dumps(elide_duplicates(record)))
    assert json.dumps(stored).count("xxxxxxxxxx" * 30) == 2  # once in each verdict
    assert restore_elided(stored) == original
    stored["results"]["m"]["reason_elided"] = [{"at": 10**9, "verdict": 7}, "junk"]  # edited by hand: dropped
    restore_elided(stored)
    assert "reason_elided" not in stored["results"]["m"]
