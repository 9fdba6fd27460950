"""pytest itself runs a test file that uses assert_judged: the conversation that
goes off topic fails with the judge's reason, the good one passes, and the
judgegraph plugin prints its summary."""

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
SRC = Path(__file__).resolve().parents[2] / "src"

TEST_FILE = '''
from langchain_core.messages import AIMessage, HumanMessage
from judgegraph.apps import assert_judged
from judgegraph.judges.scripted import ScriptedChatModel

NO = {"reason": "The user asked about a card; the reply is about the weather.", "verdict": "no"}
YES = {"reason": "It answers.", "verdict": "yes"}


def judge():
    return ScriptedChatModel(rules=[("Sunny", [NO])], default=YES, section="reply_to_judge")


def test_on_topic(judgegraph_model):
    assert judgegraph_model is None
    assert_judged([HumanMessage("How do I block my card?"), AIMessage("Open the app, then Cards.")],
                  "turn_relevancy", model=judge(), id="good")


def test_off_topic():
    assert_judged([HumanMessage("How do I block my card?"), AIMessage("Sunny with a breeze today.")],
                  "turn_relevancy", model=judge(), id="bad")
'''


def plugin_args():
    installed = any(ep.value == "judgegraph.apps.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "judgegraph.apps.pytest_plugin"]


def test_pytest_fails_where_the_conversation_fails(tmp_path):
    (tmp_path / "test_bot.py").write_text(TEST_FILE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
                           "test_bot.py"], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 failed, 1 passed" in out
    assert "FAILED test_bot.py::test_off_topic" in out and "test_on_topic" not in out.split("short test summary")[1]
    assert "JudgementFailed: 1 of 1 metric(s) did not pass for conversation 'bad'" in out
    assert '- turn 2 "Sunny with a breeze today.": The user asked about a card; the reply is about the weather.' in out
    summary = out.split("judgegraph ==")[1]
    assert "2 conversation(s) judged; 0 judge error(s); 2 judge call(s)" in summary
    assert "turn_relevancy: 1 passed, 1 failed" in summary


SERVER_TEST = '''
from langchain_core.messages import AIMessage, HumanMessage
from judgegraph.apps import assert_judged


def test_judged_at_the_server(judgegraph_model):
    assert_judged([HumanMessage("How do I block my card?"), AIMessage("Open the app, then Cards.")],
                  "turn_relevancy", model=judgegraph_model, id="served")
'''


def test_judgegraph_base_url_points_an_openai_model_at_a_server_with_no_key(tmp_path):
    """Issue 27.9: the plugin had --judgegraph-model but no base URL, and without a key the Python API refused
    an openai: model ('needs OPENAI_API_KEY (or --base-url ...)') although the CLI honours $OPENAI_BASE_URL."""
    from tests.kit.openai_server import FakeOpenAIServer, structured

    (tmp_path / "test_served.py").write_text(SERVER_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    with FakeOpenAIServer(lambda request: structured({"reason": "It answers.", "verdict": "yes"})) as server:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
                               "--judgegraph-model", "openai:gpt-4.1-mini", "--judgegraph-base-url", server.base_url,
                               "test_served.py"], check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        calls = server.calls["/v1/chat/completions"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls == 1 and "1 conversation(s) judged; 0 judge error(s); 1 judge call(s)" in proc.stdout
