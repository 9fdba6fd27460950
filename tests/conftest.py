import os

# Tests never reach a hub or a provider; no key exists.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("OPENAI_API_KEY", None)


import pytest


@pytest.fixture(autouse=True)
def _judge_cache_per_test(tmp_path_factory, monkeypatch):
    """The persistent judge cache (on by default for LLM judges at temperature 0)
    goes to a fresh file per test, never to the user's cache folder: a second
    run of the suite must not be answered from the first."""
    monkeypatch.setenv("JUDGEGRAPH_JUDGE_CACHE", str(tmp_path_factory.mktemp("judge-cache") / "judge-cache.sqlite"))
