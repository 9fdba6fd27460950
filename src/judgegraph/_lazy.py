"""Lazy exports: a package names its public names by module, and each is imported on first use, so importing
the package imports none of them (``import judgegraph`` builds no model and imports no LangChain)."""

from __future__ import annotations

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
