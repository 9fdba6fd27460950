"""The ``judgegraph`` pytest plugin (the package's ``pytest11`` entry point): ``--judgegraph-model`` (the
``judgegraph_model`` fixture), ``--judgegraph-base-url`` (sets ``$OPENAI_BASE_URL`` for the run) and a terminal
summary of what :func:`~judgegraph.apps.assert_judged` judged (docs/apps.md).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, get_args

import pytest

if TYPE_CHECKING:
    from ..data.results import MetricResult


@dataclass
class Tally:
    """What the run's :func:`~judgegraph.apps.assert_judged` calls judged."""

    conversations: int = 0
    metrics: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))  # status counts
    calls: int = 0
    tokens: int = 0
    judge_errors: int = 0

    def record(self, conversation_id: str, results: dict[str, MetricResult]) -> None:
        """The listener :func:`~judgegraph.apps.assert_judged` calls."""
        self.conversations += 1
        for key, r in results.items():
            self.metrics[key][r.status] += 1
            self.calls += r.usage.calls
            self.tokens += r.usage.total_tokens
            self.judge_errors += len(r.errors)


_KEY = pytest.StashKey[Tally]()
_ENV = pytest.StashKey[pytest.MonkeyPatch]()  # undoes --judgegraph-base-url's $OPENAI_BASE_URL


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
        config.stash[_ENV] = env = pytest.MonkeyPatch()
        env.setenv("OPENAI_BASE_URL", url)
    config.stash[_KEY] = tally = Tally()
    listeners.append(tally.record)


def pytest_unconfigure(config: pytest.Config) -> None:
    from . import listeners

    if _ENV in config.stash:  # the run's own $OPENAI_BASE_URL, as it was
        config.stash[_ENV].undo()
    tally = config.stash.get(_KEY, None)
    if tally and tally.record in listeners:
        listeners.remove(tally.record)


@pytest.fixture
def judgegraph_model(request: pytest.FixtureRequest) -> str | None:
    """The ``--judgegraph-model`` value (None: the offline judge)."""
    return request.config.getoption("--judgegraph-model")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    tally = config.stash.get(_KEY, None)
    if not tally or not tally.conversations:
        return
    from ..data.results import Status  # here: the plugin loads in every pytest run, pydantic only when it reports

    tr = terminalreporter
    tr.write_sep("=", "judgegraph")
    tr.write_line(f"{tally.conversations} conversation(s) judged; {tally.judge_errors} judge error(s); "
                  f"{tally.calls} judge call(s), {tally.tokens} tokens")
    for key, counts in sorted(tally.metrics.items()):
        parts = ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in get_args(Status) if counts[s])
        tr.write_line(f"  {key}: {parts}")
