"""Judging at scale: worker processes on one machine, Ray actors on a cluster.

``evaluate(items, PlanSpec(metrics, judge={...}), workers=N)`` or ``ray=ADDRESS``;
the CLI's ``judgegraph eval --workers N`` / ``--ray [ADDRESS]``. See docs/scale.md.
Nothing here imports Ray unless a Ray run is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the real types for type checkers; at run time each is imported on first use
    from .limits import split_budget
    from .ray_backend import RayPool
    from .run import aevaluate, evaluate, judge_pool
    from .spec import PlanSpec, auto_workers
    from .workers import WorkerPool

_EXPORTS, __getattr__ = lazy_exports(__name__, {
    "spec": ("PlanSpec", "auto_workers"),
    "limits": ("split_budget",),
    "workers": ("WorkerPool",),
    "ray_backend": ("RayPool",),
    "run": ("aevaluate", "evaluate", "judge_pool"),
})
__all__ = ["PlanSpec", "RayPool", "WorkerPool", "aevaluate", "auto_workers", "evaluate", "judge_pool",
           "split_budget"]
