"""Cached input tokens end to end (docs/cost_cache.md), through the CLI against the loopback server, which
reports ``prompt_tokens_details.cached_tokens`` by OpenAI's prefix rule: the results' usage carries them,
the cost prices them at the cached price of a --prices file, and the dry run's estimate of the cacheable
tokens equals what the real run is then reported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judgegraph.cost.pricing import Prices
from judgegraph.data.results import Usage
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, structured

pytestmark = pytest.mark.integration


def write_long_chats(path: Path, n: int = 2, exchanges: int = 6) -> Path:
    """``n`` conversations of ``exchanges`` exchanges with replies of ~1,200 characters, deterministic."""
    with path.open("w") as fh:
        for c in range(n):
            turns = []
            for i in range(exchanges):
                turns.append({"role": "user", "content": f"Question {i} about order {c}: when does part {i} ship?"})
                body = " ".join(f"part{i}-{c}-word{k}" for k in range(90))
                turns.append({"role": "assistant", "content": f"Part {i} of order {c} ships soon. {body}"})
            fh.write(json.dumps({"id": f"long{c}", "turns": turns}) + "\n")
    return path


def conversation_lines(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r["type"] == "conversation"]


def test_cached_tokens_reach_usage_cost_and_the_dry_run(tmp_path, bare_env):
    chats = write_long_chats(tmp_path / "chats.jsonl")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-4.1-mini": {"input": 1.0, "output": 2.0, "cached_input": 0.25,
                                                   "source": "test table"}}))
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(lambda req: structured({"reason": "on topic", "verdict": "yes"})) as server:
        args = ["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--no-progress",
                "--no-cache", "--concurrency", "1", "--prices", str(prices), "--out", str(out)]
        dry = cli.run([*args, "--dry-run"], env=bare_env,
                      timeout=120)
        assert dry.returncode == 0, dry.stderr
        server.prefix_cache = type(server.prefix_cache)()  # the dry run sent nothing; start the real run afresh
        real = cli.run([*args, "-q"], env=bare_env, timeout=120)
        assert real.returncode == 0, real.stderr
    records = conversation_lines(out)
    usages = [Usage.model_validate(r["results"]["turn_relevancy"]["usage"]) for r in records]
    cached = sum(u.cached_input_tokens for u in usages)
    assert cached > 0 and cached % 128 == 0
    listed = Prices(1.0, 2.0, "test", cached_input=0.25)
    for record, usage in zip(records, usages):
        assert record["cost_usd"] == pytest.approx(listed.cost(usage))
        assert record["cost_usd"] < Prices(1.0, 2.0, "test").cost(usage)  # cheaper than uncached
    estimate = re.search(r"prefix cache: (\d+) of (\d+) input tokens cacheable", " ".join(dry.stdout.split()))
    assert estimate, dry.stdout
    assert int(estimate.group(1)) == cached  # the same rule, the same requests, in the same order
    assert int(estimate.group(2)) == sum(u.input_tokens for u in usages)
    assert "test table" in " ".join(dry.stdout.split())
    assert f"{cached} in from the provider's prompt cache" in " ".join(real.stdout.split())  # the run's summary
    long0 = next(r for r in records if r["conversation_id"] == "long0")  # lines come in the order judged
    window = next(v for v in long0["results"]["turn_relevancy"]["verdicts"] if v["usage"]["cached_input_tokens"])
    shown = cli.run(["show", str(out), "--conversation", "long0",
                     "--metric", "turn-relevancy", "--window", str(window["window"])],
                    env=bare_env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    shown_text = " ".join(shown.stdout.split())  # the console wraps long lines
    assert f"{window['usage']['cached_input_tokens']} in from the provider's prompt cache" in shown_text


def test_a_bad_price_file_is_a_usage_error_before_any_call(tmp_path, bare_env):
    chats = write_long_chats(tmp_path / "chats.jsonl", n=1, exchanges=1)
    prices = tmp_path / "prices.yaml"
    prices.write_text("gpt-4.1-mini:\n  input: 0.4\n  outptu: 1.6\n")
    with FakeOpenAIServer() as server:
        run = cli.run(["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url,
                       "--no-progress", "--out", str(tmp_path / "r.jsonl")],
                      env={**bare_env, "JUDGEGRAPH_PRICES": str(prices)}, timeout=120)
        assert server.calls["/v1/chat/completions"] == 0
    assert run.returncode == 2, run.stderr
    message = " ".join(run.stderr.split())
    assert str(prices) in message and "line 1" in message and "outptu" in message


def test_pairwise_takes_a_price_file_and_refuses_a_bad_one(tmp_path, bare_env):
    a = write_long_chats(tmp_path / "a.jsonl", n=1, exchanges=2)
    b = write_long_chats(tmp_path / "b.jsonl", n=1, exchanges=2)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"gpt-4.1-mini": {"input": 1000, "output": 1000}}))
    bad.write_text(json.dumps({"gpt-4.1-mini": {"input": 1000}}))
    base = ["pairwise", str(a), str(b), "--model", "openai:gpt-4.1-mini",
            "--dry-run"]
    refused = cli.run([*base, "--prices", str(bad)], env=bare_env, timeout=120)
    assert refused.returncode == 2 and "'output'" in " ".join(refused.stderr.split()), refused.stderr
    priced = cli.run([*base, "--prices", str(good)], env=bare_env, timeout=120)
    assert priced.returncode == 0, priced.stderr
    dollars = re.search(r"\$([0-9.]+)\. No call was made", " ".join(priced.stdout.split()))
    assert dollars and float(dollars.group(1)) > 1, priced.stdout  # $1,000 per million tokens: the file's price
