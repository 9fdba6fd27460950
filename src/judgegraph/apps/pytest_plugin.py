"""The ``judgegraph`` pytest plugin (registered by the package's ``pytest11``
entry point, so it is active wherever judgegraph is installed).

* ``--judgegraph-model MODEL``: the judge model for tests that use the
  ``judgegraph_model`` fixture (default: none, i.e. the offline judge; e.g.
  ``openai:gpt-4.1-mini``).
* A terminal summary after the run: conversations judged by
  :func:`~judgegraph.apps.assert_judged`, results per metric (passed, failed,
  errors, n/a), judge errors and calls/tokens. Silent when nothing was judged.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

_KEY = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("judgegraph")
    group.addoption("--judgegraph-model", default=None, metavar="MODEL",
                    help="judge model for the judgegraph_model fixture, e.g. openai:gpt-4.1-mini (default: offline)")


def pytest_configure(config: pytest.Config) -> None:
    from . import listeners

    tally: dict[str, Any] = {"conversations": 0, "metrics": defaultdict(lambda: defaultdict(int)),
                             "calls": 0, "tokens": 0, "judge_errors": 0}

    def record(conversation_id: str, results: dict[str, Any]) -> None:
        tally["conversations"] += 1
        for key, r in results.items():
            tally["metrics"][key][r.status] += 1
            tally["calls"] += r.usage.calls
            tally["tokens"] += r.usage.total_tokens
            tally["judge_errors"] += len(r.errors)

    config.stash[_KEY] = {"tally": tally, "record": record}
    listeners.append(record)


def pytest_unconfigure(config: pytest.Config) -> None:
    from . import listeners

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
