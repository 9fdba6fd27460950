"""``judgegraph cache info|clear``: the persistent judge cache (docs/judges.md)."""

from __future__ import annotations

import argparse
from functools import partial
from typing import TYPE_CHECKING

from .common import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, add_shared, fail, safe

if TYPE_CHECKING:
    from ..judges.cache import CacheFileError
    from .common import Subparsers


_fail = partial(fail, prefix="judgegraph cache")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("cache", help="show or clear the persistent judge cache",
                       description="The SQLite file where valid LLM judge answers are kept between runs.")
    p.add_argument("action", choices=["info", "clear"], help="info: where it is and what it holds; clear: empty it")
    add_shared(p, "--cache")
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
    if exc.not_a_cache:
        return _fail(f"{exc.path} is not a judge cache: {exc.cause}; nothing was changed (give the cache file with"
                     " --cache PATH)", EXIT_USAGE)
    hint = (f"`judgegraph cache clear --cache {exc.path}` replaces it" if exc.corrupt
            else "check the file and its folder, or use another file with --cache PATH")
    return _fail(f"{exc.path} {exc.cause}; {hint}", EXIT_ERRORS)


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
                return _fail(f"{disk.path} is damaged ({exc.cause}) and could not be removed:"
                             f" {os_exc.strerror or os_exc}", EXIT_ERRORS)
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
