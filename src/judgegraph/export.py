"""A results file as a table: :func:`load_results` (Python) and ``judgegraph export`` (CSV, Parquet).

One row per conversation × metric (and, asked for, one per verdict), in input order (each
conversation line's ``position``; a file without positions keeps its own order). CSV needs
nothing more; ``to_pandas`` and Parquet need the ``export`` extra (``pip install
'judgegraph[export]'``: pandas and pyarrow).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .resultsfile import input_order, iter_records

if TYPE_CHECKING:
    import pandas

__all__ = ["EXPORT_MISSING", "ExportExtraMissing", "Results", "load_results"]

EXPORT_MISSING = "needs pandas and pyarrow: pip install 'judgegraph[export]'"

#: The columns of a result row, in order.
RESULT_COLUMNS = ("position", "conversation_id", "source", "metric", "status", "score", "threshold", "passed",
                  "judge", "judge_errors", "reason", "calls", "input_tokens", "output_tokens", "run_error")
#: A verdict's fields that are not columns (nested: transcripts, juror votes).
NESTED = frozenset({"transcript", "votes", "statements", "review"})


class ExportExtraMissing(ImportError):
    """pandas or pyarrow is not installed (the ``export`` extra)."""


@dataclass
class Results:
    """What a results file holds: its run ``header`` and last ``summary`` (None in an older file),
    the conversation records in input order, and the input errors."""

    path: str
    header: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    conversations: list[dict[str, Any]] = field(default_factory=list)
    input_errors: list[dict[str, Any]] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """One row per conversation × metric (a failed run with no result: one row, metric None)."""
        out = []
        for rec in self.conversations:
            base = {"position": rec.get("position"), "conversation_id": rec.get("conversation_id"),
                    "source": rec.get("source"), "run_error": rec.get("error")}
            results = rec.get("results") or {}
            if not results:
                out.append({c: base.get(c) for c in RESULT_COLUMNS} | {"status": "error" if rec.get("error") else None})
            for metric, r in results.items():
                usage = r.get("usage") or {}
                row = {**base, "metric": metric, "status": r.get("status"), "score": r.get("score"),
                       "threshold": r.get("threshold"), "passed": r.get("passed"), "judge": r.get("judge"),
                       "judge_errors": len(r.get("errors") or []), "reason": r.get("reason"),
                       "calls": usage.get("calls"), "input_tokens": usage.get("input_tokens"),
                       "output_tokens": usage.get("output_tokens")}
                out.append({c: row.get(c) for c in RESULT_COLUMNS})
        return out

    def verdict_rows(self) -> list[dict[str, Any]]:
        """One row per verdict: the conversation, the metric, the verdict's index and its flat fields."""
        out = []
        for rec in self.conversations:
            for metric, r in (rec.get("results") or {}).items():
                for i, verdict in enumerate(r.get("verdicts") or []):
                    flat = {k: v for k, v in verdict.items()
                            if k not in NESTED and (v is None or isinstance(v, (str, int, float, bool)))}
                    out.append({"position": rec.get("position"), "conversation_id": rec.get("conversation_id"),
                                "metric": metric, "verdict_index": i, **flat})
        return out

    def to_pandas(self, *, verdicts: bool = False) -> pandas.DataFrame:
        """The rows (or verdict rows) as a pandas DataFrame; :class:`ExportExtraMissing` without pandas."""
        try:
            import pandas as pd
        except ImportError:
            raise ExportExtraMissing(f"to_pandas {EXPORT_MISSING}") from None
        rows = self.verdict_rows() if verdicts else self.rows()
        return pd.DataFrame(rows, columns=_columns(rows, () if verdicts else RESULT_COLUMNS))

    def to_csv(self, path: str | Path, *, verdicts: bool = False) -> int:
        """Write the rows as CSV (UTF-8, a header row); the number of rows written."""
        rows = self.verdict_rows() if verdicts else self.rows()
        with Path(path).open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=_columns(rows, () if verdicts else RESULT_COLUMNS))
            writer.writeheader()
            writer.writerows(rows)
        return len(rows)

    def to_parquet(self, path: str | Path, *, verdicts: bool = False) -> int:
        """Write the rows as Parquet; :class:`ExportExtraMissing` without pandas and pyarrow."""
        try:
            import pyarrow  # noqa: F401 - pandas writes Parquet through it
        except ImportError:
            raise ExportExtraMissing(f"Parquet {EXPORT_MISSING}") from None
        frame = self.to_pandas(verdicts=verdicts)
        frame.to_parquet(path, index=False)
        return len(frame)


def _columns(rows: Iterable[dict[str, Any]], first: Iterable[str]) -> list[str]:
    cols = list(first)
    for row in rows:
        cols.extend(k for k in row if k not in cols)
    return cols


def load_results(path: str | Path) -> Results:
    """Read a results file (``judgegraph eval --out``): header, last summary, conversations in input
    order, input errors. Unreadable lines are passed over (``judgegraph report`` names them)."""
    out = Results(str(path))
    conversations: list[dict[str, Any]] = []
    for _, record in iter_records(path):
        kind = record.get("type")
        if kind == "header" and out.header is None and not conversations:
            out.header = record
        elif kind == "summary":
            out.summary = record
        elif kind == "conversation" and isinstance(record.get("conversation_id"), str):
            if not isinstance(record.get("results"), dict):
                record["results"] = {}
            record["results"] = {k: v for k, v in record["results"].items() if isinstance(v, dict)}
            conversations.append(record)
        elif kind == "input_error":
            out.input_errors.append(record)
    out.conversations = input_order(conversations)
    return out
