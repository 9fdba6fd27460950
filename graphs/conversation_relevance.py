"""Entry point for `langgraph dev` / LangGraph Studio: the conversation relevance graph.

Uses an LLM judge when JUDGEGRAPH_MODEL is set, otherwise the offline embedding judge.
"""

import os

from judgegraph.metrics.relevancy import create_conversation_relevance_judge

graph = create_conversation_relevance_judge(model=os.environ.get("JUDGEGRAPH_MODEL") or None)
