"""What the benchmarks share: a loopback OpenAI-compatible server in a process of its own.

``target(*args, conn)`` must send its base URL on ``conn``, wait for ``"done"`` and
send back how many calls it served (see ``serve`` in each benchmark).

Importing this module puts the repository root on ``sys.path``, so a benchmark
run as ``python benchmarks/NAME.py`` can import the test kit (``tests.kit``: the
loopback server, made-up results), which is not part of the installed package:
``import _loopback`` before ``from tests.kit... import ...``."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def with_server(target: Callable[..., None], args: tuple[Any, ...], fn: Callable[[str], Any]) -> tuple[Any, Any]:
    """``fn(base_url)`` while the server runs in its own process; returns ``(fn's result, calls served)``."""
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=target, args=(*args, child), daemon=True)
    proc.start()
    try:
        out = fn(parent.recv())
        parent.send("done")
        return out, parent.recv()
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()


def parcel_conversations(n: int, exchanges: int, late: Callable[[int], bool] = lambda i: False,
                         first: int = 0) -> list[dict]:
    """``n`` made-up support conversations of ``exchanges`` exchanges each (a customer asking where a parcel is),
    numbered from ``first``; the ``i``-th reply of the set says "(late)" when ``late(i)``, for a scripted server to
    answer it otherwise."""
    out = []
    for c in range(first, first + n):
        turns = []
        for e in range(exchanges):
            turns += [{"role": "user", "content": f"Question {e} of customer {c}: where is parcel {c}-{e}?"},
                      {"role": "assistant", "content": f"Parcel {c}-{e} left the depot this morning"
                                                       + (" (late)." if late(c * exchanges + e) else ".")}]
        out.append({"id": f"c{c}", "turns": turns})
    return out
