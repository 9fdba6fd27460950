"""Flat memory: RSS of a `judgegraph eval` run over many short conversations.

Starts the loopback OpenAI-compatible server (a few milliseconds of latency per
call), writes N short conversations (one exchange each: one judge call), runs
the real CLI as a subprocess on them and samples its resident memory
(/proc/PID/status VmRSS, summed over the CLI and its ``--workers`` processes)
as the results file grows. Prints RSS against progress
and the growth from the end of the first quarter of the run to the end.

    python benchmarks/memory_flat.py                 # 100,000 conversations
    python benchmarks/memory_flat.py --n 20000 --latency 0.003 --concurrency 32

Goal (issue 10 §6): growth under 20 % from the first quarter to the end.

``--in-process cache|nocache`` runs the runner in this process instead, with no
HTTP (the dry-run recording judge answers at once), with the judge's in-memory
answer cache on or off: it separates the runner's own memory from the cache's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit

from tests.kit.openai_server import FakeOpenAIServer, schema_responder


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def tree_rss_kb(pid: int) -> int | None:
    """RSS of ``pid`` and every process below it (``--workers`` children too)."""
    own = rss_kb(pid)
    if own is None:
        return None
    total = own
    for task in Path(f"/proc/{pid}").glob("task/*/children"):
        try:
            children = task.read_text().split()
        except OSError:
            continue
        for child in children:
            total += tree_rss_kb(int(child)) or 0
    return total


def write_chats(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"c{i:06d}", "turns": [
                {"role": "user", "content": f"Where is my order {i}?"},
                {"role": "assistant", "content": f"Order {i} ships on Monday."}]}) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="conversations (default 100,000)")
    ap.add_argument("--latency", type=float, default=0.003, help="server latency per call, seconds (default 0.003)")
    ap.add_argument("--concurrency", type=int, default=32, help="judge calls in flight (default 32)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between RSS samples")
    ap.add_argument("--max-seconds", type=float, default=3600, help="stop the run after this long (default 3600)")
    ap.add_argument("--in-process", choices=["cache", "nocache"],
                    help="the runner in this process, no HTTP, judge answer cache on/off")
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `judgegraph eval` arguments")
    args = ap.parse_args()
    if args.in_process:
        return in_process(args.n, cache=args.in_process == "cache")

    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(schema_responder, latency=args.latency) as server:
        chats, out = Path(tmp) / "chats.jsonl", Path(tmp) / "results.jsonl"
        write_chats(chats, args.n)
        cmd = [sys.executable, "-m", "judgegraph.cli", "eval", str(chats), "--model", "openai:gpt-4.1-mini",
               "--base-url", server.base_url, "--concurrency", str(args.concurrency), "--no-progress", "-q",
               "--out", str(out), "--cache", str(Path(tmp) / "judge-cache.sqlite"), *args.extra]
        env = {**os.environ, "OPENAI_API_KEY": ""}
        start = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples: list[tuple[float, int, int]] = []  # (seconds, conversations written, RSS KB)
        stopped = False
        while proc.poll() is None:
            time.sleep(args.interval)
            kb = tree_rss_kb(proc.pid)
            done = out.read_bytes().count(b'{"type": "conversation"') if out.exists() else 0  # not the header
            if kb is not None:
                samples.append((time.monotonic() - start, done, kb))
            if time.monotonic() - start > args.max_seconds:
                proc.send_signal(2)  # Ctrl-C: a clean stop, the summary of what finished
                stopped = True
                break
        stdout, stderr = proc.communicate(timeout=120)
        wall = time.monotonic() - start
        calls = server.calls["/v1/chat/completions"]

    written = samples[-1][1] if samples else 0
    print(f"judgegraph eval: {args.n} conversations, latency {args.latency * 1000:.0f} ms, "
          f"concurrency {args.concurrency}; exit {proc.returncode}{' (stopped at --max-seconds)' if stopped else ''}")
    print(f"wall {wall:.1f} s, {calls} judge calls, {calls / wall:.0f} calls/s")
    print(stdout.strip().splitlines()[-1] if stdout.strip() else stderr.strip()[-500:])
    print(f"{'t (s)':>8} {'written':>9} {'RSS (MB)':>9}")
    step = max(1, len(samples) // 20)
    for t, done, kb in samples[::step] + ([samples[-1]] if samples and (len(samples) - 1) % step else []):
        print(f"{t:8.1f} {done:9d} {kb / 1024:9.1f}")
    final = max(done for _, done, _ in samples) if samples else 0
    quarter = next(((t, d, kb) for t, d, kb in samples if d >= final / 4), None)
    if quarter and samples:
        last_kb = samples[-1][2]
        growth = (last_kb - quarter[2]) / quarter[2] * 100
        peak = max(kb for _, _, kb in samples)
        print(f"RSS at the first quarter ({quarter[1]} written): {quarter[2] / 1024:.1f} MB; at the end ({written}): "
              f"{last_kb / 1024:.1f} MB; growth {growth:+.1f} % (goal < 20 %); peak {peak / 1024:.1f} MB")
    return 0


def in_process(n: int, *, cache: bool) -> int:
    import asyncio

    from judgegraph.cost.dryrun import DryRunJudge
    from judgegraph.runs.runner import MetricPlan, evaluate_to_file

    marks: list[tuple[int, int]] = []
    done = 0

    def counted(_outcome) -> None:
        nonlocal done
        done += 1
        if done % max(1, n // 8) == 0:
            marks.append((done, rss_kb(os.getpid()) or 0))

    judge = DryRunJudge("llm:gpt-4.1-mini")
    if not cache:
        judge.cache = None
    with tempfile.TemporaryDirectory() as tmp:
        chats = Path(tmp) / "chats.jsonl"
        write_chats(chats, n)
        start = time.monotonic()
        asyncio.run(evaluate_to_file([str(chats)], MetricPlan(["turn_relevancy"], judge), Path(tmp) / "r.jsonl",
                                     keep_outcomes=False, on_outcome=counted, max_conversations=64))
        wall = time.monotonic() - start
    print(f"in process, no HTTP, judge answer cache {'on' if cache else 'off'}: {n} conversations in {wall:.0f} s")
    print(f"{'written':>9} {'RSS (MB)':>9}")
    for d, kb in marks:
        print(f"{d:9d} {kb / 1024:9.1f}")
    quarter = next(kb for d, kb in marks if d >= n / 4)
    print(f"growth from the first quarter to the end: {(marks[-1][1] - quarter) / quarter * 100:+.1f} % (goal < 20 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
