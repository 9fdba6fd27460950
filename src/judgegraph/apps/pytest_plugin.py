"""The ``judgegraph`` pytest plugin (registered by the package's ``pytest11``
entry point, so it is active wherever judgegraph is installed).

* ``--judgegraph-model MODEL``: the judge model for tests that use the
  ``judgegraph_model`` fixture (default: none, i.e. the offline judge; e.g.
  ``openai:gpt-4.1-mini``).
* ``--judgegraph-base-url URL``: the OpenAI-compatible server an ``openai:`` judge model talks to (a local
  server needs no key): the plugin sets ``$OPENAI_BASE_URL`` for the run, which ``resolve_judge``, the
  metrics and ``assert_judged`` read as the openai client does.
* A terminal summary after the run: conversations judged by
  :func:`~judgegraph.apps.assert_judged`, results per metric (passed, failed,
  errors, n/a), judge errors and calls/tokens. Silent when nothing was judged.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from typing_extensions import TypedDict

if TYPE_CHECKING:
    from ..data.results import MetricResult


class Tally(TypedDict):
    """What the run's :func:`~judgegraph.apps.assert_judged` calls judged."""

    conversations: int
    metrics: defaultdict[str, defaultdict[str, int]]  # metric -> status -> results
    calls: int
    tokens: int
    judge_errors: int


class _Entry(TypedDict):
    tally: Tally
    record: Callable[[str, dict[str, MetricResult]], None]  # the listener filling it


_KEY = pytest.StashKey[_Entry]()
_URL = pytest.StashKey[str | None]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("judgegraph")
    group.addoption("--judgegraph-model", default=None, metavar="MODEL",
                    help="judge model for the judgegraph_model fixture, e.g. openai:gpt-4.1-mini (default: offline)")
    group.addoption("--judgegraph-base-url", default=None, metavar="URL",
                    help="the OpenAI-compatible server openai: judge models talk to (sets $OPENAI_BASE_URL for the run)")


def pytest_configure(config: pytest.Config) -> None:
    from . import listeners

    url = config.getoption("--judgegraph-base-url", None)
    if url:
        config.stash[_URL] = os.environ.get("OPENAI_BASE_URL")
        os.environ["OPENAI_BASE_URL"] = url

    tally: Tally = {"conversations": 0, "metrics": defaultdict(lambda: defaultdict(int)),
                             "calls": 0, "tokens": 0, "judge_errors": 0}

    def record(conversation_id: str, results: dict[str, MetricResult]) -> None:
        tally["conversations"] += 1
        for key, r in results.items():
            tally["metrics"][key][r.status] += 1
            tally["calls"] += r.usage.calls
            tally["tokens"] += r.usage.total_tokens
            tally["judge_errors"] += len(r.errors)

    config.stash[_KEY] = _Entry(tally=tally, record=record)
    listeners.append(record)


def pytest_unconfigure(config: pytest.Config) -> None:
    from . import listeners

    if _URL in config.stash:  # the run's own $OPENAI_BASE_URL, as it was
        before = config.stash[_URL]
        if before is None:
            os.environ.pop("OPENAI_BASE_URL", None)
        else:
            os.environ["OPENAI_BASE_URL"] = before

    entry = config.stash.get(_KEY, None)
    if entry and entry["record"] in listeners:
        listeners.remove(entry["record"])


@pytest.fixture
def judgegraph_model(request: pytest.FixtureRequest) -> str | None:
    """The ``--judgegraph-model`` value (None: the offline judge)."""
    return request.config.getoption("--judgegraph-model")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    entry = config.stash.get(_KEY, None)
    if not entry or not entry["tally"]["conversations"]:
        return
    tally = entry["tally"]
    tr = terminalreporter
    tr.write_sep("=", "judgegraph")
    tr.write_line(f"{tally['conversations']} conversation(s) judged; {tally['judge_errors']} judge error(s); "
                  f"{tally['calls']} judge call(s), {tally['tokens']} tokens")
    for key, counts in sorted(tally["metrics"].items()):
        parts = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in ("passed", "failed", "error", "not_applicable")
                          if counts[s])
        tr.write_line(f"  {key}: {parts}")
