"""Simulated conversations: a simulated user (an LLM with a persona, a goal and a scenario) talks to your chatbot
until the goal is reached, the user gives up, or a turn limit; then the conversation is judged. The simulator is a
LangGraph graph (:func:`create_simulator`; an example: docs/apps.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import Required, TypedDict, Unpack

from ...data.conversation import Conversation
from ...data.results import MetricResult, Usage
from ...judges import ModelLike
from ..metrics import MetricLike
from .app import AppLike
from .graph import SimulationState, build_simulator, conversation_of, create_simulator
from .personas import BUILT_IN, Persona, PersonaStage
from .scenarios import Scenario, ScenarioError, as_scenarios, load_scenarios

__all__ = [
    "BUILT_IN", "Persona", "PersonaStage", "Scenario", "ScenarioError", "SimulationResult", "asimulate",
    "build_simulator", "create_simulator", "load_scenarios", "simulate",
]


class SimulationResult(BaseModel):
    """One simulated conversation and its judgements."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scenario: Scenario
    conversation: Conversation | None
    status: str  # goal_reached, gave_up, max_turns, app_error, user_error, or error (the simulation itself failed)
    turns: int = 0  # user messages sent
    results: dict[str, MetricResult] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)
    user_usage: Usage = Field(default_factory=Usage)
    stages: list[PersonaStage] = Field(default_factory=list)  # an escalating persona's stage per user message

    @property
    def stage(self) -> PersonaStage | None:
        """The stage the escalating persona reached (its last user message), else None."""
        return self.stages[-1] if self.stages else None

    @property
    def error(self) -> str | None:
        """Why the conversation ended early (app or simulated-user failure), else None."""
        return "; ".join(self.errors) or None

    def to_record(self, source: str = "simulate") -> dict[str, object]:
        """A results-JSONL line (the ``judgegraph eval`` shape) carrying the simulated conversation and how the
        simulation went."""
        simulation: dict[str, object] = {
            "status": self.status, "turns": self.turns, "user_usage": self.user_usage.model_dump(),
            "scenario": self.scenario.model_dump(mode="json", exclude_defaults=True)}
        if self.stages:
            simulation["stages"] = [s.model_dump() for s in self.stages]
        return {
            "type": "conversation",
            "conversation_id": self.scenario.id,
            "source": source,
            "results": {k: v.model_dump(mode="json") for k, v in self.results.items()},
            "error": self.error,
            "simulation": simulation,
            "conversation": None if self.conversation is None else self.conversation.model_dump(mode="json"),
        }


def _result(scenario: Scenario, out: Any) -> SimulationResult:
    if isinstance(out, BaseException):
        return SimulationResult(scenario=scenario, conversation=None, status="error",
                                errors=[f"simulation: {type(out).__name__}: {out}"])
    state: SimulationState = {**out, "scenario": scenario}
    conversation = conversation_of(state) if state.get("messages") else None
    return SimulationResult(scenario=scenario, conversation=conversation, status=out.get("status", "error"),
                            turns=out.get("turns", 0), results=out.get("results") or {},
                            errors=list(out.get("errors") or []), user_usage=out.get("user_usage") or Usage(),
                            stages=list(out.get("stages") or []))


class SimulateOptions(TypedDict, total=False):
    """What :func:`simulate` and :func:`asimulate` take (one definition for both)."""

    user_model: Required[ModelLike]  # the LLM playing the user
    metrics: MetricLike | Sequence[MetricLike] | None  # judge each conversation (names built with ``model``)
    model: ModelLike  # the judge for metric names (default: the offline judge)
    max_turns: int  # user messages per conversation at most (default 6)
    max_concurrency: int  # scenarios at a time (default 8)


Scenarios = Scenario | dict[str, Any] | Sequence[Scenario | dict[str, Any]]


def check_options(options: SimulateOptions, caller: str) -> None:
    """A ``TypeError`` for an option :class:`SimulateOptions` does not name (with the nearest one), or no
    ``user_model``: a misspelt option must not run with its default."""
    from ...loaders.base import unknown_key

    known = list(SimulateOptions.__annotations__)
    for key in options:
        if key not in known:
            raise TypeError(f"{caller}(): {unknown_key(key, known)}")
    if "user_model" not in options:
        raise TypeError(f"{caller}() needs user_model=: the chat model playing the user (a chat model, or a"
                        " 'provider:model' string such as 'openai:gpt-4.1-mini')")


def _plan(app: AppLike, scenarios: Scenarios, options: SimulateOptions, caller: str,
          ) -> tuple[Any, list[Scenario], list[dict[str, Any]]]:
    """The simulator graph, the scenarios, and one run config each."""
    check_options(options, caller)
    max_turns = options.get("max_turns", 6)
    graph = create_simulator(app, user_model=options["user_model"], metrics=options.get("metrics"),
                             model=options.get("model"), max_turns=max_turns)
    items = as_scenarios(scenarios)
    recursion = 3 * max([max_turns, *(s.max_turns or 0 for s in items)]) + 10  # three steps a user turn, plus the ends
    configs = [{"max_concurrency": options.get("max_concurrency", 8), "recursion_limit": recursion,
                "configurable": {"thread_id": s.id}} for s in items]
    return graph, items, configs


def simulate(app: AppLike, scenarios: Scenarios, **options: Unpack[SimulateOptions]) -> list[SimulationResult]:
    """Simulate one conversation per scenario with ``app`` (a graph, Runnable or callable over messages),
    ``max_concurrency`` at a time, each judged with ``metrics``. A failed scenario keeps its messages, is still
    judged and says why in ``errors``; results in input order."""
    graph, items, configs = _plan(app, scenarios, options, "simulate")
    outs = graph.batch([{"scenario": s} for s in items], configs, return_exceptions=True)
    return [_result(s, o) for s, o in zip(items, outs)]


async def asimulate(app: AppLike, scenarios: Scenarios, **options: Unpack[SimulateOptions]) -> list[SimulationResult]:
    """:func:`simulate` under asyncio (the same graph, run with ``abatch``)."""
    graph, items, configs = _plan(app, scenarios, options, "asimulate")
    outs = await graph.abatch([{"scenario": s} for s in items], configs, return_exceptions=True)
    return [_result(s, o) for s, o in zip(items, outs)]
