"""Judging through a provider's batch API (OpenAI's Batch API): half price, answers within 24 h
(``judgegraph eval --batch``; docs/batch.md)."""

from __future__ import annotations

from .client import BatchClient, BatchState, NoBatchAPI
from .run import DEFAULT_MAX_ROUNDS, DEFAULT_POLL_S, BatchSummary, batch_client, batch_judges, evaluate_batch_to_file

__all__ = ["DEFAULT_MAX_ROUNDS", "DEFAULT_POLL_S", "BatchClient", "BatchState", "BatchSummary", "NoBatchAPI",
           "batch_client", "batch_judges", "evaluate_batch_to_file"]
