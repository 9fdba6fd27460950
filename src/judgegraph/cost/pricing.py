"""Judge prices in US dollars per million tokens, each entry dated with its source (docs/cost_cache.md);
a user's own table (``--prices FILE``, ``JUDGEGRAPH_PRICES``) overrides it, and ``--price-in/--price-out``
override both. A model in no table has no price: the cost is unknown, never guessed.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..data.results import Usage

#: Token counts above this (10^15, far beyond any run) are not priced: the cost is unknown.
MAX_PRICED_TOKENS = 10**15

#: What a batch API charges of the list price when the table gives no batch price (OpenAI's Batch API: half).
BATCH_FACTOR = 0.5

#: The day the built-in table was checked against its source.
TABLE_DATE = "2026-11-26"
#: Where the built-in table comes from: LiteLLM's maintained price table, as shipped in its PyPI release
#: (``pip download litellm==1.110.2``; the same file is BerriAI/litellm's model_prices_and_context_window.json).
TABLE_SOURCE = "litellm 1.110.2 on PyPI, litellm/model_prices_and_context_window_backup.json"
#: The environment variable naming a price file (``--prices`` wins over it).
PRICES_ENV = "JUDGEGRAPH_PRICES"
#: The largest price file read, in bytes.
MAX_PRICE_FILE_BYTES = 1_000_000
#: The fields of an entry of a price file; ``input`` and ``output`` are required.
PRICE_FIELDS = ("input", "output", "cached_input", "batch_input", "batch_output", "source")


@dataclass(frozen=True)
class Prices:
    """One model's prices, dollars per million tokens: input, output, cached input (a prompt-cache read; cached
    input tokens are priced at ``input`` when None), and the Batch API's input and output (None where unknown);
    ``source`` says where they came from."""

    input: float
    output: float
    source: str = ""
    cached_input: float | None = None
    batch_input: float | None = None
    batch_output: float | None = None

    def cost(self, usage: Usage) -> float | None:
        """Dollars for ``usage``, or None when it cannot be priced: accounting never costs a verdict."""
        tokens = (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
        if not all(isinstance(n, int) and 0 <= n <= MAX_PRICED_TOKENS for n in tokens):
            return None
        cached = min(tokens[2], tokens[0])
        cached_price = self.input if self.cached_input is None else self.cached_input
        dollars = ((tokens[0] - cached) * self.input + cached * cached_price + tokens[1] * self.output) / 1_000_000
        return dollars if math.isfinite(dollars) and dollars >= 0 else None

    def batch(self, factor: float = BATCH_FACTOR) -> Prices:
        """These prices as a batch API charges them (``eval --batch``): the source's batch prices where it gives
        them, else ``factor`` of the list prices; cached input in the same proportion as input."""
        if self.batch_input is not None and self.batch_output is not None:
            inp, out = self.batch_input, self.batch_output
            ratio = f", {inp / self.input:g} of list" if self.input > 0 else ""
            how = f"batch price{ratio} (the table's batch prices)"
        else:
            inp, out, how = self.input * factor, self.output * factor, f"batch price, {factor:g} of list"
        cached = None if self.cached_input is None or self.input <= 0 else self.cached_input * inp / self.input
        return Prices(inp, out, f"{self.source}; {how}", cached)

    def describe(self) -> str:
        cached = "" if self.cached_input is None else f", ${self.cached_input:g} cached in"
        return f"${self.input:g} in / ${self.output:g} out per 1M tokens{cached} ({self.source})"


#: A price table's entry (the built-in table's, a price file's) is a :class:`Prices`.
PriceEntry = Prices


def _entry(inp: float, out: float, cached: float, batch_in: float, batch_out: float, key: str) -> Prices:
    return Prices(inp, out, f"{TABLE_SOURCE}, key {key!r}, checked {TABLE_DATE}", cached, batch_in, batch_out)


#: model name (without provider prefix) -> prices; the last field is the key in the source table.
PRICES: dict[str, Prices] = {
    "gpt-5": _entry(1.25, 10.0, 0.125, 0.625, 5.0, "gpt-5"),
    "gpt-5-mini": _entry(0.25, 2.0, 0.025, 0.125, 1.0, "gpt-5-mini"),
    "gpt-5-nano": _entry(0.05, 0.4, 0.005, 0.025, 0.2, "gpt-5-nano"),
    "gpt-5.1": _entry(1.25, 10.0, 0.125, 0.625, 5.0, "gpt-5.1"),
    "gpt-4.1": _entry(2.0, 8.0, 0.5, 1.0, 4.0, "gpt-4.1"),
    "gpt-4.1-mini": _entry(0.4, 1.6, 0.1, 0.2, 0.8, "gpt-4.1-mini"),
    "gpt-4.1-nano": _entry(0.1, 0.4, 0.025, 0.05, 0.2, "gpt-4.1-nano"),
    "gpt-4o": _entry(2.5, 10.0, 1.25, 1.25, 5.0, "gpt-4o"),
    "gpt-4o-mini": _entry(0.15, 0.6, 0.075, 0.075, 0.3, "gpt-4o-mini"),
    "o3": _entry(2.0, 8.0, 0.5, 1.0, 4.0, "o3"),
    "o4-mini": _entry(1.1, 4.4, 0.275, 0.55, 2.2, "o4-mini"),
    "claude-opus-4-5": _entry(5.0, 25.0, 0.5, 2.5, 12.5, "claude-opus-4-5"),
    "claude-sonnet-4-5": _entry(3.0, 15.0, 0.3, 1.5, 7.5, "claude-sonnet-4-5"),
    "claude-haiku-4-5": _entry(1.0, 5.0, 0.1, 0.5, 2.5, "claude-haiku-4-5"),
    "gemini-2.5-pro": _entry(1.25, 10.0, 0.125, 0.625, 5.0, "gemini/gemini-2.5-pro"),
    "gemini-2.5-flash": _entry(0.3, 2.5, 0.03, 0.15, 1.25, "gemini/gemini-2.5-flash"),
}


class PriceFileError(ValueError):
    """A price file that cannot be used; the message names the file, the line, the model and the field."""


def _bare(model: str) -> str:
    name = model.split(":", 1)[1] if ":" in model else model  # "llm:gpt-4.1-mini", "openai:gpt-4.1-mini"
    name = name.split("+", 1)[0]  # an aligned judge, "llm:gpt-4.1-mini+aligned-<hash12>": its model's price
    return name.strip().lower()


def lookup(model: str, table: dict[str, Prices] | None = None) -> Prices | None:
    """``table``'s (default: the built-in table's) prices for ``model``; a dated snapshot name such as
    ``gpt-4.1-mini-2025-04-14`` takes its base model's price."""
    table = PRICES if table is None else table
    name = _bare(model)
    if name in table:
        return table[name]
    best = max((k for k in table if name.startswith(k + "-")), key=len, default=None)
    if best is not None and name[len(best) + 1:][:4].isdigit():
        return table[best]
    return None


