"""The README's and docs' own snippets, run as a new user would run them: copied
out of the Markdown, as `python -c` (forked by the test kit), against the loopback OpenAI server."""

import json
import re
from pathlib import Path

import pytest

from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, schema_responder

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def python_block(markdown: Path, starts: str) -> str:
    """The ```python block of ``markdown`` whose first line is ``starts``."""
    for block in re.findall(r"```python\n(.*?)```", markdown.read_text(encoding="utf-8"), re.S):
        if block.startswith(starts):
            return block
    raise AssertionError(f"no python block starting {starts!r} in {markdown}")


CHATBOT = '''
def chatbot(messages):
    return "Open the app, choose Cards, then Block card."
app = chatbot
'''


def test_docs_apps_simulate_snippet_runs_as_written(tmp_path, bare_env):
    """docs/apps.md: `from judgegraph.apps import simulate` then `simulate(chatbot, ...)`.
    It used to bind the subpackage `judgegraph.apps.simulate` (TypeError: 'module' object is not callable)."""
    snippet = python_block(ROOT / "docs" / "apps.md", "from judgegraph.apps import simulate")
    with FakeOpenAIServer(schema_responder) as server:
        env = {**bare_env, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key",
               "JUDGEGRAPH_JUDGE_CACHE": str(tmp_path / "judge-cache.sqlite")}
        proc = cli.run([], code=CHATBOT + snippet, env=env, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert server.calls["/v1/chat/completions"] > 0
    line = proc.stdout.strip().splitlines()[0]
    assert line.startswith("lost-card max_turns 6 {") and "'turn_relevancy': 1.0" in line, proc.stdout


def test_readme_apps_import_line_gives_the_function(tmp_path, bare_env):
    """The README's import line (with `simulate` last) and its simulate call, in a
    process that imported the subpackage first (as a test module or the CLI would)."""
    block = python_block(ROOT / "README.md", "from judgegraph.apps import judge_node")
    import_line = block.splitlines()[0]
    call = block[block.index("runs = simulate(app"):]
    code = ("import judgegraph.apps.simulate.graph\n" + import_line + "\n" + CHATBOT + call
            + "\nimport json; print(json.dumps([r.status for r in runs]))\n"
            "from judgegraph.apps.simulate import Scenario, load_scenarios, SimulationResult\n"
            "import judgegraph; assert judgegraph.simulate is simulate\n")
    with FakeOpenAIServer(schema_responder) as server:
        env = {**bare_env, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key",
               "JUDGEGRAPH_JUDGE_CACHE": str(tmp_path / "judge-cache.sqlite")}
        proc = cli.run([], code=code, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["max_turns"]
