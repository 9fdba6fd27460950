"""Entry point for `langgraph dev`: a full report (relevancy, retrieval and session judges) as one graph.

Session judges need an LLM: set JUDGEGRAPH_MODEL (e.g. openai:gpt-4.1-mini); without it they report
"needs an LLM judge" and the relevancy metrics run on the offline judge.
"""

import os

from judgegraph.report import create_report_graph

graph = create_report_graph(
    [
        "turn_relevancy",
        "turn_contextual_relevancy",
        "response_relevancy",
        "conversation_completeness",
        "knowledge_retention",
        "user_frustration",
    ],
    model=os.environ.get("JUDGEGRAPH_MODEL") or None,
)
