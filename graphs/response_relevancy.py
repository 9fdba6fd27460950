"""Entry point for `langgraph dev`: response relevancy (JUDGEGRAPH_MODEL, or the offline cosine fallback)."""

import os

from judgegraph.metrics.response import create_response_relevancy_judge

graph = create_response_relevancy_judge(model=os.environ.get("JUDGEGRAPH_MODEL") or None)
