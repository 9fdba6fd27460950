"""Where a judge model is served from: one rule for $OPENAI_BASE_URL, and provider prefixes a base URL cannot serve."""

import pytest

from judgegraph.judges.llm import ModelConfigError, resolve_model


def test_the_python_api_honours_openai_base_url_without_a_key(monkeypatch):
    """Issue 27.9: the command line read $OPENAI_BASE_URL, resolve_judge raised ModelConfigError."""
    from judgegraph.judges import resolve_judge

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    judge = resolve_judge("openai:gpt-4.1-mini", cache=False)
    assert judge.base_url.rstrip("/") == "http://127.0.0.1:9/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ModelConfigError, match=r"OPENAI_BASE_URL; base_url= in Python"):
        resolve_judge("openai:gpt-4.1-mini", cache=False)


@pytest.mark.parametrize("model, hint", [("opneai:gpt-4.1-mini", "did you mean 'openai:gpt-4.1-mini'?"),
                                         ("llama3.1:8b", "'openai:llama3.1:8b'")])
def test_a_provider_prefix_a_base_url_cannot_serve_is_an_error_not_dropped(model, hint):
    """Issue 27.12: with a base URL, `opneai:gpt-4.1-mini` was silently sent as `gpt-4.1-mini` (and an Ollama tag
    `llama3.1:8b` as the model `8b`)."""
    with pytest.raises(ModelConfigError, match="a server at a base URL takes 'openai:NAME'") as raised:
        resolve_model(model, base_url="http://127.0.0.1:9/v1")
    assert hint in str(raised.value)
