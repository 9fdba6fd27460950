"""``judgegraph cache info|clear``: the persistent judge cache (docs/judges.md)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_OK


def register(sub: Any) -> None:
    p = sub.add_parser("cache", help="show or clear the persistent judge cache",
                       description="The SQLite file where valid LLM judge answers are kept between runs.")
    p.add_argument("action", choices=["info", "clear"], help="info: where it is and what it holds; clear: empty it")
    p.add_argument("--cache", metavar="PATH", help="the cache file (default: $JUDGEGRAPH_JUDGE_CACHE, else "
                                                   "$JUDGEGRAPH_CACHE_DIR/judge-cache.sqlite)")
    p.set_defaults(run=run)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def run(args: argparse.Namespace) -> int:
    from ..judges.cache import DiskCache

    disk = DiskCache(args.cache)
    if args.action == "clear":
        n = disk.clear()
        print(f"judge cache {disk.path}: {n} answers removed")
        return EXIT_OK
    info = disk.info()
    if not info["exists"]:
        print(f"judge cache {info['path']}: empty (no file yet)")
        return EXIT_OK
    print(f"judge cache {info['path']}: {info['entries']} answers, {_size(info['bytes'])}")
    for model, n in info["models"].items():
        print(f"  model {model or '?'}: {n}")
    for step, n in info["steps"].items():
        print(f"  step {step or '?'}: {n}")
    return EXIT_OK
