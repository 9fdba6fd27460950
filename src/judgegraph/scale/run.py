"""The scaled run: the same runner in this process, each conversation judged by a worker process or a Ray actor."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..loaders import InputError, LoadedConversation
from ..runs.runner import ConversationOutcome, JudgeOne, RunSummary, evaluate_async
from .spec import PlanSpec

if TYPE_CHECKING:
    from .ray_backend import RayPool
    from .workers import WorkerPool


@asynccontextmanager
async def judge_pool(spec: PlanSpec, *, workers: int | None = None,
                     ray: str | bool | None = None) -> AsyncIterator[JudgeOne | None]:
    """A runner's ``judge_one=``: a pool of ``workers`` processes, or of Ray actors with ``ray`` (True: the cluster
    ``ray.init()`` finds; a string: its address); None (here) for one local worker. The pool stops with the block."""
    if not ray and (workers or 1) == 1:
        yield None
        return
    pool: RayPool | WorkerPool
    if ray:
        from .ray_backend import RayPool

        pool = RayPool(spec, address=None if ray is True else str(ray), workers=workers)
    else:
        from .workers import WorkerPool

        pool = WorkerPool(spec, workers=workers or 1)
    async with pool:
        yield pool.judge


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
    """Judge ``items`` with the plan ``spec`` describes on ``workers`` processes or Ray (:func:`judge_pool`), its
    budget the whole run's; ``run_options`` go to :func:`judgegraph.runs.runner.evaluate_async`."""
    plan = spec.build()  # in the parent too: names the judge, and a bad setting fails before any worker starts
    plan.check()
    concurrency = int(spec.judge.get("max_concurrency") or 16)
    async with judge_pool(spec, workers=workers, ray=ray) as judge_one:
        return await evaluate_async(items, plan, judge_one=judge_one, on_outcome=on_outcome,
                                    on_input_error=on_input_error,
                                    max_conversations=max_conversations or max(4, concurrency * 2), **run_options)


def evaluate(items: Iterable[LoadedConversation | InputError], spec: PlanSpec, **options: Any) -> RunSummary:
    """:func:`aevaluate` from synchronous code (not inside a running event loop)."""
    return asyncio.run(aevaluate(items, spec, **options))
