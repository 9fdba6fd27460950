"""The conversation simulator as a LangGraph graph:

    START → simulate_user ─continue→ call_app → check_stop ─go on→ simulate_user …
                 └─goal reached / gave up / error─┐   └─turn limit / app error─┐
                                                  └──→ judge_conversation → END   (with metrics)

The nodes and the state: docs/apps.md.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, Literal, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict

from ...core.nodes import render_messages
from ...core.state import MetricInput, MetricOutput
from ...data.conversation import Conversation, from_messages
from ...data.results import MetricResult, Usage, merge_results
from ...judges import Judge, JudgeOutcome, JudgeRequest, ModelLike, resolve_judge
from ...metrics import MetricSpec
from ..metrics import MetricLike, judge_graph
from .app import AppLike, as_app, new_messages
from .personas import Persona, PersonaStage
from .scenarios import Scenario

USER_STEP = "simulated_user/simulate_user"
ADVERSARY_STEP = "simulated_user/adversarial_user"  # a scenario with an escalating persona (personas.py)
STOPPED = ("goal_reached", "gave_up", "max_turns", "app_error", "user_error")


class UserTurn(BaseModel):
    """The simulated user's next step. The reason comes first."""

    reason: str = Field(description="How far the goal is from being reached, in one sentence.")
    status: Literal["continue", "goal_reached", "gave_up"] = Field(
        description="'continue' to keep trying, 'goal_reached' when the chatbot did what the user wanted, "
                    "'gave_up' when this user would stop here.")
    message: str = Field(default="", description="What the user types next (a closing message when stopping).")


class SimulationInput(TypedDict):
    scenario: Scenario | dict[str, Any]
    messages: NotRequired[list[AnyMessage]]  # an earlier history to continue from


class SimulationState(TypedDict, total=False):
    scenario: Scenario | dict[str, Any]
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int
    status: str
    errors: Annotated[list[str], operator.add]
    user_usage: Annotated[Usage, operator.add]
    results: Annotated[dict[str, MetricResult], merge_results]
    stage: int  # an escalating persona's stage (1-based) for the latest user message
    stages: Annotated[list[PersonaStage], operator.add]  # the stage of each user message written under it


def scenario_of(state: SimulationState) -> Scenario:
    return Scenario.model_validate(state["scenario"])  # a Scenario is returned as it is


def conversation_of(state: SimulationState) -> Conversation:
    """The simulated conversation, with the scenario's goal as its expected outcome and its ``metadata`` (where a
    metric may read per-conversation inputs, e.g. ``reference_topics``)."""
    s = scenario_of(state)
    return from_messages(state.get("messages") or [], id=s.id, expected_outcome=s.expected_outcome or s.goal,
                         chatbot_role=s.chatbot_role, metadata=dict(s.metadata))


def _seen_by_user(messages: Sequence[BaseMessage]) -> str:
    pairs = [("you" if m.type == "human" else "chatbot", m.text) for m in messages if m.type in ("human", "ai")]
    return render_messages([(r, c) for r, c in pairs if c], empty="(none yet: you write the first message)")


def persona_stage(persona: Persona, turn: int) -> PersonaStage:
    """The stage user message ``turn`` (1-based) is written at."""
    index = persona.stage_at(turn)
    return PersonaStage(turn=turn, stage=index + 1, of=len(persona.stages), step=persona.stages[index])


def user_request(scenario: Scenario, messages: Sequence[BaseMessage], turns_left: int, turn: int = 1) -> JudgeRequest:
    """The simulated user's call for user message ``turn`` (1-based): the plain prompt, or the adversarial one with
    the persona's stage for that turn."""
    persona = scenario.adversary
    common = {"goal": scenario.goal, "scenario": scenario.scenario or "(nothing more)",
              "conversation": _seen_by_user(messages), "turns_left": str(turns_left)}
    if persona is None:
        return JudgeRequest(task="simulate_user", step=USER_STEP, schema=UserTurn,
                            values={"persona": str(scenario.persona), **common})
    stage = persona_stage(persona, turn)
    return JudgeRequest(task="simulate_user", step=ADVERSARY_STEP, schema=UserTurn, values={
        "persona": persona.who(), "objective": persona.objective_for(scenario.goal), "stage": stage.step,
        "stage_number": f"{stage.stage} of {stage.of}", **common,
    })