def _line_of(text: str, key: str) -> int | None:
    """The 1-based line where ``key`` first appears as a key of the file (quoted or not), if found."""
    for i, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith((f'"{key}"', f"'{key}'", f"{key}:")) or f'"{key}":' in stripped:
            return i
    return None


def _price(value: object, where: str, name: str, *, required: bool) -> float | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PriceFileError(f"{where}: field {name!r} must be a price in dollars per million tokens (a number"
                             f" >= 0), got {value!r}")
    return float(value)


def load_price_file(path: str | Path) -> dict[str, Prices]:
    """A user's price table: JSON or YAML, ``{model: {input, output[, cached_input, batch_input, batch_output,
    source]}}``, dollars per million tokens. Raises :class:`PriceFileError` naming the file, line, model and
    field of the first problem."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_PRICE_FILE_BYTES:
            raise PriceFileError(f"{p}: a price file is at most {MAX_PRICE_FILE_BYTES:,} bytes")
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceFileError(f"{p}: cannot read the price file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise PriceFileError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    data: Any
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PriceFileError(f"{p}, line {exc.lineno}: not valid JSON: {exc.msg}") from exc
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f", line {mark.line + 1}" if mark is not None else ""
            raise PriceFileError(f"{p}{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    if not isinstance(data, dict) or not data:
        raise PriceFileError(f"{p}: a price file is a mapping of model names to prices,"
                             ' e.g. {"gpt-4.1-mini": {"input": 0.4, "output": 1.6, "cached_input": 0.1}}')
    out: dict[str, Prices] = {}
    for model, fields in data.items():
        at = _line_of(text, str(model))
        where = f"{p}{f', line {at}' if at else ''}, model {model!r}"
        if not isinstance(model, str) or not model.strip():
            raise PriceFileError(f"{where}: a model name must be a non-empty string")
        if not isinstance(fields, dict):
            raise PriceFileError(f"{where}: the prices must be a mapping with 'input' and 'output', got {fields!r}")
        unknown = sorted(str(k) for k in fields if k not in PRICE_FIELDS)
        if unknown:
            raise PriceFileError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(PRICE_FIELDS)})")
        source = fields.get("source", f"price file {p}")
        if not isinstance(source, str):
            raise PriceFileError(f"{where}: field 'source' must be text, got {source!r}")
        prices: Any = {name: _price(fields.get(name), where, name, required=name in ("input", "output"))
                       for name in PRICE_FIELDS if name != "source"}
        out[_bare(model)] = Prices(**prices, source=f"{source} (from {p})" if "source" in fields else source)
    return out


def user_prices(path: str | Path | None = None) -> dict[str, Prices] | None:
    """The user's price table: ``path`` (``--prices``), else the file ``JUDGEGRAPH_PRICES`` names, else None."""
    chosen = path or os.environ.get(PRICES_ENV) or None
    return None if chosen is None else load_price_file(chosen)


