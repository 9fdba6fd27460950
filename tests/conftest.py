import os

import pytest

# Tests never reach a hub or a provider; no key exists.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("OPENAI_API_KEY", None)


@pytest.fixture
def bare_env():
    """A minimal environment for a subprocess: PATH only (no keys, no proxies), plus
    PYTHONPATH when set, so the subprocess runs the judgegraph under test (e.g. a
    worktree's ``src/``), not whichever judgegraph the environment has installed."""
    env = {"PATH": "/usr/bin:/bin"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env
