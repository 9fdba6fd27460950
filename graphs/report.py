"""Entry point for `langgraph dev`: a full report (relevancy, retrieval and session judges) as one graph.

Run-time settings come from each run's context (:class:`judgegraph.studio.JudgeSettings`). Session judges need
an LLM: with a model (the run's, or JUDGEGRAPH_MODEL) they are part of the report; without one the report holds
the metrics the offline judge runs.
"""

from judgegraph.studio import JudgeSettings, configurable, judge_for, options_for

OFFLINE = ["turn_relevancy", "turn_contextual_relevancy", "response_relevancy"]
SESSION = ["conversation_completeness", "knowledge_retention", "user_frustration"]


def build(settings: JudgeSettings):
    from judgegraph.report import create_report_graph

    metrics = OFFLINE + (SESSION if settings.model else [])
    return create_report_graph(metrics, model=judge_for(settings),
                               options={m: options_for(m, settings) for m in metrics})


graph = configurable("report", build)
