"""Entry points for `langgraph dev` / LangGraph Studio: one graph per registered metric, named as the metric.

``langgraph.json`` names each (the server reads a graph from the module's own namespace, so each is a module
variable; tests/unit/test_graph_entry_points.py checks the file lists every metric of the registry). Run-time
settings (model, base_url, threshold, window_size, strict_mode, review, max_tries) come from each run's context
(:class:`judgegraph.studio.JudgeSettings`, a form in Studio); an empty model falls back to JUDGEGRAPH_MODEL, then
to the offline judge. Nothing of a metric is built until a run asks for it.
"""

from judgegraph.metrics import registry
from judgegraph.studio import configurable

globals().update({name: configurable(name) for name in registry()})
