"""The dry run's cached-token estimate is the provider's rule (judgegraph.providers.cache_rule): for an
``anthropic:`` model, only what the judge marks with ``cache_control``, from the model's minimum cacheable length;
through the CLI against the loopback Anthropic server, the estimate equals what the server then reports as
``cache_read_input_tokens`` (the OpenAI path's test: test_cached_tokens_cli.py). A provider with no known rule is
"unknown", never OpenAI's figure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judgegraph.data.results import Usage
from tests.integration.test_cached_tokens_cli import conversation_lines, write_long_chats
from tests.kit import cli
from tests.kit.anthropic_server import AnthropicRequest, FakeAnthropicServer

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")]

GUIDELINES = ("Answer in one sentence.", "Be polite.", "Name the part number.", "Do not promise dates.")
ESTIMATE = re.compile(r"prefix cache: (\d+) of (\d+) input tokens cacheable")


def followed(request: AnthropicRequest) -> dict[str, object]:
    return {"reason": "Followed.", "violating_turns": [], "verdict": "yes"}


def dry_and_real(tmp_path: Path, env: dict[str, str], model: str) -> tuple[str, list[Usage], FakeAnthropicServer]:
    """The dry run's stdout, then the real run's usages (one conversation at a time, one call at a time: the
    requests in the dry run's order), and the server."""
    chats = write_long_chats(tmp_path / "chats.jsonl")
    out = tmp_path / "r.jsonl"
    guidelines = [arg for g in GUIDELINES for arg in ("--guideline", g)]
    with FakeAnthropicServer(followed) as server:
        args = ["eval", str(chats), "-m", "conversational-guidelines",
                *guidelines, "--model", model, "--base-url", server.base_url, "--no-progress", "--no-cache",
                "--concurrency", "1", "--workers", "1", "--out", str(out), "--overwrite"]
        dry = cli.run([*args, "--dry-run"], env=env, timeout=120)
        assert dry.returncode == 0, dry.stderr
        assert not server.requests  # the dry run sent nothing
        real = cli.run([*args, "-q"], env=env, timeout=120)
        assert real.returncode == 0, real.stdout + real.stderr
    usages = [Usage.model_validate(r["results"]["conversational_guidelines"]["usage"]) for r in conversation_lines(out)]
    return " ".join(dry.stdout.split()), usages, server


def test_the_anthropic_dry_run_estimates_what_the_server_then_reads(tmp_path, bare_env):
    dry, usages, server = dry_and_real(tmp_path, bare_env, "anthropic:claude-sonnet-4-5")
    reported = [u["cache_read_input_tokens"] for u in server.usage_reported]
    cached = sum(u.cached_input_tokens for u in usages)
    assert cached == sum(reported) > 0  # the results carry what the server reported
    # per conversation: the first call sends the shared part unmarked, the second writes it, the two others read it
    # (the two conversations' calls may interleave, one at a time)
    written = [u["cache_creation_input_tokens"] for u in server.usage_reported]
    assert sum(n > 0 for n in reported) == 4 and sum(n > 0 for n in written) == 2, server.usage_reported
    assert sum(reported) == 2 * sum(written)
    estimate = ESTIMATE.search(dry)
    assert estimate, dry
    assert int(estimate.group(1)) == cached  # the same rule, the same marks, the same requests in the same order
    assert "Anthropic's cache_control rule, from 1,024 tokens" in dry
    assert "OpenAI" not in dry


def test_a_model_s_higher_minimum_caches_nothing_in_both(tmp_path, bare_env):
    """Claude Haiku 4.5 caches from 4,096 tokens: the same marked prefixes (under it) are neither written nor read,
    and the dry run says 0 (OpenAI's rule would have counted them)."""
    dry, usages, server = dry_and_real(tmp_path, bare_env, "anthropic:claude-haiku-4-5")
    assert all(u["cache_read_input_tokens"] == u["cache_creation_input_tokens"] == 0 for u in server.usage_reported)
    assert sum(u.cached_input_tokens for u in usages) == 0
    estimate = ESTIMATE.search(dry)
    assert estimate and int(estimate.group(1)) == 0, dry
    assert "from 4,096 tokens" in dry


@pytest.mark.parametrize("model", ["google_genai:gemini-2.5-flash", "mistralai:mistral-large-latest"])
def test_a_provider_with_no_known_rule_is_unknown_not_openai_s_figure(tmp_path, bare_env, model):
    chats = write_long_chats(tmp_path / "chats.jsonl")
    dry = cli.run(["eval", str(chats), "-m", "turn-relevancy",
                   "--model", model, "--dry-run", "--out", str(tmp_path / "r.jsonl")],
                  env=bare_env, timeout=120)
    assert dry.returncode == 0, dry.stderr
    said = " ".join(dry.stdout.split())
    provider = model.split(":")[0]
    assert f"prefix cache: unknown for provider '{provider}'" in said
    assert not ESTIMATE.search(said) and "OpenAI's rule" not in said
    assert "no prompt-cache rule is known" in said  # the basis says so too


def test_pairwise_says_unknown_for_a_provider_with_no_known_rule(tmp_path, bare_env):
    a = write_long_chats(tmp_path / "a.jsonl", n=1, exchanges=2)
    b = write_long_chats(tmp_path / "b.jsonl", n=1, exchanges=2)
    done = cli.run(["pairwise", str(a), str(b), "--model",
                    "google_genai:gemini-2.5-flash", "--dry-run"],
                   env=bare_env, timeout=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "cacheable tokens unknown: no prompt-cache rule known for provider 'google_genai'" in said, said


def test_the_rule_is_a_property_of_the_provider():
    from judgegraph.providers import cache_rule
    from judgegraph.providers.anthropic import min_tokens as anthropic_min_tokens

    assert cache_rule("gpt-4.1-mini").kind == cache_rule("openai:gpt-4.1-mini").kind == "prefix"
    assert (cache_rule("anthropic:claude-sonnet-4-5").kind, cache_rule("anthropic:claude-sonnet-4-5").min_tokens) \
        == ("marked", 1024)
    assert cache_rule("ollama:llama3").kind == "unknown"
    assert [anthropic_min_tokens(m) for m in ("claude-sonnet-4-5-20250929", "claude-opus-4-5", "claude-haiku-4-5",
                                              "claude-3-5-haiku-latest", "claude-sonnet-4-6", "claude-opus-4-1",
                                              "claude-3-7-sonnet-latest", "claude-opus-9")] \
        == [1024, 4096, 4096, 2048, 2048, 1024, 1024, None]
    unlisted = cache_rule("anthropic:claude-opus-9")
    assert unlisted.min_tokens == 4096 and not unlisted.model_known and "may undercount" in unlisted.describe()
    assert json.dumps(cache_rule("x:y").describe()).count("unknown") == 1
