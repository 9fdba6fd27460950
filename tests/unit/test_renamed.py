"""Names renamed in 0.2 (issue 26 item 3; the one file where the rename sweep kept the old names): each old name is
still importable from every place it was, is the new name's object, warns once naming the new name, and is in
neither ``__all__`` nor ``dir()``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings

import pytest

from judgegraph.metrics import built_ins


def _places() -> list[tuple[str, str, str]]:
    """(module, old name, new name): each built-in's factory where it was importable (its module, the session
    package for a session metric, the top-level package), and the other renamed names."""
    places = [("judgegraph", "make_judge", "make_metric"), ("judgegraph.metrics.custom", "make_judge", "make_metric"),
              ("judgegraph", "create_pairwise_judge", "create_pairwise_metric"),
              ("judgegraph.metrics.pairwise", "create_pairwise_judge", "create_pairwise_metric"),
              ("judgegraph", "build_report_graph", "report_builder"),
              ("judgegraph.report", "build_report_graph", "report_builder")]
    for spec in built_ins().values():
        new, old = spec.factory.__name__, f"create_{spec.name}_judge"
        assert new == f"create_{spec.name}_metric"
        module = spec.factory.__module__
        homes = {"judgegraph", module, *(["judgegraph.metrics.session"] if ".session." in module else [])}
        places += [(home, old, new) for home in sorted(homes)]
    return places


@pytest.mark.parametrize(("module", "old", "new"), _places(), ids=lambda v: v)
def test_an_old_name_still_works_warns_once_naming_the_new_one_and_is_not_listed(module, old, new):
    mod = importlib.import_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = getattr(importlib.import_module(module), old)
        ns: dict[str, object] = {}
        exec(f"from {module} import {old} as imported", ns)  # importlib asks hasattr first: still one warning
    assert got is getattr(mod, new) is ns["imported"]
    assert [(w.category, w.filename) for w in caught] == [(DeprecationWarning, __file__), (DeprecationWarning, "<string>")]
    assert all(f"{module}.{old} is deprecated" in str(w.message) and f"use {module}.{new}" in str(w.message)
               for w in caught)
    listed = getattr(mod, "__all__", dir(mod))  # a session metric's module has no __all__
    assert new in listed and new in dir(mod)
    assert old not in listed and old not in dir(mod)


def test_a_name_that_never_existed_is_still_an_attribute_error():
    import judgegraph

    for name in ("create_judge", "create_no_such_metric_judge", "build_report_judge"):
        with pytest.raises(AttributeError, match=name):
            getattr(judgegraph, name)


def test_importing_judgegraph_and_probing_an_unknown_name_imports_nothing_else():
    """A hasattr on the package (``from judgegraph import cli`` does one) loads no metric to look for old names."""
    probe = ("import json, sys, judgegraph; hasattr(judgegraph, 'cli'); hasattr(judgegraph, 'nothing');"
             " print(json.dumps(sorted(m for m in sys.modules if m.startswith(('judgegraph', 'langgraph')))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": ":".join(sys.path)})
    assert json.loads(out.stdout) == ["judgegraph", "judgegraph._lazy"]  # the package and its lazy-export helper
