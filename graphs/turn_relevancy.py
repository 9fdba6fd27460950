"""Entry point for `langgraph dev` / LangGraph Studio: the turn relevancy graph.

Uses an LLM judge when JUDGEGRAPH_MODEL is set (e.g. openai:gpt-4.1-mini),
otherwise the offline embedding judge. Nothing is loaded until the first run.
"""

import os

from judgegraph.metrics.relevancy import create_turn_relevancy_judge

graph = create_turn_relevancy_judge(model=os.environ.get("JUDGEGRAPH_MODEL") or None)
