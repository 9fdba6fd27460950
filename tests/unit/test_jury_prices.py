"""Issue 27.2: a jury's price is the sum of its jurors' shares at their own prices (the dry run and the live run:
tests/integration/test_jury_server.py)."""

import pytest

from judgegraph.cost.pricing import jury_prices, prices_for


def test_a_jury_is_priced_as_the_sum_of_its_jurors_shares():
    mini, big = prices_for("llm:gpt-4.1-mini"), prices_for("llm:gpt-4.1")
    assert mini is not None and big is not None
    assert jury_prices(["llm:gpt-4.1-mini"] * 3) == mini  # repeats of one model: its prices
    both = jury_prices(["llm:gpt-4.1-mini", "llm:gpt-4.1"])
    from judgegraph.data.results import Usage

    usage = Usage(calls=2, input_tokens=2000, output_tokens=200)  # each juror got 1,000 in, 100 out
    half = Usage(calls=1, input_tokens=1000, output_tokens=100)
    assert both is not None and both.cost(usage) == pytest.approx(mini.cost(half) + big.cost(half))
    assert jury_prices(["llm:gpt-4.1-mini", "llm:no-such-model"]) is None

