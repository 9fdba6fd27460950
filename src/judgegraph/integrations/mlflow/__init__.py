"""MLflow sessions in, assessments out.

* Reading (:mod:`.sessions`): :func:`load_sessions` reads the traces of an
  MLflow experiment as conversations, one per session (trace metadata
  ``mlflow.trace.session``), with the session's expectations;
  :func:`build_sessions` does the same on plain :class:`TraceRecord` values.
  How a trace's request and response are read as messages, and how a history
  repeated in every request is added once, is in :mod:`.messages`.
* Writing (:mod:`.assessments`): :func:`log_assessments` writes judgegraph's
  results back as MLflow feedback assessments, session-level ones marked as
  MLflow marks its own.

MLflow is imported only when these functions run (``pip install
"judgegraph[mlflow]"``): importing this package needs no MLflow. Before
importing it, ``MLFLOW_DISABLE_TELEMETRY`` is set to ``true`` unless you set it
yourself, so reading and writing traces sends nothing beyond the tracking
server you name.
"""

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
