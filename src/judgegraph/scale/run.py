"""The scaled run: the same ``runner.evaluate_async`` (input, resume, writer and
summary in this process), with each conversation judged by a worker process or
a Ray actor instead of in this event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from ..loaders import InputError, LoadedConversation
from ..runner import ConversationOutcome, RunSummary, evaluate_async
from .spec import PlanSpec


async def aevaluate(
    items: Iterable[LoadedConversation | InputError],
    spec: PlanSpec,
    *,
    workers: int | None = None,
    ray: str | bool | None = None,
    max_conversations: int | None = None,
    on_outcome: Callable[[ConversationOutcome], None] | None = None,
    on_input_error: Callable[[InputError], None] | None = None,
    **run_options: Any,
) -> RunSummary:
    """Judge ``items`` with the plan ``spec`` describes.

    No ``workers`` (or 1) and no ``ray``: in this process. ``workers=N``: N
    worker processes on this machine. ``ray=True`` (a running cluster, found as
    ``ray.init()`` finds it) or ``ray="HOST:PORT"``: Ray actors on the cluster's
    nodes, ``workers`` of them (default: one per CPU of the cluster). The
    judge budget in ``spec`` (``max_concurrency``, rates) is the total of the
    whole run. ``run_options`` go to :func:`judgegraph.runner.evaluate_async`.
    """
    plan = spec.build()  # in the parent too: names the judge, and a bad setting fails before any worker starts
    plan.check()
    concurrency = int(spec.judge.get("max_concurrency") or 16)
    max_conversations = max_conversations or max(4, concurrency * 2)
    kwargs = dict(max_conversations=max_conversations, on_outcome=on_outcome, on_input_error=on_input_error,
                  **run_options)
    if not ray and (workers or 1) == 1:
        return await evaluate_async(items, plan, **kwargs)
    pool: Any
    if ray:
        from .ray_backend import RayPool

        pool = RayPool(spec, address=None if ray is True else str(ray), workers=workers)
    else:
        from .workers import WorkerPool

        pool = WorkerPool(spec, workers=workers or 1)
    async with pool:
        return await evaluate_async(items, plan, judge_one=pool.judge, **kwargs)


def evaluate(items: Iterable[LoadedConversation | InputError], spec: PlanSpec, **options: Any) -> RunSummary:
    """:func:`aevaluate` from synchronous code (not inside a running event loop)."""
    return asyncio.run(aevaluate(items, spec, **options))
