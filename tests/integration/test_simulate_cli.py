"""`judgegraph simulate MODULE:APP --scenarios FILE -m METRIC --out FILE` against a
small LangGraph app, the simulated user and the judge served by the loopback
OpenAI-compatible server."""

import hashlib
import json
import xml.etree.ElementTree as ET

import pytest

from judgegraph.cli import main
from judgegraph.loaders import load_conversations
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured

pytestmark = pytest.mark.integration

APP = '''
from langgraph.graph import START, MessagesState, StateGraph
from judgegraph.judges.scripted import ScriptedChatModel

bot = ScriptedChatModel(rules=[
    ("No, I need to block", ["Open the app, choose Cards, then Block card."]),
    ("How do I block", ["Lovely weather for a walk today."]),
    ("PIN", ["Go to Settings, then PIN."]),
], default="Hello!")


def chatbot(state: MessagesState):
    return {"messages": [bot.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("chatbot", chatbot)
builder.add_edge(START, "chatbot")
graph = builder.compile()
'''

SCENARIOS = """\
- id: lost-card
  goal: Block the lost card
  persona: In a hurry
- id: pin
  goal: Change the PIN
  opening: How do I change my PIN?
"""


def user_says(status, message):
    return structured({"reason": "r", "status": status, "message": message})


def is_user(*needles):
    return lambda r: "role-playing a user" in r.text and all(n in r.text for n in needles)


