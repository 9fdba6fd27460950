"""The app helpers, imported as documented (``from judgegraph.apps import ...``), are typed for mypy and editors:
a user's file using them as docs/apps.md does passes mypy, and none of them is ``Any`` (issue 27 item 10)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

USER_CODE = '''
from typing import Any

from langgraph.graph import END, START, MessagesState, StateGraph

from judgegraph.apps import (
    JudgementFailed, Scenario, as_evaluator, assert_judged, asimulate, create_simulator, judge_graph, judge_node,
    junit_from_results, route_on_verdict, simulate, verdict_reason, write_junit,
)
from judgegraph.data.results import MetricResult


class State(MessagesState):
    judgements: dict[str, Any]


def regenerate(state: State) -> dict[str, Any]:
    why: str = verdict_reason(state, "turn_relevancy")
    return {"messages": [("system", why)]}


def build() -> Any:
    builder = StateGraph(State)
    builder.add_node("judge", judge_node("turn_relevancy", model=None, scope="latest"))
    builder.add_node("regenerate", regenerate)
    builder.add_edge(START, "judge")
    route = route_on_verdict("turn_relevancy", passed=END, failed="regenerate")
    builder.add_conditional_edges("judge", route, route.destinations)
    return builder.compile()


relevancy = as_evaluator("turn_relevancy", model="openai:gpt-4.1-mini")


def judge_sync() -> dict[str, Any]:
    return relevancy(inputs={"question": "Hi?"}, outputs="Hello.")


async def judge_async() -> Any:
    feedback = await relevancy.acall(inputs={"messages": []}, outputs={"messages": []})
    return feedback["score"]


def in_a_test() -> MetricResult:
    results = assert_judged([("user", "Hi?"), ("assistant", "Hello.")], "turn_relevancy")
    return results["turn_relevancy"]


reveal_type(judge_node)
reveal_type(route_on_verdict)
reveal_type(verdict_reason)
reveal_type(as_evaluator)
reveal_type(relevancy)
reveal_type(relevancy.acall)
reveal_type(assert_judged)
reveal_type(JudgementFailed)
reveal_type(simulate)
reveal_type(asimulate)
reveal_type(Scenario)
reveal_type(create_simulator)
reveal_type(judge_graph)
reveal_type(write_junit)
reveal_type(junit_from_results)
'''


@pytest.mark.timeout(900)  # the wait for .ci/run's cache below, then mypy (600 s at most)
def test_the_documented_app_helpers_type_check_and_none_is_any(tmp_path):
    user = tmp_path / "user_app.py"
    user.write_text(USER_CODE, encoding="utf-8")
    # A copy of the tree's mypy cache, when there is one (.ci/run's own mypy puts it in place whole once it has
    # checked the tree, beside the suite; this file runs last, tests/conftest.py): only the user file is new then. A
    # copy, because mypy's cache is one SQLite file that two mypy processes writing at once can break. Without one
    # (a first local run) the same check starts cold and takes longer.
    cache = tmp_path / "mypy_cache"
    deadline = time.monotonic() + 300  # still filling (.ci/run's mypy on a busy machine): its cache is worth a wait,
    while (ROOT / ".mypy_cache.ci").is_dir() and not (ROOT / ".mypy_cache").is_dir() and time.monotonic() < deadline:
        time.sleep(1)  # as two cold mypy processes would share the CPU; past the bound this one starts cold
    if (ROOT / ".mypy_cache").is_dir():
        shutil.copytree(ROOT / ".mypy_cache", cache)
    # in a process of its own: mypy raises the interpreter's recursion limit, which other tests' depth checks read
    done = subprocess.run([sys.executable, "-m", "mypy", str(user), "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(cache), "--no-error-summary"],
                          capture_output=True, text=True, timeout=600)
    stdout, stderr, status = done.stdout, done.stderr, done.returncode
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert status == 0 and not errors, stdout + stderr
    revealed = re.findall(r'Revealed type is "(.*)"', stdout)
    assert len(revealed) == USER_CODE.count("reveal_type("), stdout
    assert all(t != "Any" and not t.startswith("Any") for t in revealed), stdout
    assert revealed[4].endswith(".Evaluator") and "-> typing.Coroutine[Any, Any, dict[str, Any]]" in revealed[5], stdout


def test_every_public_name_resolves_and_type_checkers_see_each_one():
    import ast

    import judgegraph.apps as apps

    assert all(getattr(apps, name) is not None for name in apps.__all__)
    tree = ast.parse((ROOT / "src" / "judgegraph" / "apps" / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {alias.asname for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names
            if alias.asname}  # `import X as X` re-exports; a plain import is for annotations only
    assert seen == set(apps.__all__)
