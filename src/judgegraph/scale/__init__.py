"""Judging at scale: worker processes on one machine, Ray actors on a cluster.

``evaluate(items, PlanSpec(metrics, judge={...}), workers=N)`` or ``ray=ADDRESS``;
the CLI's ``judgegraph eval --workers N`` / ``--ray [ADDRESS]``. See docs/scale.md.
Nothing here imports Ray unless a Ray run is asked for.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real types for type checkers; at run time each is imported on first use
    from .limits import split_budget
    from .ray_backend import RayPool
    from .run import aevaluate, evaluate, judge_pool
    from .spec import PlanSpec, auto_workers
    from .workers import WorkerPool

_EXPORTS = {
    "PlanSpec": "spec",
    "auto_workers": "spec",
    "split_budget": "limits",
    "WorkerPool": "workers",
    "RayPool": "ray_backend",
    "aevaluate": "run",
    "evaluate": "run",
    "judge_pool": "run",
}

__all__ = ["PlanSpec", "RayPool", "WorkerPool", "aevaluate", "auto_workers", "evaluate", "judge_pool",
           "split_budget"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'judgegraph.scale' has no attribute {name!r}")
