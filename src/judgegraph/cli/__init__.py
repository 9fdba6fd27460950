"""The ``judgegraph`` command: one module per subcommand.

Each subcommand module has ``register(subparsers)``, which adds its parser and
sets ``run`` (a function ``(args) -> exit status``) as its default.

Exit statuses (the README's table): 0 passed, 1 a threshold failed, 2 usage,
3 could not judge (an environment error too), 4 a bug, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from importlib import import_module
from typing import TextIO

from .common import EXIT_ERRORS, EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, markup_safe, safe

__all__ = ["EXIT_ERRORS", "EXIT_FAILED", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]

#: Subcommand modules, in the order ``judgegraph --help`` lists them.
SUBCOMMANDS = ("eval", "rejudge", "report", "show", "diff", "pairwise", "agree", "stability", "align", "graph", "simulate",
               "cache", "metrics", "init", "export", "watch", "view")


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command's parser; given ``argv``, with only the subcommand it starts with (none for ``--version``),
    so a command imports its own module alone (``judgegraph eval --help`` loads no other subcommand)."""
    p = argparse.ArgumentParser(prog="judgegraph", description="Judge chatbot conversations with LangGraph metric graphs.")
    from .. import __version__

    p.add_argument("--version", action="version", version=f"judgegraph {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    first = (argv or [""])[0]
    for name in () if first == "--version" else (first,) if first in SUBCOMMANDS else SUBCOMMANDS:
        import_module(f"{__name__}.{name}").register(sub)
    return p


def _plain_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                   file: TextIO | None = None, line: str | None = None) -> None:
    """judgegraph's own warnings as one plain line (``warning: ...``), not Python's with its source line."""
    out = file or sys.stderr
    if issubclass(category, UserWarning) and os.sep + "judgegraph" + os.sep in filename:
        out.write(f"warning: {safe(str(message))}\n")
    else:
        out.write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser(argv).parse_args(argv)
    args.argv = argv  # the command line, for the run header (redacted there)
    for check in getattr(args, "checks", ()):  # the command's checks of its flags, before any work (exit 2)
        if bad := check(args):
            print(f"error: {safe(bad)}", file=sys.stderr)
            return EXIT_USAGE
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _plain_warning
            return int(args.run(args))
    except BrokenPipeError:  # e.g. `judgegraph graph ... | head`
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside a run: no traceback
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:  # the environment (a full disk, a path that cannot be written), not a bug
        from .common import os_error_message

        print(f"error: could not complete: {safe(os_error_message(exc))} (exit {EXIT_ERRORS})", file=sys.stderr)
        return EXIT_ERRORS
    except Exception as exc:  # noqa: BLE001 - an internal failure gets its own status, not a traceback
        from rich.console import Console

        Console(stderr=True, soft_wrap=True, highlight=False).print(
            f"[red]internal error:[/] {markup_safe(f'{type(exc).__name__}: {exc}')} "
            f"(a bug in judgegraph, exit {EXIT_INTERNAL}; set JUDGEGRAPH_DEBUG=1 for the traceback)")
        if os.environ.get("JUDGEGRAPH_DEBUG"):
            import traceback

            traceback.print_exc()
        return EXIT_INTERNAL
