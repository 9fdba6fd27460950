"""Entry point for `langgraph dev`: a full report as one graph — every registered metric the run's judge answers
whose required options the run's settings give (``conversational_guidelines``: when ``guidelines`` is set).

Run-time settings come from each run's context (:class:`judgegraph.studio.JudgeSettings`). Without a model (the
run's, or JUDGEGRAPH_MODEL) the report holds the metrics the offline judge runs; with one, the session judges too.
"""

from dataclasses import MISSING

from judgegraph.studio import JudgeSettings, configurable, judge_for, options_for


def build(settings: JudgeSettings):
    from judgegraph.metrics import registry
    from judgegraph.report import create_report_graph

    judge = judge_for(settings)
    options = {name: options_for(name, settings) for name in registry()}
    metrics = [name for name, spec in registry().items() if all(judge.supports(t) for t in spec.tasks) and all(
        spec.default(o) is not MISSING or o in options[name] for o in (spec.fields() if spec.settings else ()))]
    return create_report_graph(metrics, model=judge, options={m: options[m] for m in metrics})


graph = configurable("report", build)
