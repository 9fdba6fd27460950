"""Judge prices in US dollars per million tokens, overridable per run (docs/runs.md);
a model not in the table has no price: the cost is unknown, never guessed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .results import Usage

#: Token counts above this (10^15, far beyond any run) are not priced: the cost is unknown.
MAX_PRICED_TOKENS = 10**15

#: What a batch API charges of the list price (OpenAI's Batch API: half; docs/batch.md).
BATCH_FACTOR = 0.5

#: The date the table below was taken.
TABLE_DATE = "2025-08-15"

#: model name (without provider prefix) -> (input, output) dollars per million tokens.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-sonnet-4-0": (3.00, 15.00),
    "claude-3-5-haiku-latest": (0.80, 4.00),
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
}


@dataclass(frozen=True)
class Prices:
    """Dollars per million tokens; ``source`` says where they came from."""

    input: float
    output: float
    source: str

    def cost(self, usage: Usage) -> float | None:
        """Dollars for ``usage``, or None when it cannot be priced: accounting never costs a verdict."""
        tokens = (usage.input_tokens, usage.output_tokens)
        if not all(isinstance(n, int) and 0 <= n <= MAX_PRICED_TOKENS for n in tokens):
            return None
        dollars = (tokens[0] * self.input + tokens[1] * self.output) / 1_000_000
        return dollars if math.isfinite(dollars) and dollars >= 0 else None

    def batch(self, factor: float = BATCH_FACTOR) -> Prices:
        """These prices as a batch API charges them (``eval --batch``): ``factor`` of each."""
        return dataclasses.replace(self, input=self.input * factor, output=self.output * factor,
                                   source=f"{self.source}; batch price, {factor:g} of list")

    def describe(self) -> str:
        return f"${self.input:g} in / ${self.output:g} out per 1M tokens ({self.source})"


def _bare(model: str) -> str:
    name = model.split(":", 1)[1] if ":" in model else model  # "llm:gpt-4.1-mini", "openai:gpt-4.1-mini"
    name = name.split("+", 1)[0]  # an aligned judge, "llm:gpt-4.1-mini+aligned-<hash12>": its model's price
    return name.strip().lower()


def lookup(model: str) -> tuple[float, float] | None:
    """The table's prices for ``model``; a dated snapshot name such as
    ``gpt-4.1-mini-2025-04-14`` takes its base model's price."""
    name = _bare(model)
    if name in PRICES:
        return PRICES[name]
    best = max((k for k in PRICES if name.startswith(k + "-")), key=len, default=None)
    if best is not None and name[len(best) + 1:][:4].isdigit():
        return PRICES[best]
    return None


def prices_for(model: str, price_in: float | None = None, price_out: float | None = None) -> Prices | None:
    """The prices for a judge model: the overrides where given, else the
    table; None when neither knows both."""
    table = lookup(model)
    if price_in is not None and price_out is not None:
        return Prices(price_in, price_out, "given on the command line")
    if price_in is None and price_out is None:
        return None if table is None else Prices(*table, f"judgegraph price table of {TABLE_DATE}")
    if table is None:
        return Prices(price_in or 0.0, price_out or 0.0, "given on the command line (the other price 0)")
    return Prices(table[0] if price_in is None else price_in, table[1] if price_out is None else price_out,
                  f"partly given, rest from the table of {TABLE_DATE}")
