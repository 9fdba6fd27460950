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
    """``MetricPlan(metrics, resolve_judge(**judge), overrides, per_metric)``, as data.

    ``judge`` holds :func:`judgegraph.judges.resolve_judge` keyword arguments:
    ``model`` must be a string (``"openai:gpt-4.1-mini"``), a list of them (a jury) or None
    (the offline judge); ``max_concurrency`` (and ``rpm`` / ``tpm`` when the judge takes
    them) is the budget of the WHOLE run, split across workers.
    """

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


#: ``--workers auto`` starts processes only for inputs of at least this many
#: bytes (~100 conversations of 10 exchanges): a worker takes 1-3 s to start
#: (imports), which a short run does not win back.
AUTO_MIN_INPUT_BYTES = 256 * 1024


def auto_workers(kind: str = "llm", cpus: int | None = None) -> int:
    """The default number of worker processes (for runs of at least
    :data:`AUTO_MIN_INPUT_BYTES` of input), measured on a 2-core machine
    (docs/scale.md). An LLM judge: one per core, up to 4 (each event loop is
    bound by one core of client CPU, ~4 ms per call). The offline judge: 1 (its
    batched encoder judged ~100 windows/s in one process and 0.87x that with 2
    workers, each loading the model)."""
    if kind == "offline":
        return 1
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(cpus, 4))
