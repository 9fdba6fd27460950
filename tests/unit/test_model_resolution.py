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


def test_resolve_judge_takes_a_typed_config_as_the_keywords_do():
    """Issue 26.4: resolve_judge takes a JudgeConfig; the keyword call is the same configuration (the keywords it
    does not name go to the chat model's provider)."""
    from judgegraph.judges import JudgeConfig, resolve_judge

    config = JudgeConfig.of("openai:gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", max_concurrency=4, rpm=60,
                            cache=False)
    assert config.client == {"base_url": "http://127.0.0.1:9/v1"} and config.max_concurrency == 4
    by_config = resolve_judge(config)
    by_keywords = resolve_judge("openai:gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", max_concurrency=4, rpm=60,
                                cache=False)
    for judge in (by_config, by_keywords):
        assert judge.base_url.rstrip("/") == "http://127.0.0.1:9/v1" and judge.cache is None
        assert (judge.limiter.max_in_flight, judge.limiter.rpm.per_minute) == (4, 60)
    jury = resolve_judge(config.model_copy(update={"model": ["openai:a", "openai:b"]}))
    assert [j.model_name for j in jury.jurors] == ["a", "b"] and all(j.limiter.rpm.per_minute == 60 for j in jury.jurors)
    with pytest.raises(TypeError, match="max_tries given beside it"):
        resolve_judge(config, max_tries=2)
    with pytest.raises(ValueError, match="max_concurrency"):
        JudgeConfig(model=None, max_concurrency="many")


def test_every_provider_sdk_timeout_is_retried_and_named():
    """The judge's error rules read each provider's SDK errors (an Anthropic timeout was neither a timeout nor
    worth retrying: only the openai SDK's were known)."""
    anthropic = pytest.importorskip("anthropic")
    import httpx

    from judgegraph.judges.llm import _is_fatal, _is_transient, describe_request_error
    from judgegraph.judges.redact import Redactor

    timeout = anthropic.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/messages"))
    assert _is_transient(timeout) and not _is_fatal(timeout)
    assert "deadline of 5 s" in describe_request_error(timeout, 5.0, Redactor())
    dropped = anthropic.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1/messages"))
    assert _is_transient(dropped)


def test_provider_knowledge_lives_in_the_provider_modules():
    """Issue 26.4: outside the provider modules no module of src names Anthropic (the price table may)."""
    from pathlib import Path

    import judgegraph

    src = Path(judgegraph.__file__).parent
    naming = sorted(str(p.relative_to(src)) for p in src.rglob("*.py") if "anthropic" in p.read_text("utf-8").lower())
    assert set(naming) <= {"providers/anthropic.py", "providers/__init__.py", "cost/pricing.py"}, naming
