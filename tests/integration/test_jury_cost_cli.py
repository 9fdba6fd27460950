"""Issue 27.2: the cost of juries and repeats. `--repeat 3 --dry-run` showed 20 calls for a run that makes 60, and
the live run's cost was "unknown (no price for this model)" for gpt-4.1-mini, which the price table holds."""

import json
import re

import pytest

from judgegraph.cli import main
from judgegraph.pricing import jury_prices, prices_for
from tests.kit.openai_server import FakeOpenAIServer, structured

pytestmark = pytest.mark.integration

CHATS = "examples/support_chats.jsonl"  # six conversations, 20 windows


@pytest.fixture
def chats():
    from pathlib import Path

    return str(Path(__file__).resolve().parents[2] / CHATS)


def test_the_dry_run_counts_every_repeat_and_juror(chats, capsys):
    assert main(["eval", chats, "--model", "openai:gpt-4.1-mini", "--repeat", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"total\W+60\W+\d+", out), out
    assert main(["eval", chats, "--model", "openai:gpt-4.1-mini", "--model", "openai:gpt-4.1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"total\W+40\W+\d+", out) and "a jury of 2 (gpt-4.1-mini, gpt-4.1)" in out, out


def test_a_jury_is_priced_as_the_sum_of_its_jurors_shares():
    mini, big = prices_for("llm:gpt-4.1-mini"), prices_for("llm:gpt-4.1")
    assert mini is not None and big is not None
    assert jury_prices(["llm:gpt-4.1-mini"] * 3) == mini  # repeats of one model: its prices
    both = jury_prices(["llm:gpt-4.1-mini", "llm:gpt-4.1"])
    from judgegraph.results import Usage

    usage = Usage(calls=2, input_tokens=2000, output_tokens=200)  # each juror got 1,000 in, 100 out
    half = Usage(calls=1, input_tokens=1000, output_tokens=100)
    assert both is not None and both.cost(usage) == pytest.approx(mini.cost(half) + big.cost(half))
    assert jury_prices(["llm:gpt-4.1-mini", "llm:no-such-model"]) is None


def test_a_live_repeat_run_is_priced(chats, tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(lambda request: structured({"reason": "On topic.", "verdict": "yes"})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        status = main(["eval", chats, "--model", "openai:gpt-4.1-mini", "--repeat", "3", "--out", str(out),
                       "--no-progress", "-q"])
        calls = server.calls["/v1/chat/completions"]
    printed = capsys.readouterr()
    assert status == 0 and calls == 60, printed.out + printed.err
    assert "cost unknown" not in printed.out + printed.err
    summary = json.loads(out.read_text().splitlines()[-1])
    assert summary["type"] == "summary" and summary["cost_usd"] > 0
