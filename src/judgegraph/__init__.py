"""judgegraph: LLM judges for chatbot conversations, built as LangGraph graphs.

Everything is imported lazily: ``import judgegraph`` builds no model, loads no
weights and opens no connection.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Conversation": "conversation",
    "Turn": "conversation",
    "RetrievalNode": "conversation",
    "ToolCall": "conversation",
    "MetricResult": "results",
    "WindowVerdict": "results",
    "Usage": "results",
    "create_turn_relevancy_judge": "metrics.relevancy",
    "create_conversation_relevance_judge": "metrics.relevancy",
    "build_relevancy_graph": "metrics.relevancy",
    "create_metric": "metrics",
    "make_judge": "custom",
    "load_file": "loaders",
    "load_files": "loaders",
    "load_conversations": "loaders",
    "exchanges": "windows",
    "sliding_windows": "windows",
    "LLMJudge": "judges.llm",
    "EmbeddingJudge": "judges.offline",
    "CallLimiter": "judges.limiter",
    "resolve_judge": "judges",
    "JudgeCache": "judges.base",
    "create_report_graph": "report",
    "create_turn_contextual_relevancy_judge": "metrics.contextual",
    "create_response_relevancy_judge": "metrics.response",
    "create_conversation_completeness_judge": "metrics.session",
    "create_knowledge_retention_judge": "metrics.session",
    "create_user_frustration_judge": "metrics.session",
    "create_conversational_guidelines_judge": "metrics.session",
    "create_role_adherence_judge": "metrics.session",
    "build_report_graph": "report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'judgegraph' has no attribute {name!r}")
