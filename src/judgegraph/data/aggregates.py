"""How a jury's answers make one (``--aggregate``): the names alone, importable without the judges
(the command line lists them without loading pydantic or LangChain; judges/verdicts.py combines by them)."""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

Aggregate: TypeAlias = Literal["majority", "mean", "unanimous", "any"]
#: The aggregation modes (``--aggregate``).
AGGREGATES: tuple[str, ...] = get_args(Aggregate)
