"""What the benchmarks share: a loopback OpenAI-compatible server in a process of its own.

``target(*args, conn)`` must send its base URL on ``conn``, wait for ``"done"`` and
send back how many calls it served (see ``serve`` in each benchmark)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


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
