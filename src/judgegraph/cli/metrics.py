"""``judgegraph metrics``: list the metrics."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import EXIT_OK

if TYPE_CHECKING:
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("metrics", help="list the metrics")
    p.set_defaults(run=run)


def run(_: argparse.Namespace) -> int:
    from ..metrics import registry

    for spec in registry().values():
        print(f"{spec.name.replace('_', '-'):28} {spec.summary}")
    return EXIT_OK
