"""A results file as a table: :func:`load_results` (Python) and ``judgegraph export`` (CSV, Parquet).

One row per conversation × metric (and, asked for, one per verdict), in input order (each conversation line's
``position``; a file without positions keeps its own order). CSV needs nothing more; ``to_pandas`` and Parquet need
the ``export`` extra (``pip install 'judgegraph[export]'``: pandas and pyarrow).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..runs import ConversationLine, HeaderLine, InputErrorLine, RunFile, SummaryLine, UsageLine, read_run

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
    """A results file as a table: its :class:`~judgegraph.runs.RunFile` (``header`` and last ``summary``, None in
    an older file; ``conversations`` in input order; ``input_errors``)."""

    run: RunFile
    path: str
    header: HeaderLine | None
    summary: SummaryLine | None
    input_errors: list[InputErrorLine]
    conversations: list[ConversationLine]

    def rows(self) -> list[dict[str, object]]:
        """One row per conversation × metric (a failed run with no result: one row, metric None)."""
        out = []
        for rec in self.conversations:
            base = {"position": rec.position, "conversation_id": rec.conversation_id, "source": rec.source,
                    "run_error": rec.error}
            if not rec.results:
                out.append({c: base.get(c) for c in RESULT_COLUMNS} | {"status": "error" if rec.error else None})
            for metric, r in rec.results.items():
                usage = r.usage or UsageLine()
                row = {**base, "metric": metric, "status": r.status, "score": r.score, "threshold": r.threshold,
                       "passed": r.passed, "judge": r.judge, "judge_errors": len(r.errors), "reason": r.reason,
                       "calls": usage.calls, "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
                out.append({c: row.get(c) for c in RESULT_COLUMNS})
        return out

    def verdict_rows(self) -> list[dict[str, object]]:
        """One row per verdict: the conversation, the metric, the verdict's index and its flat fields."""
        out = []
        for rec in self.conversations:
            for metric, r in rec.results.items():
                for i, verdict in enumerate(r.verdicts):
                    flat = {k: v for k, v in verdict.data().items()
                            if k not in NESTED and (v is None or isinstance(v, (str, int, float, bool)))}
                    out.append({"position": rec.position, "conversation_id": rec.conversation_id,
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

    def to_csv(self, path: str | Path | IO[str], *, verdicts: bool = False) -> int:
        """Write the rows as CSV (UTF-8, a header row) to the file ``path`` (or an open text stream); the number
        of rows written."""
        rows = self.verdict_rows() if verdicts else self.rows()
        with (Path(path).open("w", encoding="utf-8", newline="") if isinstance(path, (str, Path))
              else nullcontext(path)) as fh:
            writer = csv.DictWriter(fh, fieldnames=_columns(rows, () if verdicts else RESULT_COLUMNS))
            writer.writeheader()
            writer.writerows(rows)
        return len(rows)

    def to_parquet(self, path: str | Path | IO[bytes], *, verdicts: bool = False) -> int:
        """Write the rows as Parquet; :class:`ExportExtraMissing` without pandas and pyarrow."""
        try:
            import pyarrow  # noqa: F401 - pandas writes Parquet through it
        except ImportError:
            raise ExportExtraMissing(f"Parquet {EXPORT_MISSING}") from None
        frame = self.to_pandas(verdicts=verdicts)
        frame.to_parquet(path, index=False)
        return len(frame)


def _columns(rows: Iterable[dict[str, object]], first: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*first, *(k for row in rows for k in row)]))


def load_results(path: str | Path) -> Results:
    """Read a results file (``judgegraph eval --out``) with :func:`judgegraph.runs.read_run`: header, last
    summary, conversations in input order, input errors (:class:`~judgegraph.runs.NotAResultsFile` when it is
    not one). Unreadable lines are left out (``judgegraph report`` names them; ``Results.run.problems``)."""
    run = read_run(path)
    return Results(run, run.path, run.header, run.summary, run.input_errors, run.in_input_order())
