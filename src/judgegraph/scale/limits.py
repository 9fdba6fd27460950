"""One global budget split across workers.

Every worker (a process or a Ray actor) gets a share of the run's judge-call
budget: concurrency (calls in flight) and, when the judge has them, request
and token rates. The shares add up to the total, so the sum over all workers
can never exceed it, whatever the scheduling; work is dispatched dynamically
(to the worker with the fewest conversations in flight), so no share sits idle
while conversations wait. No service is asked per call: the bound costs nothing
on the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``resolve_judge`` settings that are a budget of the whole run, split across
#: workers. Integers are split into integer shares (the first workers get the
#: remainder); rates are split evenly.
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
    """At most one worker per unit of concurrency: a worker with a share of 0
    could make no call at all."""
    if requested < 1:
        raise ValueError(f"workers must be >= 1, got {requested}")
    concurrency = judge_settings.get("max_concurrency")
    return min(requested, concurrency) if isinstance(concurrency, int) and concurrency >= 1 else requested


def split_budget(judge_settings: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Per-worker judge settings: ``judge_settings`` with each budget replaced
    by that worker's share. Other settings are copied unchanged."""
    shares = [dict(judge_settings) for _ in range(n)]
    for key in INT_BUDGETS:
        total = judge_settings.get(key)
        if total is None:
            continue
        if total < n:
            raise ValueError(f"{key}={total} cannot be shared by {n} workers (each needs at least 1)")
        for share, part in zip(shares, split_int(int(total), n)):
            share[key] = part
    for key in RATE_BUDGETS:
        total = judge_settings.get(key)
        if total is not None:
            for share in shares:
                share[key] = total / n
    return shares
