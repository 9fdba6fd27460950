"""docs/providers.md "How to add a provider", run as written: the provider module copied out of the page into a
file, the usage block in a fresh interpreter, against the loopback OpenAI server (the gateway of the example)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.openai_server import FakeOpenAIServer, schema_responder

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "providers.md"
KEY = "gw-secret-0123456789abcdef"


def block(starts: str) -> str:
    for found in re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S):
        if found.startswith(starts):
            return str(found)
    raise AssertionError(f"no python block starting {starts!r} in {PAGE}")


def run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "mygateway.py").write_text(block("# mygateway.py"), encoding="utf-8")
    return subprocess.run([sys.executable, "-c", block("from judgegraph.judges import resolve_judge\nfrom judgegraph.metrics")],
                          env={**env, "PYTHONPATH": f"{tmp_path}:{env.get('PYTHONPATH', '')}"}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_the_documented_provider_judges_at_its_own_url(tmp_path, bare_env):
    with FakeOpenAIServer(schema_responder) as server:
        env = {**bare_env, "GATEWAY_URL": server.base_url, "GATEWAY_API_KEY": KEY,
               "JUDGEGRAPH_JUDGE_CACHE": "off"}
        proc = run(tmp_path, env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert server.calls["/v1/chat/completions"] == 1
    assert proc.stdout.split() == ["llm:gpt-4.1-mini", "1.0"]


def test_the_documented_provider_says_what_it_needs(tmp_path, bare_env):
    proc = run(tmp_path, {**bare_env, "GATEWAY_API_KEY": KEY})
    assert proc.returncode == 1 and "model 'gateway:gpt-4.1-mini' needs GATEWAY_URL" in proc.stderr


def test_a_registered_provider_keys_are_redacted_and_its_cache_rule_used(tmp_path, monkeypatch):
    """What the registry gives a provider module beside its client: its key variable taken out of what is kept,
    its cache rule for the dry run."""
    from judgegraph import providers
    from judgegraph.judges.redact import Redactor
    from judgegraph.providers import cache_rule

    (tmp_path / "mygateway.py").write_text(block("# mygateway.py"), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GATEWAY_API_KEY", KEY)
    monkeypatch.setitem(providers.PROVIDERS, "gateway", "mygateway")
    providers.get.cache_clear()
    try:
        assert cache_rule("gateway:gpt-4.1-mini").kind == "prefix"
        assert KEY not in Redactor.for_model(object())(json.dumps({"echo": f"key={KEY}"}))
    finally:
        providers.get.cache_clear()
