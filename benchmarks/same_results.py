"""Verdicts and results files unchanged by a speed-up (issue 28): run ``judgegraph eval`` from two source trees
on the same conversations against one loopback server (per-window and ``--dense``), and compare the results
files' lines (in any order: conversations are written as they finish) with timing fields removed.

    python benchmarks/same_results.py /path/to/old/src            # this tree against the old one
    python benchmarks/same_results.py OLD_SRC --new-src NEW_SRC

Prints each mode's line count and any line that differs; exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _loopback import ROOT, parcel_conversations, with_server

from tests.kit.openai_server import FakeOpenAIServer, schema_responder

#: Fields that hold times or the run's own place and moment, not what was judged.
TIMING = {"latency_s", "started_at", "finished_at", "elapsed_s", "duration_s", "wall_s", "argv", "out", "pid",
          "created_at", "ended_at", "written_at", "time", "timestamp"}


def serve(conn) -> None:
    with FakeOpenAIServer(schema_responder) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send(server.calls["/v1/chat/completions"])


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def run(src: str, data: Path, out: Path, url: str, extra: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": src, "HOME": str(out.parent)}
    subprocess.run([sys.executable, "-m", "judgegraph.cli", "eval", str(data), "--model", "openai:bench-judge",
                    "--base-url", url, "--no-cache", "--no-progress", "-q", "--out", str(out), *extra],
                   env=env, check=False, capture_output=True, cwd=str(ROOT))
    # sorted: conversations are written as they finish, in any order
    return sorted(json.dumps(without_timing(json.loads(line)), sort_keys=True) for line in out.read_text().splitlines())


def compare(old_src: str, new_src: str, conversations: int) -> int:
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "chats.jsonl"
        data.write_text("".join(json.dumps(c) + "\n" for c in parcel_conversations(conversations, 4)))

        def both(url: str) -> list[tuple[str, list[str], list[str]]]:
            modes = {"per-window": ["--window-size", "2"], "dense": ["--window-size", "2", "--dense", "4"]}
            return [(mode, run(old_src, data, Path(tmp) / f"old-{mode}.jsonl", url, extra),
                     run(new_src, data, Path(tmp) / f"new-{mode}.jsonl", url, extra)) for mode, extra in modes.items()]

        results, _ = with_server(serve, (), both)
    for mode, old, new in results:
        same = old == new
        differ += not same
        print(f"{mode:<11} {len(old):>4} lines old, {len(new):>4} new: {'identical' if same else 'DIFFERENT'}"
              " (timing fields removed)")
        for a, b in zip(old, new):
            if a != b:
                print(f"  old: {a[:300]}\n  new: {b[:300]}")
                break
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old_src", help="the old tree's src directory (e.g. from git archive)")
    ap.add_argument("--new-src", default=str(ROOT / "src"))
    ap.add_argument("--conversations", type=int, default=30)
    args = ap.parse_args()
    return compare(args.old_src, args.new_src, args.conversations)


if __name__ == "__main__":
    sys.exit(main())
