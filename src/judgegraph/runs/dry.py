"""How a dry run (``judgegraph eval --dry-run``) answers each conversation."""

from __future__ import annotations

from typing import Any

from ..core.nodes import DeclaredGraph, WindowSteps
from ..cost.dryrun import window_steps
from .runner import ConversationOutcome, judge_conversation


class DryRunConversations:
    """How a dry run answers each conversation (``evaluate_async``'s ``judge_one``): each metric of the window
    shape by its own nodes, called in turn (:func:`judgegraph.cost.dryrun.window_steps`: the requests the graph makes, without its
    run), each other metric by its graph, as the run does."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self._metrics: dict[int, list[tuple[Any, WindowSteps | None]]] = {}

    def metrics(self, run: Any) -> list[tuple[Any, WindowSteps | None]]:
        """The metric graphs of ``run`` (itself, or those a report declares), each with its steps."""
        found = self._metrics.get(id(run))
        if found is None:
            from ..report import ReportMetrics

            builder = getattr(run, "builder", None)
            held = builder.declared if isinstance(builder, DeclaredGraph) else None
            graphs = list(held.metrics) if isinstance(held, ReportMetrics) else [run]
            found = self._metrics[id(run)] = [(g, window_steps(g)) for g in graphs]
        return found

    async def __call__(self, item: Any) -> Any:
        run = self.plan.graph_for(item)
        metrics = self.metrics(run)
        if all(steps is None for _, steps in metrics):
            return await judge_conversation(item, self.plan)  # today's path, whole
        outcome = ConversationOutcome(item.conversation.id, item.source)
        try:
            for graph, steps in metrics:
                if steps is not None:
                    steps.run(item.conversation)
                else:
                    await graph.ainvoke({"conversation": item.conversation})
        except Exception as exc:  # noqa: BLE001 - one conversation's failure is reported, the run goes on
            outcome.error = f"{type(exc).__name__}: {exc}"
        return outcome
