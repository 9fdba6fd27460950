"""MLflow sessions in, assessments out.

* Reading (:mod:`.sessions`, :mod:`.messages`): :func:`load_sessions`, an
  experiment's traces as conversations, one per session.
* Writing (:mod:`.assessments`): :func:`log_assessments`, results back as
  MLflow feedback assessments.

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
