"""What reading and writing share: the MLflow keys judgegraph uses, importing MLflow on first use (telemetry off
unless the user set it), and a quick check that a tracking server answers."""

from __future__ import annotations

import os
from types import ModuleType

from ...loaders.probe import no_answer

SESSION_KEY = "mlflow.trace.session"  # MLflow's trace metadata key for the session (and session assessments)
TRACE_ID_KEY = "mlflow_trace_id"  # turn metadata: the trace the turn was read from
PART_KEY = "mlflow_part"  # turn metadata: "request" (the trace's input) or "response" (its output)
FIRST_TRACE_KEY = "mlflow_first_trace_id"  # conversation metadata: where session-level assessments go
SESSION_ID_KEY = "mlflow_session"  # conversation metadata: the session id (None for a trace of its own)


def import_mlflow() -> ModuleType:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # read by mlflow when it is first imported
    try:
        import mlflow
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('the MLflow integration needs MLflow: pip install "judgegraph[mlflow]"') from exc
    return mlflow


def unreachable(uri: str, timeout: float = 5.0) -> str | None:
    """Why an http(s) tracking server cannot be reached, or None. MLflow's own
    client retries a refused connection for minutes; this answers at once."""
    if not uri.startswith(("http://", "https://")):
        return None
    why = no_answer(uri, "/health", timeout)
    return None if why is None else f"cannot reach the MLflow tracking server: {why}"
