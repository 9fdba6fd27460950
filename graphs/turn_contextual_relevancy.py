"""Entry point for `langgraph dev` / LangGraph Studio: the turn_contextual_relevancy graph.

Run-time settings (model, base_url, threshold, window_size, strict_mode, review, max_tries) come from each run's
context (:class:`judgegraph.studio.JudgeSettings`, a form in Studio); an empty model falls back to
JUDGEGRAPH_MODEL, then to the offline embedding judge. Nothing is built until a run asks for it.
"""

from judgegraph.studio import configurable

graph = configurable("turn_contextual_relevancy")
