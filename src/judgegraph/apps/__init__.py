"""Judges inside LangChain and LangGraph apps: judge nodes and guardrails, LangSmith / openevals-style evaluators,
pytest assertions, JUnit XML and simulated users (the table of docs/apps.md). Everything is imported lazily; nothing
is built at import time.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers and editors see: the names below, as they are at run time
    from ..data.results import MetricResult
    from .assertions import JudgementFailed as JudgementFailed
    from .assertions import assert_judged as assert_judged
    from .evaluators import as_evaluator as as_evaluator
    from .junit import junit_from_results as junit_from_results
    from .junit import write_junit as write_junit
    from .metrics import judge_graph as judge_graph
    from .node import judge_node as judge_node
    from .node import route_on_verdict as route_on_verdict
    from .node import verdict_reason as verdict_reason
    from .simulate import Scenario as Scenario
    from .simulate import asimulate as asimulate
    from .simulate import create_simulator as create_simulator
    from .simulate import simulate as simulate

#: Each public name and its module, imported when first used (the imports above say the same to type checkers:
#: tests/unit/test_apps_typing.py checks that they agree).
_EXPORTS, __getattr__ = lazy_exports(__name__, {
    "node": ("judge_node", "route_on_verdict", "verdict_reason"),
    "metrics": ("judge_graph",),
    "evaluators": ("as_evaluator",),
    "assertions": ("assert_judged", "JudgementFailed"),
    "junit": ("write_junit", "junit_from_results"),
    "simulate": ("simulate", "asimulate", "Scenario", "create_simulator"),
})

__all__ = list(_EXPORTS)

#: Called with ``(conversation id, {metric: MetricResult})`` after every
#: :func:`assert_judged`. The pytest plugin's summary listens here (kept in this
#: light module so loading the plugin imports no LangChain).
listeners: list[Callable[[str, dict[str, MetricResult]], None]] = []


class _AppsModule(ModuleType):
    """This package, with ``simulate`` always the function.

    The function lives in the subpackage of the same name, and importing a submodule binds its name on the parent
    package: without this, ``from judgegraph.apps import simulate`` would give the module once
    ``judgegraph.apps.simulate`` had been imported (by that very line, or by anything before it). The subpackage
    stays importable for its other names (``from judgegraph.apps.simulate import Scenario``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "simulate" and isinstance(value, ModuleType):
            value = getattr(value, "simulate", value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _AppsModule
