"""The ``__getattr__`` of a metric module, serving its factories' names from before 0.2 (a module of its own: the
metrics package does not import the top one)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .. import _renamed


def renamed(module: str) -> Callable[[str], Any]:
    """A metric module's ``__getattr__``: each of its ``*_metric`` factories under its old name (``*_judge``,
    renamed in 0.2), with a ``DeprecationWarning`` (:func:`judgegraph._renamed`)."""
    return _renamed(module, lambda: [n for n, v in vars(sys.modules[module]).items()
                                     if n.endswith("_metric") and callable(v)])
