"""``judgegraph init``: write a commented starter ``judgegraph.yaml`` that ``eval --config`` takes as it is."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_OK, EXIT_USAGE, fail

if TYPE_CHECKING:
    from .common import Subparsers

#: The starter files: the config (every section, the common settings set, the others commented out with their
#: defaults) and the sample conversations written beside it when it names a ``chats.jsonl`` that does not exist.
STARTER_FILES = Path(__file__).with_name("starter")
STARTER = (STARTER_FILES / "judgegraph.yaml").read_text(encoding="utf-8")


def register(sub: Subparsers) -> None:
    p = sub.add_parser("init", help="write a commented starter judgegraph.yaml for eval --config",
                       description="Write a commented starter config file; `judgegraph eval --config FILE` reads it.")
    p.add_argument("path", nargs="?", default="judgegraph.yaml", metavar="FILE",
                   help="where to write it (default %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing FILE (refused without it)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.is_dir():
        return fail(f"{path} is a directory; give a file path such as {path / 'judgegraph.yaml'}")
    if path.exists() and not args.overwrite:
        return fail(f"{path} already exists: pass --overwrite to replace it", EXIT_USAGE)
    path.write_text(STARTER, encoding="utf-8")
    chats = path.parent / "chats.jsonl"
    sample = not chats.exists()
    if sample:
        chats.write_bytes((STARTER_FILES / "chats.jsonl").read_bytes())
    print(f"wrote {path}" + (f" and {chats} (two sample conversations: replace them with yours)" if sample else "")
          + f": edit inputs and metrics, then run: judgegraph eval --config {path}")
    return EXIT_OK
