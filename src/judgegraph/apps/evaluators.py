"""judgegraph metrics as LangSmith and openevals-style evaluators (:func:`as_evaluator`); where the conversation is
found in ``inputs``/``outputs``/``reference_outputs`` is the table of docs/apps.md, "LangSmith and openevals-style
evaluators". A judge error is status ``"error"`` with score None, never a pass or a fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

from typing_extensions import TypedDict

from ..data.conversation import Conversation, from_messages
from ..data.results import FeedbackExtra, MetricResult
from ..judges import ModelLike
from .metrics import MetricLike, Scope, judge_graph

OUTPUT_KEYS = ("output", "answer", "response", "content")
QUESTION_KEYS = ("question", "input", "query")


def _messages(value: Any) -> list[Any]:
    return list(value.get("messages") or []) if isinstance(value, dict) else []


def _text_of(value: Any) -> Any:
    return value.get("content") if isinstance(value, dict) and "role" not in value and "type" not in value else value


def _key(message: Any) -> tuple[str, str]:
    (turn,) = from_messages([message]).turns
    return turn.role, turn.content


# Any: what LangSmith or an openevals-style caller passes (dicts, messages, runs), read as docs/apps.md's table says
def find_conversation(inputs: Any = None, outputs: Any = None, reference_outputs: Any = None,
                      *, conversation_id: str = "") -> Conversation:
    """The conversation an evaluator judges (the table in docs/apps.md). As in openevals (whose evaluators take
    ``inputs``/``outputs``/``reference_outputs`` as a string or a dict), a string is the question, the reply and
    the expected outcome."""
    inputs = {"input": inputs} if isinstance(inputs, str) else inputs or {}
    outputs = {"output": outputs} if isinstance(outputs, str) else outputs
    asked = _messages(inputs)
    if not asked:
        question = next((inputs[k] for k in QUESTION_KEYS if isinstance(inputs, dict) and inputs.get(k)), None)
        asked = [{"role": "user", "content": str(question)}] if question is not None else []
    if isinstance(outputs, (list, tuple)):
        outputs = {"messages": list(outputs)}
    outputs = outputs or {}
    answered = _messages(outputs)
    if answered:
        starts_with_inputs = len(answered) >= len(asked) and [_key(m) for m in answered[: len(asked)]] == [
            _key(m) for m in asked]
        messages = answered if starts_with_inputs else [*asked, *answered]
    else:
        reply = next((outputs[k] for k in OUTPUT_KEYS if isinstance(outputs, dict) and outputs.get(k) is not None),
                     None)
        if reply is None:
            got = f"outputs keys {sorted(outputs)}" if isinstance(outputs, dict) else type(outputs).__name__
            raise ValueError("no conversation to judge: expected outputs['messages'], a reply in outputs['output']"
                             f" (or {', '.join(OUTPUT_KEYS[1:])}) or the reply as a string; got {got}")
        reply = _text_of(reply)
        messages = [*asked, reply if not isinstance(reply, str) else {"role": "assistant", "content": reply}]
    ref = {"expected_outcome": reference_outputs} if isinstance(reference_outputs, str) else reference_outputs
    ref = ref if isinstance(ref, dict) else {}
    wanted = {"expected_outcome": ref.get("expected_outcome") or ref.get("outcome"),
              "chatbot_role": ref.get("chatbot_role")}
    return from_messages(messages, id=conversation_id, **{k: str(v) for k, v in wanted.items() if v})


class EvaluationResult(TypedDict):
    """LangSmith's evaluation result."""

    key: str
    score: float | None
    value: Any
    comment: str
    metadata: FeedbackExtra


class EvaluationResults(TypedDict):
    results: list[EvaluationResult]


def feedback(result: MetricResult) -> EvaluationResult:
    """One LangSmith evaluation result from a metric result."""
    fb = result.to_feedback()
    return {"key": fb["key"], "score": fb["score"], "value": fb["value"], "comment": fb["comment"],
            "metadata": fb["extra"]}


class Evaluator(Protocol):
    """What :func:`as_evaluator` returns: called as LangSmith and openevals call evaluators, ``acall`` the same
    under asyncio; each returns one feedback dict (``{"results": [...]}`` for several metrics)."""

    __name__: str

    def __call__(self, inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, *,
                 run: Any = None, example: Any = None, **kwargs: Any) -> dict[str, Any]: ...

    async def acall(self, inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, *,
                    run: Any = None, example: Any = None, **kwargs: Any) -> dict[str, Any]: ...


def as_evaluator(
    metrics: MetricLike | Sequence[MetricLike],
    *,
    model: ModelLike = None,
    scope: Scope = "conversation",
    name: str | None = None,
) -> Evaluator:
    """An evaluator for ``langsmith.evaluate(..., evaluators=[...])`` and for direct openevals-style calls
    (``inputs=``, ``outputs=``, ``reference_outputs=``); also callable as ``evaluator(run, example)``.

    ``metrics``: a metric name, a compiled metric graph, or a list of them (names are built with ``model``).
    ``scope="latest"`` judges only the last exchange (one window). Use ``aevaluate`` / ``await
    evaluator.acall(...)`` in async code: the same graph runs under ``ainvoke``."""
    graph = judge_graph(metrics, model=model, scope=scope)

    def args(inputs: Any, outputs: Any, reference_outputs: Any, run: Any, example: Any) -> dict[str, Conversation]:
        if run is None and hasattr(inputs, "outputs") and hasattr(inputs, "inputs"):  # called as (run, example)
            run, example, inputs, outputs = inputs, outputs, None, None
        if run is not None:
            example_inputs = getattr(example, "inputs", None) or {}
            inputs = inputs if inputs is not None else (example_inputs or getattr(run, "inputs", None) or {})
            outputs = outputs if outputs is not None else (getattr(run, "outputs", None) or {})
            if reference_outputs is None and example is not None:
                reference_outputs = getattr(example, "outputs", None) or {}
        cid = str(getattr(example, "id", "") or getattr(run, "id", "") or "")
        return {"conversation": find_conversation(inputs, outputs, reference_outputs, conversation_id=cid)}

    def shape(results: dict[str, MetricResult]) -> EvaluationResult | EvaluationResults:
        items = [feedback(r) for r in results.values()]
        return items[0] if len(items) == 1 else {"results": items}

    def evaluator(inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, *,
                  run: Any = None, example: Any = None, **_: Any) -> EvaluationResult | EvaluationResults:
        return shape(graph.invoke(args(inputs, outputs, reference_outputs, run, example))["results"])

    async def acall(inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, *,
                    run: Any = None, example: Any = None, **_: Any) -> EvaluationResult | EvaluationResults:
        return shape((await graph.ainvoke(args(inputs, outputs, reference_outputs, run, example)))["results"])

    evaluator.__name__ = name or (graph.name if graph.name and graph.name != "judges" else "judgegraph")
    evaluator.acall = acall  # type: ignore[attr-defined]
    return cast(Evaluator, evaluator)