def _staged(scenario: Scenario, turn: int, update: SimulationState) -> SimulationState:
    """``update`` with the persona's stage when it adds user message ``turn``."""
    persona = scenario.adversary
    if persona is None or "messages" not in update:
        return update
    stage = persona_stage(persona, turn)
    return {**update, "stage": stage.stage, "stages": [stage]}


def build_simulator(
    app: AppLike, *, user: Judge, max_turns: int = 6, metrics: Runnable[Any, Any] | None = None
) -> StateGraph:
    """The uncompiled simulator graph (``user`` is the simulated user's model as a Judge)."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    runnable, takes_state = as_app(app)

    def limit(state: SimulationState) -> int:
        return scenario_of(state).max_turns or max_turns

    def user_update(state: SimulationState, outcome: JudgeOutcome | None) -> SimulationState:
        turns = state.get("turns", 0)
        scenario = scenario_of(state)
        if outcome is None:  # the scenario's opening line
            return _staged(scenario, turns + 1, {"messages": [HumanMessage(scenario.opening or "")],
                                                 "turns": turns + 1, "status": "running"})
        return _staged(scenario, turns + 1, turn_update(state, outcome))

    def turn_update(state: SimulationState, outcome: JudgeOutcome) -> SimulationState:
        turns = state.get("turns", 0)
        update: SimulationState = {"user_usage": outcome.usage}
        if not outcome.ok:
            return {**update, "status": "user_error", "errors": [f"simulated user: {outcome.error}"]}
        turn: UserTurn = outcome.value  # type: ignore[assignment]
        message = turn.message.strip()
        if turn.status == "continue" and not message:
            return {**update, "status": "user_error", "errors": ["simulated user: 'continue' with an empty message"]}
        if message:
            update["messages"] = [HumanMessage(message)]
        if turn.status == "continue":
            return {**update, "turns": turns + 1, "status": "running"}
        return {**update, "status": turn.status}

    def request(state: SimulationState) -> JudgeRequest | None:
        if state.get("turns", 0) == 0 and scenario_of(state).opening:
            return None
        turns = state.get("turns", 0)
        return user_request(scenario_of(state), state.get("messages") or [], limit(state) - turns, turns + 1)

    def simulate_user(state: SimulationState) -> SimulationState:
        req = request(state)
        return user_update(state, None if req is None else user.run(req))

    async def asimulate_user(state: SimulationState) -> SimulationState:
        req = request(state)
        return user_update(state, None if req is None else await user.arun(req))

    def app_call(state: SimulationState) -> tuple[Any, RunnableConfig, list[BaseMessage]]:
        """The app's input, its config (a thread of its own per scenario) and the messages sent."""
        sent: list[BaseMessage] = list(state.get("messages") or [])
        config: RunnableConfig = {"configurable": {"thread_id": f"simulate-{scenario_of(state).id}"}}
        return ({"messages": sent} if takes_state else sent), config, sent

    def app_update(sent: list[BaseMessage], out: Any) -> SimulationState:
        try:
            reply = cast("list[AnyMessage]", new_messages(sent, out))  # add_messages takes any BaseMessage
        except (TypeError, ValueError) as exc:
            return {"status": "app_error", "errors": [f"app: {exc}"]}
        if not any(isinstance(m, AIMessage) for m in reply):
            return {"messages": reply, "status": "app_error", "errors": ["app: no assistant message in the reply"]}
        return {"messages": reply}

    def call_app(state: SimulationState) -> SimulationState:
        inp, config, sent = app_call(state)
        try:
            out = runnable.invoke(inp, config)
        except Exception as exc:  # noqa: BLE001 - the app's failure ends this conversation, reported
            return {"status": "app_error", "errors": [f"app: {type(exc).__name__}: {exc}"]}
        return app_update(sent, out)

    async def acall_app(state: SimulationState) -> SimulationState:
        inp, config, sent = app_call(state)
        try:
            out = await runnable.ainvoke(inp, config)
        except Exception as exc:  # noqa: BLE001
            return {"status": "app_error", "errors": [f"app: {type(exc).__name__}: {exc}"]}
        return app_update(sent, out)

    def check_stop(state: SimulationState) -> SimulationState:
        at_limit = state.get("status") not in STOPPED and state.get("turns", 0) >= limit(state)
        return {"status": "max_turns"} if at_limit else {}

    finish = "judge_conversation" if metrics is not None else END

    def after_user(state: SimulationState) -> str:
        return "call_app" if state.get("status") == "running" else finish

    def after_check(state: SimulationState) -> str:
        return finish if state.get("status") in STOPPED else "simulate_user"

    builder = StateGraph(SimulationState, input_schema=SimulationInput)
    builder.add_node("simulate_user", RunnableLambda(simulate_user, afunc=asimulate_user, name="simulate_user"))
    builder.add_node("call_app", RunnableLambda(call_app, afunc=acall_app, name="call_app"))
    builder.add_node("check_stop", check_stop)
    builder.add_edge(START, "simulate_user")
    builder.add_conditional_edges("simulate_user", after_user, ["call_app", finish])
    builder.add_edge("call_app", "check_stop")
    builder.add_conditional_edges("check_stop", after_check, ["simulate_user", finish])
    if metrics is not None:  # one chain: the same path under invoke and ainvoke
        builder.add_node("judge_conversation", RunnableLambda(_judge_input) | metrics | _results)
        builder.add_edge("judge_conversation", END)
    return builder


