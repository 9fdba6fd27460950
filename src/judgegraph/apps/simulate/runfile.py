"""The run header and summary records of a simulation's results file (``judgegraph simulate --out``), so the
simulated conversations open in ``judgegraph diff`` and ``report`` with the settings that made them
(:mod:`judgegraph.runs.header`, docs/runs.md).

The header is an ``eval`` header (metrics, their options, the metrics' judge) whose ``judges`` also name the
simulated user (its model, settings and prompt hashes: another user model is another run) and whose ``inputs``
hold the scenarios file and the app's module, each with its sha256. The summary counts the conversations as
``eval``'s does, and its ``usage`` is every LLM call of the run: the simulated user's and the judge's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...data.results import Usage
from .graph import PROMPT_VALUES

if TYPE_CHECKING:
    from ...judges import Judge
    from ...runs.header import HeaderRecord, JudgeRecord
    from ...runs.runner import RunSummary
    from . import SimulationResult

#: How a header names the simulated user among its judges (the metrics' judge may be the same model).
USER_PREFIX = "simulated user "


def user_prompts() -> dict[str, str]:
    """``{step: sha256[:12]}`` of the simulated user's prompt files (plain and adversarial)."""
    from ...runs.header import prompt_hashes

    return prompt_hashes(PROMPT_VALUES)


def simulation_header(scenarios: str | Path, user: Judge, *, judge: Judge | None = None,
                      metrics: Sequence[str] = (), options: Mapping[str, Any] | None = None,
                      app: str | None = None, app_file: str | Path | None = None, max_turns: int | None = None,
                      argv: Sequence[str] | None = None, user_settings: Mapping[str, Any] | None = None,
                      judge_settings: Mapping[str, Any] | None = None, started_at: datetime | None = None,
                      ) -> HeaderRecord:
    """The header of a simulation of ``scenarios`` (a file) with the simulated ``user``, judged by ``judge`` with
    ``metrics`` (none: only simulated). ``app`` (``module:attr``) and its ``app_file`` are recorded as an input
    (with the file's sha256); ``argv`` and the settings are redacted as an eval header's are."""
    from ...runs.header import file_sha256, run_header
    from ...runs.runner import MetricPlan

    sources = [] if app is None else [{"path": str(app_file or app), "app": app,
                                       "sha256": file_sha256(app_file) if app_file else None}]
    plan = MetricPlan(list(metrics) or None, judge or user, dict(options or {}))
    header = run_header(plan, inputs=[scenarios], argv=argv, judge_settings=judge_settings, sources=sources,
                        started_at=started_at)
    own = run_header(MetricPlan(None, user), judge_settings={**(user_settings or {}), "max_turns": max_turns})
    simulated: JudgeRecord = {**own["judges"][0], "name": USER_PREFIX + user.name, "prompts": user_prompts()}
    header["judges"] = [*(header["judges"] if metrics else []), simulated]
    if not metrics:
        header["metrics"], header["metrics_from_inputs"] = [], False
    return header


def simulation_counts(runs: Sequence[SimulationResult], judge: str = "") -> RunSummary:
    """The counts of ``runs`` as a run's (results, judge errors, failed runs, exit status); its ``usage`` every
    LLM call of the run: the user's and the judge's."""
    from ...runs.runner import ConversationOutcome, RunSummary

    summary = RunSummary(judge=judge, keep_outcomes=False, max_rows=0)
    for r in runs:
        summary.add(ConversationOutcome(r.scenario.id, "simulate", dict(r.results), r.error))
    summary.usage = summary.usage + Usage.total(r.user_usage for r in runs)
    return summary


def simulation_summary(runs: Sequence[SimulationResult], started: datetime, *, judge: str = "",
                       ended_at: datetime | None = None) -> dict[str, object]:
    """The summary record of ``runs``: :func:`judgegraph.runs.header.run_summary` of :func:`simulation_counts`,
    and ``simulation``: how the conversations ended and the user's own usage."""
    from ...runs.header import run_summary

    summary = simulation_counts(runs, judge)
    user = Usage.total(r.user_usage for r in runs)
    ended = Counter(r.status for r in runs)
    return {**run_summary(summary, started, ended_at=ended_at),
            "simulation": {"ended": dict(sorted(ended.items())), "user_usage": user.model_dump(mode="json")}}
