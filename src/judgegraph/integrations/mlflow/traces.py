"""Writing judged conversations that did not come from MLflow (a LangGraph thread that ``judgegraph watch``
judged) to an MLflow experiment: one trace per conversation (:data:`TRACE_NAME`, its session the conversation id),
its results as that trace's assessments, as for a session read from MLflow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .assessments import AssessmentLog, log_assessments
from .common import FIRST_TRACE_KEY, SESSION_ID_KEY, SESSION_KEY, TRACE_ID_KEY, import_mlflow, unreachable
from .sessions import find_experiment

if TYPE_CHECKING:
    from ...data.conversation import Conversation
    from ...runs.runner import ConversationOutcome

#: The name of the traces :func:`log_conversation_traces` logs.
TRACE_NAME = "judgegraph"
#: Trace metadata: where the conversation was read (e.g. ``langgraph:sqlite:agent.sqlite#thread-1``).
SOURCE_KEY = "judgegraph.source"


def experiment_id(tracking_uri: str, experiment: str) -> str:
    """The id of the experiment named ``experiment`` (created when there is none); an id is taken as it is."""
    client = import_mlflow().MlflowClient(tracking_uri)
    return find_experiment(client, experiment) or str(client.create_experiment(experiment))


def log_conversation_traces(tracking_uri: str, experiment: str,
                            judged: Sequence[tuple[Conversation, ConversationOutcome]]) -> AssessmentLog:
    """Log each judged ``(conversation, outcome)`` as one trace in ``experiment`` (by name, created if missing)
    and its results as that trace's assessments (:func:`~.assessments.log_assessments`). A trace or a write that
    fails is in ``failures``; the others go on. MLflow's tracing API logs to the global tracking URI: it is set to
    ``tracking_uri`` meanwhile, then put back."""
    mlflow = import_mlflow()
    log = AssessmentLog()
    if not judged:
        return log
    if why := unreachable(tracking_uri):
        log.failures.append(why)
        return log
    try:
        exp_id = experiment_id(tracking_uri, experiment)
    except Exception as exc:  # noqa: BLE001 - a refusal of the server, said; nothing is written
        log.failures.append(f"experiment {experiment!r}: {type(exc).__name__}: {exc}")
        return log
    traced: list[Conversation] = []
    outcomes: list[ConversationOutcome] = []
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tracking_uri)
    try:
        for conv, outcome in judged:
            try:
                span = mlflow.start_span_no_context(
                    TRACE_NAME, span_type="CHAT_MODEL", experiment_id=exp_id,
                    inputs={"messages": [{"role": t.role, "content": t.content} for t in conv.turns]},
                    metadata={SESSION_KEY: conv.id, SOURCE_KEY: outcome.source})
                span.end(outputs={"error": outcome.error} if outcome.error else {"results": {
                    k: {"status": r.status, "score": r.score} for k, r in outcome.results.items()}})
            except Exception as exc:  # noqa: BLE001 - reported, the other conversations go on
                log.failures.append(f"{conv.id}: cannot log its trace: {type(exc).__name__}: {exc}")
                continue
            marks = {TRACE_ID_KEY: span.trace_id}
            traced.append(conv.model_copy(update={
                "metadata": {**conv.metadata, FIRST_TRACE_KEY: span.trace_id, SESSION_ID_KEY: conv.id},
                "turns": [t.model_copy(update={"metadata": {**t.metadata, **marks}}) for t in conv.turns]}))
            outcomes.append(outcome)
        mlflow.flush_trace_async_logging()
    finally:
        mlflow.set_tracking_uri(previous)
    written = log_assessments(tracking_uri, outcomes, traced)
    written.failures[:0] = log.failures
    return written
