"""Importing by name: lazy exports (a package names its public names by module, and each is imported on first use,
so importing the package imports none of them: ``import judgegraph`` builds no model and imports no LangChain), and
a user's ``module:attribute`` object (a custom metric, the chatbot ``simulate`` talks to)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]) -> tuple[dict[str, str], Callable[[str], Any]]:
    """The module of each public name (``exports``: each module, relative to ``package``, with its names) and
    the package's ``__getattr__`` (PEP 562), which imports a name's module when the name is first used."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(import_module(f".{where[name]}", package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return where, __getattr__


def import_object(path: str, example: str) -> Any:
    """The object ``path`` (``module.path:attribute``, the attribute maybe dotted) names, a module in the current
    directory importable (put last on the path, as uvicorn does, so it shadows nothing). A ValueError starting with
    ``path`` says what is wrong (``example``: a well-formed path, for the message)."""
    module, _, attr = path.partition(":")
    if not module or not attr or not all(p.isidentifier() for p in module.split(".") + attr.split(".")):
        raise ValueError(f"{path!r}: expected module.path:attribute, e.g. {example}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        obj: Any = import_module(module)
    except ModuleNotFoundError as exc:
        where = "" if exc.name != module.split(".")[0] else " (not on PYTHONPATH or in the current directory)"
        raise ValueError(f"{path!r} could not be imported: {exc}{where}") from exc
    except Exception as exc:
        raise ValueError(f"{path!r}: importing {module!r} failed: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ValueError(f"{path!r}: module {module!r} has no attribute {attr!r}") from exc
    return obj
