"""Session-level judges reading the whole conversation (MLflow's multi-turn judges,
in concurrent steps; docs/session_judges.md). Each needs an LLM judge: with the
offline one the factory raises :class:`~judgegraph.judges.NeedsLLMJudge`.
"""

from __future__ import annotations

from .._renamed import renamed
from .common import SessionSettings
from .completeness import GoalVerdict, build_completeness_graph, create_conversation_completeness_metric
from .frustration import FrustrationVerdict, build_frustration_graph, create_user_frustration_metric
from .guidelines import (
    GuidelineSettings,
    GuidelineVerdict,
    build_guidelines_graph,
    create_conversational_guidelines_metric,
)
from .retention import LapseInfo, RetentionVerdict, build_retention_graph, create_knowledge_retention_metric
from .role import RoleSettings, RoleVerdict, build_role_graph, create_role_adherence_metric

__all__ = [
    "FrustrationVerdict",
    "GoalVerdict",
    "GuidelineSettings",
    "GuidelineVerdict",
    "LapseInfo",
    "RetentionVerdict",
    "RoleSettings",
    "RoleVerdict",
    "SessionSettings",
    "build_completeness_graph",
    "build_frustration_graph",
    "build_guidelines_graph",
    "build_retention_graph",
    "build_role_graph",
    "create_conversation_completeness_metric",
    "create_conversational_guidelines_metric",
    "create_knowledge_retention_metric",
    "create_role_adherence_metric",
    "create_user_frustration_metric",
]
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
