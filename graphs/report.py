"""Entry point for `langgraph dev`: a full report (relevancy, retrieval and session judges) as one graph.

Session judges need an LLM: with JUDGEGRAPH_MODEL set (e.g. openai:gpt-4.1-mini) they are part of the
report; without it the report holds the metrics the offline judge runs.
"""

import os

from judgegraph.report import create_report_graph

MODEL = os.environ.get("JUDGEGRAPH_MODEL") or None
OFFLINE = ["turn_relevancy", "turn_contextual_relevancy", "response_relevancy"]
SESSION = ["conversation_completeness", "knowledge_retention", "user_frustration"]

graph = create_report_graph(OFFLINE + (SESSION if MODEL else []), model=MODEL)
