"""judgegraph: LLM judges for chatbot conversations, built as LangGraph graphs.

Everything is imported lazily: ``import judgegraph`` builds no model, loads no
weights and opens no connection. Type checkers see the exports through the
``TYPE_CHECKING`` imports below (the package ships ``py.typed``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .apps.assertions import assert_judged
    from .apps.evaluators import as_evaluator
    from .apps.node import judge_node, route_on_verdict, verdict_reason
    from .apps.pairwise import PairwiseReport, compare_pairwise
    from .apps.simulate import Scenario, asimulate, simulate
    from .compiling import CompileOptions
    from .conversation import Conversation, RetrievalNode, ToolCall, Turn, from_messages
    from .export import load_results
    from .judges import CallLimiter, Judge, JudgeCache, ModelLike, NeedsLLMJudge, load_aligned, resolve_judge
    from .judges.aligned import AlignedJudge
    from .judges.jury import Jury
    from .judges.llm import LLMJudge
    from .judges.offline import EmbeddingJudge
    from .judges.scripted import ScriptedChatModel
    from .loaders import load_conversations, load_file, load_files
    from .loaders.langgraph_threads import from_thread
    from .metrics import create_metric
    from .metrics.contextual import create_turn_contextual_relevancy_judge
    from .metrics.custom import make_judge
    from .metrics.faithfulness import create_turn_faithfulness_judge
    from .metrics.goal import create_goal_completion_judge
    from .metrics.pairwise import Criterion, create_pairwise_judge
    from .metrics.relevancy import create_conversation_relevance_judge, create_turn_relevancy_judge
    from .metrics.response import create_response_relevancy_judge
    from .metrics.safety import create_conversational_safety_judge
    from .metrics.session import (
        create_conversation_completeness_judge,
        create_conversational_guidelines_judge,
        create_knowledge_retention_judge,
        create_role_adherence_judge,
        create_user_frustration_judge,
    )
    from .metrics.tools import create_tool_correctness_judge
    from .metrics.topic import create_topic_adherence_judge
    from .report import build_report_graph, create_report_graph
    from .results import JudgeErrorInfo, MetricResult, Usage, Verdict, WindowVerdict
    from .scoring import build_result
    from .trust.agreement import agreement
    from .trust.alignment import align
    from .windows import exchanges, sliding_windows

_EXPORTS = {
    "Conversation": "conversation",
    "Turn": "conversation",
    "RetrievalNode": "conversation",
    "ToolCall": "conversation",
    "from_messages": "conversation",
    "MetricResult": "results",
    "Verdict": "results",
    "WindowVerdict": "results",
    "JudgeErrorInfo": "results",
    "Usage": "results",
    "build_result": "scoring",
    "create_turn_relevancy_judge": "metrics.relevancy",
    "create_conversation_relevance_judge": "metrics.relevancy",
    "create_turn_contextual_relevancy_judge": "metrics.contextual",
    "create_response_relevancy_judge": "metrics.response",
    "create_conversation_completeness_judge": "metrics.session",
    "create_knowledge_retention_judge": "metrics.session",
    "create_user_frustration_judge": "metrics.session",
    "create_conversational_guidelines_judge": "metrics.session",
    "create_role_adherence_judge": "metrics.session",
    "create_tool_correctness_judge": "metrics.tools",
    "create_goal_completion_judge": "metrics.goal",
    "create_topic_adherence_judge": "metrics.topic",
    "create_turn_faithfulness_judge": "metrics.faithfulness",
    "create_conversational_safety_judge": "metrics.safety",
    "make_judge": "metrics.custom",
    "create_metric": "metrics",
    "create_report_graph": "report",
    "build_report_graph": "report",
    "CompileOptions": "compiling",
    "load_file": "loaders",
    "load_files": "loaders",
    "load_conversations": "loaders",
    "from_thread": "loaders.langgraph_threads",
    "exchanges": "windows",
    "sliding_windows": "windows",
    "Judge": "judges",
    "ModelLike": "judges",
    "NeedsLLMJudge": "judges",
    "resolve_judge": "judges",
    "JudgeCache": "judges",
    "CallLimiter": "judges",
    "LLMJudge": "judges.llm",
    "Jury": "judges.jury",
    "EmbeddingJudge": "judges.offline",
    "ScriptedChatModel": "judges.scripted",
    "judge_node": "apps.node",
    "route_on_verdict": "apps.node",
    "verdict_reason": "apps.node",
    "as_evaluator": "apps.evaluators",
    "assert_judged": "apps.assertions",
    "simulate": "apps.simulate",
    "asimulate": "apps.simulate",
    "Scenario": "apps.simulate",
    "agreement": "trust.agreement",
    "create_pairwise_judge": "metrics.pairwise",
    "Criterion": "metrics.pairwise",
    "compare_pairwise": "apps.pairwise",
    "PairwiseReport": "apps.pairwise",
    "align": "trust.alignment",
    "AlignedJudge": "judges.aligned",
    "load_aligned": "judges",
    "load_results": "export",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'judgegraph' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
