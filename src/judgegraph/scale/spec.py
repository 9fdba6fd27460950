"""What a worker needs to rebuild the run's metric plan in its own process:
settings, never live objects (a chat model holds HTTP clients and locks that
do not cross a process boundary; the offline model loads once per worker)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .limits import split_budget, usable_workers

if TYPE_CHECKING:
    from ..runs.runner import MetricPlan


@dataclass(frozen=True)
class PlanSpec:
    """``MetricPlan(metrics, resolve_judge(**judge), overrides, per_metric)``, as data. ``judge``'s ``model`` is a
    string, a list of them (a jury) or None (offline); its ``max_concurrency`` and rates are the WHOLE run's budget."""

    metrics: list[str] | None = None
    # Any: keyword arguments of several types, spread into resolve_judge(**) and MetricPlan's options
    judge: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    per_metric: dict[str, dict[str, Any]] = field(default_factory=dict)  # MetricPlan's options of one metric

    def __post_init__(self) -> None:
        model = self.judge.get("model")
        if model is not None and not isinstance(model, str) and not (  # a list of strings: a jury
                isinstance(model, list) and all(isinstance(m, str) for m in model)):
            raise TypeError(
                "worker processes rebuild the judge from its settings: pass model as a string such as "
                f"'openai:gpt-4.1-mini' (with base_url=... for other servers), not a {type(model).__name__} object"
            )
        if "judge" in self.judge:
            raise TypeError("worker processes rebuild the judge from its settings: pass model=..., not judge=...")

    @property
    def kind(self) -> str:
        """``"llm"`` or ``"offline"``, without building anything."""
        return "offline" if self.judge.get("model") is None else "llm"

    def build(self) -> MetricPlan:
        """The :class:`~judgegraph.runs.runner.MetricPlan` these settings describe."""
        from ..judges import resolve_judge
        from ..runs.runner import MetricPlan

        return MetricPlan(self.metrics, resolve_judge(**self.judge), self.overrides, self.per_metric)

    def shares(self, workers: int) -> list[PlanSpec]:
        """One spec per worker, each with its share of the run's budget."""
        n = usable_workers(workers, self.judge)
        return [replace(self, judge=share) for share in split_budget(self.judge, n)]


#: ``--workers auto`` starts processes only for inputs of at least this many bytes (~100 conversations of 10
#: exchanges): a worker takes 1-3 s to start, which a short run does not win back.
AUTO_MIN_INPUT_BYTES = 256 * 1024


def auto_workers(kind: str = "llm", cpus: int | None = None) -> int:
    """The default number of worker processes (measured on 2 cores, docs/scale.md): for an LLM judge one per core,
    up to 4 (each event loop is bound by one core of client CPU); for the offline judge 1 (2 workers were slower)."""
    return 1 if kind == "offline" else max(1, min(cpus or os.cpu_count() or 1, 4))
