"""One global budget split across workers: each worker (a process or a Ray actor) gets a share of the run's
concurrency and rates; the shares add up to the total, so the bound holds with no service asked per call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``resolve_judge`` settings that are a budget of the whole run: integers split into integer shares (the first
#: workers get the remainder), rates evenly.
INT_BUDGETS = ("max_concurrency",)
RATE_BUDGETS = ("rpm", "tpm", "requests_per_minute", "tokens_per_minute")


class ScaleStartError(RuntimeError):
    """The workers or the cluster could not be started (no conversation was sent)."""


def split_int(total: int, n: int) -> list[int]:
    """``total`` as ``n`` integer shares differing by at most one, summing to ``total``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    base, extra = divmod(total, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def usable_workers(requested: int, judge_settings: Mapping[str, object]) -> int:
    """At most one worker per unit of concurrency: a worker with a share of 0 could make no call at all."""
    if requested < 1:
        raise ValueError(f"workers must be >= 1, got {requested}")
    concurrency = judge_settings.get("max_concurrency")
    return min(requested, concurrency) if isinstance(concurrency, int) and concurrency >= 1 else requested


def split_budget(judge_settings: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Per-worker judge settings: ``judge_settings`` with each budget replaced by that worker's share."""
    shares = [dict(judge_settings) for _ in range(n)]
    for key in (k for k in INT_BUDGETS if judge_settings.get(k) is not None):
        if (total := judge_settings[key]) < n:
            raise ValueError(f"{key}={total} cannot be shared by {n} workers (each needs at least 1)")
        for share, part in zip(shares, split_int(int(total), n)):
            share[key] = part
    for key in (k for k in RATE_BUDGETS if judge_settings.get(k) is not None):
        for share in shares:
            share[key] = judge_settings[key] / n
    return shares