def _judge_input(state: SimulationState) -> MetricInput:
    return {"conversation": conversation_of(state)}


def _results(out: MetricOutput) -> SimulationState:
    return {"results": out["results"]}


def user_judge(user_model: ModelLike, *, judge: Judge | None = None, max_tries: int = 3, **model_kwargs: Any) -> Judge:
    """The simulated user's model as a Judge sharing the metrics judge's limiter; never cached, so repeated
    scenarios may differ."""
    if isinstance(user_model, Judge):
        return user_model
    if user_model is None:
        raise ValueError("simulate needs user_model: the LLM that plays the user (a chat model or 'provider:model')")
    made = resolve_judge(model=user_model, max_tries=max_tries, cache=False, **model_kwargs)
    limiter = getattr(judge, "limiter", None)
    if limiter is not None and hasattr(made, "limiter"):
        made.limiter = limiter
    return made


def create_simulator(
    app: AppLike, *, user_model: ModelLike, metrics: MetricLike | Sequence[MetricLike] | None = None,
    model: ModelLike = None, max_turns: int = 6,
) -> CompiledStateGraph:
    """The compiled simulator for ``app``: ``invoke({"scenario": {...}})``.

    ``user_model`` plays the user; ``metrics`` (names built with ``model``, the judge, or compiled graphs) judge
    each finished conversation in the same run."""
    names = [metrics] if isinstance(metrics, (str, MetricSpec, CompiledStateGraph)) else list(metrics or [])
    judge = resolve_judge(model) if any(not isinstance(m, CompiledStateGraph) for m in names) else None
    graph = judge_graph(names, model=judge) if names else None  # the metrics share the judge built here
    builder = build_simulator(app, user=user_judge(user_model, judge=judge), max_turns=max_turns, metrics=graph)
    return builder.compile(name="simulator")


#: The values the simulate_user node passes to its prompt file (checked by tests/unit/test_prompts.py).
PROMPT_VALUES = {USER_STEP: {"persona", "goal", "scenario", "conversation", "turns_left"},
                 ADVERSARY_STEP: {"persona", "objective", "goal", "scenario", "stage", "stage_number", "conversation",
                                  "turns_left"}}
