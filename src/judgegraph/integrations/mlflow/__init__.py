"""MLflow sessions in (:func:`load_sessions`: :mod:`.sessions`, :mod:`.messages`), assessments out
(:func:`log_assessments`: :mod:`.assessments`); docs/mlflow.md. MLflow is imported only when these run
(``pip install "judgegraph[mlflow]"``), ``MLFLOW_DISABLE_TELEMETRY`` set to ``true`` first unless you set it, so
reading and writing traces sends nothing beyond the tracking server you name."""

from .assessments import AssessmentLog, log_assessments
from .common import SESSION_KEY, TRACE_ID_KEY
from .messages import new_messages
from .sessions import ExpectationRecord, SessionList, TraceRecord, build_sessions, load_sessions, session_expectations

__all__ = [
    "SESSION_KEY",
    "TRACE_ID_KEY",
    "AssessmentLog",
    "ExpectationRecord",
    "SessionList",
    "TraceRecord",
    "build_sessions",
    "load_sessions",
    "log_assessments",
    "new_messages",
    "session_expectations",
]
