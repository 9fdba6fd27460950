"""``judgegraph cache info|clear``: the persistent judge cache (docs/judges.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, safe

if TYPE_CHECKING:
    from ..judges.cache import CacheFileError
    from .common import Subparsers


def register(sub: Subparsers) -> None:
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


def _broken(exc: CacheFileError) -> int:
    """A cache file that cannot be used: what is wrong and what to do; exit 2
    when the path is not a cache at all, 3 when the file cannot be read."""
    where = safe(exc.path)
    if exc.not_a_cache:
        print(f"judgegraph cache: {where} is not a judge cache: {safe(exc.cause)}; nothing was changed"
              " (give the cache file with --cache PATH)", file=sys.stderr)
        return EXIT_USAGE
    hint = (f"`judgegraph cache clear --cache {where}` replaces it" if exc.corrupt
            else "check the file and its folder, or use another file with --cache PATH")
    print(f"judgegraph cache: {where} {safe(exc.cause)}; {hint}", file=sys.stderr)
    return EXIT_ERRORS


def run(args: argparse.Namespace) -> int:
    from ..judges.cache import CacheFileError, DiskCache

    disk = DiskCache(args.cache)
    if args.action == "clear":
        try:
            n = disk.clear()
        except CacheFileError as exc:
            if not exc.corrupt:
                return _broken(exc)
            try:
                removed = disk.remove()
            except OSError as os_exc:
                print(f"judgegraph cache: {safe(disk.path)} is damaged ({safe(exc.cause)}) and could not be removed:"
                      f" {safe(os_exc.strerror or os_exc)}", file=sys.stderr)
                return EXIT_ERRORS
            print(f"judge cache {safe(disk.path)}: damaged ({safe(exc.cause)}); removed"
                  f" {', '.join(safe(p.name) for p in removed)}: the next run starts a new cache")
            return EXIT_OK
        print(f"judge cache {safe(disk.path)}: {n} answers removed")
        return EXIT_OK
    try:
        info = disk.info()
    except CacheFileError as exc:
        return _broken(exc)
    if not info["exists"]:
        print(f"judge cache {info['path']}: empty (no file yet)")
        return EXIT_OK
    print(f"judge cache {info['path']}: {info['entries']} answers, {_size(info['bytes'])}")
    for model, n in info["models"].items():
        print(f"  model {model or '?'}: {n}")
    for step, n in info["steps"].items():
        print(f"  step {step or '?'}: {n}")
    return EXIT_OK
