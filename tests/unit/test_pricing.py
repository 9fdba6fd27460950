"""Prices (docs/cost_cache.md): cached input priced at the cached price, a dated source per entry, and a
user's price file (--prices, JUDGEGRAPH_PRICES) overriding the table, validated with errors naming the
file, the line, the model and the field."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from judgegraph.cost.pricing import (
    PRICES,
    TABLE_DATE,
    PriceFileError,
    Prices,
    load_price_file,
    lookup,
    prices_for,
    user_prices,
)
from judgegraph.data.results import Usage
from judgegraph.judges.llm import _usage


def test_cached_input_tokens_are_priced_at_the_cached_price():
    prices = Prices(0.4, 1.6, "test", cached_input=0.1)
    usage = Usage(calls=1, input_tokens=1_000_000, cached_input_tokens=600_000, output_tokens=100_000)
    assert prices.cost(usage) == pytest.approx(0.4 * 0.4 + 0.6 * 0.1 + 0.1 * 1.6)
    assert Prices(0.4, 1.6, "test").cost(usage) == pytest.approx(0.4 + 0.16)  # no cached price: the input price
    assert prices.cost(Usage(input_tokens=1_000_000)) == pytest.approx(0.4)


def test_the_built_in_price_of_a_cached_run_is_lower():
    mini = prices_for("llm:gpt-4.1-mini")
    assert mini is not None and mini.cached_input == 0.1
    cached = Usage(input_tokens=1_000_000, cached_input_tokens=1_000_000)
    assert mini.cost(cached) == pytest.approx(0.1) and mini.cost(Usage(input_tokens=1_000_000)) == pytest.approx(0.4)


def test_usage_adds_cached_tokens():
    total = Usage(calls=1, input_tokens=10, cached_input_tokens=4) + Usage(calls=1, input_tokens=5, cached_input_tokens=1)
    assert (total.input_tokens, total.cached_input_tokens) == (15, 5)


def test_the_reported_cache_read_becomes_cached_input_tokens():
    """langchain-openai puts OpenAI's prompt_tokens_details.cached_tokens (and langchain-anthropic Anthropic's
    cache reads) in usage_metadata.input_token_details.cache_read."""
    raw = AIMessage("{}", usage_metadata={"input_tokens": 2000, "output_tokens": 10, "total_tokens": 2010,
                                          "input_token_details": {"cache_read": 1536}})
    assert _usage(raw, [HumanMessage("x")]).cached_input_tokens == 1536
    odd = AIMessage("{}", usage_metadata={"input_tokens": 20, "output_tokens": 1, "total_tokens": 21,
                                          "input_token_details": {"cache_read": 99}})  # more than the input
    assert _usage(odd, [HumanMessage("x")]).cached_input_tokens == 0


def test_every_built_in_entry_has_a_dated_source_and_consistent_prices():
    for name, entry in PRICES.items():
        assert TABLE_DATE in entry.source and "litellm" in entry.source, name
        assert entry.cached_input is not None and entry.cached_input <= entry.input, name
        assert entry.batch_input is not None and entry.batch_input <= entry.input, name


def test_a_price_file_overrides_the_table(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4.1-mini": {"input": 0.3, "output": 1.2, "cached_input": 0.05,
                                                 "source": "our contract, 2026-10"},
                                "my-local-model": {"input": 0, "output": 0}}))
    table = load_price_file(path)
    mine = prices_for("llm:gpt-4.1-mini", table=table)
    assert mine is not None and (mine.input, mine.output, mine.cached_input) == (0.3, 1.2, 0.05)
    assert "our contract" in mine.source and str(path) in mine.source
    assert prices_for("llm:my-local-model", table=table).cost(Usage(input_tokens=10**6)) == 0
    assert prices_for("llm:gpt-4o", table=table).input == lookup("gpt-4o").input  # not in the file: the table
    assert prices_for("llm:gpt-4.1-mini", price_in=1.0, price_out=2.0, table=table).input == 1.0  # flags win


def test_a_yaml_price_file_and_the_environment_variable(tmp_path, monkeypatch):
    path = tmp_path / "prices.yaml"
    path.write_text("# our prices\nmy-model:\n  input: 1.5\n  output: 3\n  batch_input: 0.75\n  batch_output: 1.5\n")
    monkeypatch.setenv("JUDGEGRAPH_PRICES", str(path))
    table = user_prices()
    assert table is not None and table["my-model"].batch_input == 0.75
    batch = prices_for("llm:my-model", table=table).batch()
    assert (batch.input, batch.output) == (0.75, 1.5)  # the file's batch prices
    monkeypatch.delenv("JUDGEGRAPH_PRICES")
    assert user_prices() is None


def test_batch_prices_come_from_the_table_else_half_the_list_price():
    mini = prices_for("llm:gpt-4.1-mini").batch()
    assert (mini.input, mini.output) == (0.2, 0.8) and mini.cached_input == pytest.approx(0.05)
    assert "batch price, 0.5 of list (the table's batch prices)" in mini.source
    given = Prices(1.0, 4.0, "given", cached_input=0.5).batch()  # no batch price known: OpenAI's half
    assert (given.input, given.output) == (0.5, 2.0) and given.cached_input == pytest.approx(0.25)


@pytest.mark.parametrize(("text", "expected"), [
    ('{\n  "gpt-4.1-mini": {"input": 0.4}\n}', ["line 2", "'gpt-4.1-mini'", "'output'"]),
    ('{\n  "m": {"input": -1, "output": 1}\n}', ["line 2", "'m'", "'input'", "-1"]),
    ('{\n  "m": {"input": 1, "output": 1, "cache": 0.1}\n}', ["line 2", "'m'", "unknown field(s) cache"]),
    ('{\n  "m": {"input": "cheap", "output": 1}\n}', ["'input'", "'cheap'"]),
    ('{\n  "m": {"input": 1, "output": 1},\n}', ["line 3", "not valid JSON"]),
    ('["gpt-4.1-mini"]', ["a mapping of model names"]),
    ('{"m": 0.4}', ["'m'", "'input' and 'output'"]),
])
def test_a_bad_price_file_is_refused_naming_the_file_line_model_and_field(tmp_path, text, expected):
    path = tmp_path / "prices.json"
    path.write_text(text)
    with pytest.raises(PriceFileError) as err:
        load_price_file(path)
    assert str(path) in str(err.value)
    for part in expected:
        assert part in str(err.value), str(err.value)


def test_a_missing_price_file_is_refused(tmp_path):
    with pytest.raises(PriceFileError, match="cannot read the price file"):
        load_price_file(tmp_path / "nope.json")
