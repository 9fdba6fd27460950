"""``judgegraph view [DIR|FILE...]``: the local viewer (docs/guide/view.md)."""

from __future__ import annotations

import argparse
import secrets

from .common import EXIT_ERRORS, EXIT_OK, fail


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("view", help="browse runs, label judged turns and see agreement in a local web page")
    p.add_argument("paths", nargs="*", default=["."], metavar="DIR|FILE",
                   help="results files, or folders searched recursively for them (default: .)")
    p.add_argument("--labels", default="labels.jsonl", metavar="FILE",
                   help="labels are appended here, in the format agree and align read (default %(default)s)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default %(default)s); any other needs the token printed at start")
    p.add_argument("--port", type=int, default=8765, help="port (default %(default)s)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..view.app import LOOPBACK, Settings, create_app

    if not 0 <= args.port < 65536:
        return fail(f"--port {args.port}: not a port")
    token = None if args.host == LOOPBACK else secrets.token_urlsafe(24)
    settings = Settings(paths=args.paths, labels=args.labels, token=token)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"judgegraph view: http://{host}:{args.port}/" + (f"?token={token}" if token else ""), flush=True)
    try:
        uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level="warning")
    except SystemExit as stop:  # uvicorn exits 1 when it cannot listen (the port in use): an environment error
        if stop.code:
            return fail(f"could not serve on {host}:{args.port} (said above)", EXIT_ERRORS)
    return EXIT_OK
