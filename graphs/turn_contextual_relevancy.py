"""Entry point for `langgraph dev`: turn contextual relevancy (JUDGEGRAPH_MODEL, or the offline judge)."""

import os

from judgegraph.metrics.contextual import create_turn_contextual_relevancy_judge

graph = create_turn_contextual_relevancy_judge(model=os.environ.get("JUDGEGRAPH_MODEL") or None)