def prices_for(model: str, price_in: float | None = None, price_out: float | None = None,
               table: dict[str, Prices] | None = None) -> Prices | None:
    """The prices for a judge model: the overrides where given, else the user's ``table``, else the built-in
    table; None when neither knows both."""
    entry = (lookup(model, table) if table else None) or lookup(model)
    if price_in is not None and price_out is not None:
        return Prices(price_in, price_out, "given on the command line")
    if entry is None:
        if price_in is None and price_out is None:
            return None
        return Prices(price_in or 0.0, price_out or 0.0, "given on the command line (the other price 0)")
    if price_in is None and price_out is None:
        return entry
    return replace(entry, input=entry.input if price_in is None else price_in,
                   output=entry.output if price_out is None else price_out,
                   cached_input=None if price_in is not None else entry.cached_input,
                   source=f"partly given on the command line, rest from {entry.source}")


def jury_prices(models: list[str], price_in: float | None = None, price_out: float | None = None,
                table: dict[str, Prices] | None = None) -> Prices | None:
    """A jury's prices (``models``: each juror's name, a repeat once per repeat). Every juror is asked every
    request, so the run's tokens are split evenly among them and each share is priced at its juror's own prices:
    the mean of their prices. Exact for the input tokens (each juror gets the same prompt) and for repeats of one
    model; the output tokens are assumed even among different models. None when a juror has no price."""
    found = [prices_for(m, price_in, price_out, table) for m in models]
    if not found or any(p is None for p in found):
        return None
    known = [p for p in found if p is not None]
    if len(set(known)) == 1:
        return known[0]
    n = len(known)
    names = ", ".join(dict.fromkeys(_bare(m) for m in models))
    return Prices(sum(p.input for p in known) / n, sum(p.output for p in known) / n,
                  f"a jury of {n} ({names}): each juror's share of the tokens at its own prices",
                  sum(p.input if p.cached_input is None else p.cached_input for p in known) / n)