def test_simulate_writes_judged_conversations_junit_and_a_rejudgeable_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "sim_bank_app.py").write_text(APP)
    (tmp_path / "scenarios.yaml").write_text(SCENARIOS)
    monkeypatch.chdir(tmp_path)
    responder = ScriptedResponder([
        (is_user("Block card"), user_says("goal_reached", "Thanks!")),
        (is_user("Settings, then PIN"), user_says("goal_reached", "")),
        (is_user("weather"), user_says("continue", "No, I need to block my card!")),
        (is_user(), user_says("continue", "How do I block my card?")),
        (lambda r: "<reply_to_judge>\nLovely weather" in r.text,
         structured({"reason": "Weather, not cards.", "verdict": "no"})),
    ], default=structured({"reason": "On topic.", "verdict": "yes"}))
    with FakeOpenAIServer(responder) as server:
        code = main(["simulate", "sim_bank_app:graph", "--scenarios", "scenarios.yaml", "-m", "turn-relevancy",
                     "--threshold", "0.6", "--user-model", "openai:user", "--model", "openai:judge",
                     "--base-url", server.base_url, "--out", "out/sim.jsonl", "--conversations", "out/convs.jsonl",
                     "--junit", "out/junit.xml"])
        chat_calls = server.calls["/v1/chat/completions"]
    printed = capsys.readouterr().out
    assert code == 1  # lost-card fails turn relevancy at 0.6 (1 of 2 replies on topic)
    assert "2 conversations (2 goal_reached); 2 results: 1 passed, 1 failed" in printed
    assert chat_calls == 3 + 1 + 2 + 1  # user turns (3 + 1, the PIN opening sent as is) + judge calls
    lines = [json.loads(line) for line in (tmp_path / "out/sim.jsonl").read_text().splitlines()]
    assert [r["type"] for r in lines] == ["header", "conversation", "conversation", "summary"]
    header, summary = lines[0], lines[-1]
    assert [j["name"] for j in header["judges"]] == ["llm:judge", "simulated user llm:user"]
    assert header["judges"][1]["settings"]["max_turns"] == 6
    assert set(header["judges"][1]["prompts"]) == {"simulated_user/simulate_user", "simulated_user/adversarial_user"}
    assert header["metrics"] == [{"name": "turn_relevancy", "options": {"threshold": 0.6}}]
    assert header["inputs"][0] == {"path": "scenarios.yaml", "sha256": hashlib.sha256(SCENARIOS.encode()).hexdigest()}
    assert header["inputs"][1]["app"] == "sim_bank_app:graph" and header["inputs"][1]["sha256"] == hashlib.sha256(
        APP.encode()).hexdigest()
    assert summary["conversations"] == 2 and summary["pass_rate"] == {"turn_relevancy": 0.5}
    assert summary["usage"]["calls"] == chat_calls  # the user's calls and the judge's
    assert summary["simulation"]["ended"] == {"goal_reached": 2} and summary["simulation"]["user_usage"]["calls"] == 4
    records = {r["conversation_id"]: r for r in lines[1:-1]}
    card = records["lost-card"]
    assert card["simulation"]["status"] == "goal_reached" and card["simulation"]["turns"] == 2
    assert card["results"]["turn_relevancy"]["score"] == 0.5 and card["error"] is None
    assert [t["content"] for t in card["conversation"]["turns"]][-2:] == [
        "Open the app, choose Cards, then Block card.", "Thanks!"]
    assert records["pin"]["conversation"]["turns"][0]["content"] == "How do I change my PIN?"
    convs = {c.id: c for c in load_conversations(tmp_path / "out/convs.jsonl")}
    assert set(convs) == {"lost-card", "pin"} and convs["lost-card"].expected_outcome == "Block the lost card"
    suite = ET.parse(tmp_path / "out/junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")

    with FakeOpenAIServer(responder) as server:  # another user model: diff names it among the run's settings
        main(["simulate", "sim_bank_app:graph", "--scenarios", "scenarios.yaml", "-m", "turn-relevancy",
              "--threshold", "0.6", "--user-model", "openai:user2", "--model", "openai:judge",
              "--base-url", server.base_url, "--out", "out/sim2.jsonl"])
    capsys.readouterr()
    assert main(["diff", "--json", "out/sim.jsonl", "out/sim2.jsonl"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert {"what": "judge", "old": "llm:judge, simulated user llm:user",
            "new": "llm:judge, simulated user llm:user2"}.items() <= settings["differences"][0].items(), settings
    assert main(["report", "out/sim.jsonl", "-o", "out/sim.html"]) == 0
    assert "simulated user llm:user" in (tmp_path / "out/sim.html").read_text(encoding="utf-8")


def test_simulate_usage_errors_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.jsonl").write_text('{"id": "a"}\n')
    assert main(["simulate", "nosuchmodule_xyz:app", "--scenarios", "s.jsonl", "--user-model", "openai:u",
                 "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "could not be imported" in capsys.readouterr().err
    (tmp_path / "okapp.py").write_text("def app(messages):\n    return 'hi'\n")
    assert main(["simulate", "okapp:app", "--scenarios", "s.jsonl", "--user-model", "openai:u",
                 "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "s.jsonl:1: goal: Field required" in capsys.readouterr().err
    assert main(["simulate", "okapp:app", "--scenarios", "s.jsonl", "--user-model", "u", "--max-turns", "0"]) == 2


def test_simulate_protects_its_out_and_asks_guidelines_the_command_line_way(tmp_path, monkeypatch, capsys):
    """A non-empty --out is replaced only with --overwrite (as eval and rejudge); conversational-guidelines asks
    for --guideline, not for Python's guidelines=[...]."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "okapp.py").write_text("def app(messages):\n    return 'hi'\n")
    (tmp_path / "s.yaml").write_text(SCENARIOS)
    (tmp_path / "sim.jsonl").write_text('{"type": "conversation"}\n')
    common = ["simulate", "okapp:app", "--scenarios", "s.yaml", "--user-model", "openai:u",
              "--base-url", "http://127.0.0.1:9/v1", "--out", "sim.jsonl"]
    assert main(common) == 2
    assert "sim.jsonl already holds results: pass --overwrite" in capsys.readouterr().err
    assert (tmp_path / "sim.jsonl").read_text() == '{"type": "conversation"}\n'
    assert main([*common, "--overwrite", "-m", "conversational-guidelines", "--model", "openai:j"]) == 2
    err = capsys.readouterr().err
    assert "--guideline" in err and "guidelines=[" not in err
