"""Session-level judges reading the whole conversation (MLflow's multi-turn judges,
in concurrent steps; docs/session_judges.md). Each needs an LLM judge: with the
offline one the factory raises :class:`~judgegraph.judges.NeedsLLMJudge`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import completeness, frustration, guidelines, retention, role
from .common import SessionSettings
from .completeness import GoalVerdict, build_completeness_graph, create_conversation_completeness_judge
from .frustration import FrustrationVerdict, build_frustration_graph, create_user_frustration_judge
from .guidelines import (
    GuidelineSettings,
    GuidelineVerdict,
    build_guidelines_graph,
    create_conversational_guidelines_judge,
)
from .retention import LapseInfo, RetentionVerdict, build_retention_graph, create_knowledge_retention_judge
from .role import RoleSettings, RoleVerdict, build_role_graph, create_role_adherence_judge

if TYPE_CHECKING:
    from .. import MetricSpec


def _specs() -> list[MetricSpec]:
    from .. import MetricSpec, Need

    base = frozenset({"threshold", "strict_mode"})
    llm: frozenset[Need] = frozenset({"llm"})
    return [
        MetricSpec("conversation_completeness", create_conversation_completeness_judge,
                   "Were all the user's requests satisfied by the end? yes/no, share satisfied (LLM judge)", base, needs=llm, scope="conversation"),
        MetricSpec("knowledge_retention", create_knowledge_retention_judge,
                   "Does each reply keep the facts the user gave earlier? yes/no, share of turns (LLM judge)", base, needs=llm, scope="conversation"),
        MetricSpec("user_frustration", create_user_frustration_judge,
                   "Was the user frustrated, and was it resolved? none/resolved/unresolved (LLM judge)", base, needs=llm, scope="conversation"),
        MetricSpec("conversational_guidelines", create_conversational_guidelines_judge,
                   "Did the assistant follow each given guideline? yes/no, share followed (LLM judge)",
                   base | {"guidelines"}, needs=llm | {"guidelines"}, scope="conversation"),
        MetricSpec("role_adherence", create_role_adherence_judge,
                   "Does each reply stay within the chatbot role? yes/no, share in role (LLM judge)",
                   base | {"role", "batch_size"}, needs=llm, scope="conversation"),
    ]


METRIC_SPECS = _specs()

#: The values each node passes to its prompt file (checked by tests/unit/test_prompts.py).
PROMPT_VALUES = {step: values for module in (completeness, retention, frustration, guidelines, role)
                 for step, values in module.PROMPT_VALUES.items()}

__all__ = [
    "FrustrationVerdict",
    "GoalVerdict",
    "GuidelineSettings",
    "GuidelineVerdict",
    "LapseInfo",
    "METRIC_SPECS",
    "PROMPT_VALUES",
    "RetentionVerdict",
    "RoleSettings",
    "RoleVerdict",
    "SessionSettings",
    "build_completeness_graph",
    "build_frustration_graph",
    "build_guidelines_graph",
    "build_retention_graph",
    "build_role_graph",
    "create_conversation_completeness_judge",
    "create_conversational_guidelines_judge",
    "create_knowledge_retention_judge",
    "create_role_adherence_judge",
    "create_user_frustration_judge",
]
