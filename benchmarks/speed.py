"""judgegraph's own speed (issue 28): CPU per judge call, calls per second and RSS, per window and dense, and the
dry run's conversations per second, against a loopback OpenAI-compatible server in its own process (its CPU is not
counted: this process's is judgegraph's alone).

* start-up: the CPU of the imports and the first two conversations (the SDK imports much of itself on its first
  call), measured apart from the calls;
* ``per-window`` and ``dense N``: turn relevancy over ``--conversations`` × ``--exchanges`` through
  ``evaluate_async`` (what ``judgegraph eval`` runs), ``--concurrency`` calls in flight: at 0 ms a call, CPU per call
  (user + sys over the calls) and per window, calls/s; at ``--latency`` (100 ms), the wall time against the latency
  bound (calls × latency / in flight), as a ratio, and ``CPU x bound``: max(CPU, bound) / bound, the least ratio
  this process's own CPU allows on a core of its own (the wall ratio is the shared machine's too);
* ``2 workers`` (``--workers``, information): at ``--latency``, the per-window run with its conversations judged by
  worker processes (``scale/workers.py``, what ``judgegraph eval --workers 2`` runs): wall time against the same bound,
  CPU of this process and its workers together (``CPU x bound`` spreads it over the workers);
* the dry run: ``judgegraph eval FILE --dry-run`` over ``--dry-run-conversations`` conversations of two exchanges in a
  subprocess: conversations/s, CPU and peak RSS.

    python benchmarks/speed.py                               # 200 × 10 exchanges, dense 10, 16 in flight
    python benchmarks/speed.py --dry-run-conversations 200000 --json
    python benchmarks/speed.py --dry-run-only --dry-run-conversations 20000   # the dry run alone, .jsonl and .json

Targets (issue 28): <= 3 ms CPU per call per window, <= 1 ms per window dense, <= 1.2x the bound at 100 ms x 16,
200,000 conversations dry-run in under a minute. CPU figures on a shared machine vary from run to run: compare
figures of one run (benchmarks/judge_call_cpu.py prints the bare client's and the raw SDK's beside them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _loopback import ROOT, parcel_conversations, with_server  # benchmarks/ beside this script

START_CPU = time.process_time()

from judgegraph.data.conversation import Conversation  # noqa: E402
from judgegraph.judges import resolve_judge  # noqa: E402 - the imports are part of start-up
from judgegraph.loaders import LoadedConversation  # noqa: E402
from judgegraph.runs.runner import MetricPlan, evaluate_async  # noqa: E402
from judgegraph.scale import PlanSpec  # noqa: E402
from judgegraph.scale.run import aevaluate  # noqa: E402
from tests.kit.openai_server import FakeOpenAIServer, schema_responder  # noqa: E402


def serve(latency: float, conn) -> None:
    with FakeOpenAIServer(schema_responder, latency=latency) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send(server.calls["/v1/chat/completions"])


def cpu() -> float:
    """This process's user + sys CPU seconds."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def children_cpu() -> float:
    """The user + sys CPU seconds of this process's ended children (worker processes, once stopped)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def items(n: int, exchanges: int, tag: str) -> list[LoadedConversation]:
    return [LoadedConversation(Conversation.model_validate({**c, "id": f"{tag}-{c['id']}"}), f"bench#{i}", "judgegraph", {})
            for i, c in enumerate(parcel_conversations(n, exchanges))]


async def run_modes(args: argparse.Namespace, url: str, latency: float, startup: dict | None) -> list[dict]:
    judge = resolve_judge(model="openai:bench-judge", base_url=url, max_concurrency=args.concurrency, cache=False)
    plans = {"per-window": MetricPlan(["turn_relevancy"], judge, {"window_size": args.window_size}),
             f"dense {args.dense}": MetricPlan(["turn_relevancy"], judge, {"window_size": args.window_size,
                                                                            "dense": args.dense})}
    if startup is not None:  # the first conversations of each mode: imports, graphs, the SDK's first call
        for mode, plan in plans.items():
            await evaluate_async(items(2, 2, f"warm-{mode}"), plan)
        startup["cpu_s"] = cpu() - START_CPU
        startup["rss_mb"] = rss_mb()
    rows = []
    for mode, plan in plans.items():
        c0, t0 = cpu(), time.perf_counter()
        summary = await evaluate_async(items(args.conversations, args.exchanges, f"{mode}-{latency}"), plan,
                                       max_conversations=args.concurrency * 2)
        rows.append(row(args, mode, latency, summary, cpu() - c0, time.perf_counter() - t0))
    if latency and args.workers > 1:  # information: the run's judge work over worker processes (scale/workers.py)
        spec = PlanSpec(["turn_relevancy"], {"model": "openai:bench-judge", "base_url": url,
                                             "max_concurrency": args.concurrency, "cache": False},
                        {"window_size": args.window_size})
        mode = f"{args.workers} workers"
        c0, t0 = cpu() + children_cpu(), time.perf_counter()
        summary = await aevaluate(items(args.conversations, args.exchanges, f"{mode}-{latency}"), spec,
                                  workers=args.workers)
        rows.append(row(args, mode, latency, summary, cpu() + children_cpu() - c0, time.perf_counter() - t0,
                        processes=args.workers))
    return rows


def row(args: argparse.Namespace, mode: str, latency: float, summary: Any, used: float, wall: float, *,
        processes: int = 1) -> dict:
    """One printed row: a mode's run of ``summary.usage.calls`` calls in ``used`` CPU seconds (of ``processes``
    judging processes) and ``wall`` seconds."""
    calls, windows = summary.usage.calls, args.conversations * args.exchanges
    bound = calls * latency / args.concurrency
    return {"mode": mode, "latency_ms": round(latency * 1000), "calls": calls, "windows": windows,
            "judge_errors": summary.judge_errors, "cpu_s": round(used, 2), "wall_s": round(wall, 2),
            "cpu_ms_per_call": round(1000 * used / calls, 2) if calls else None,
            "cpu_ms_per_window": round(1000 * used / windows, 2),
            "calls_per_s": round(calls / wall, 1), "bound_s": round(bound, 2),
            "x_bound": round(wall / bound, 2) if bound else None,
            # the least ratio this process's own CPU allows (wall >= CPU on one core): the x-bound figure
            # on a core of its own, whatever else the machine runs (worker processes: their CPU spread over them)
            "cpu_x_bound": round(max(used / processes, bound) / bound, 2) if bound else None,
            "rss_mb": round(rss_mb())}


#: The command line in a child that prints its own peak RSS as it exits (/proc/self/status VmHWM: its own
#: memory's high-water mark). Not getrusage(RUSAGE_CHILDREN): a child's ru_maxrss keeps the high-water mark of
#: the process it was forked from across exec, so it said this process's own peak (the conversations it wrote).
PEAK = ("import atexit, runpy, sys; atexit.register(lambda: sys.stderr.write(next(line for line in "
        "open('/proc/self/status') if line.startswith('VmHWM:')))); sys.argv[0] = 'judgegraph'; "
        "runpy.run_module('judgegraph.cli', run_name='__main__')")


def dry_run(n: int, fmt: str = "jsonl") -> dict:
    """``judgegraph eval --dry-run`` over ``n`` conversations of two exchanges (a ``.jsonl`` file, or the same as
    one ``.json`` array), in a subprocess: its CPU, wall time and peak RSS (its own: :data:`PEAK`)."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / f"chats.{fmt}"
        with data.open("w") as f:  # a batch at a time: this process stays small
            f.write("[\n" if fmt == "json" else "")
            for start in range(0, n, 1000):
                batch = [json.dumps(c) for c in parcel_conversations(min(1000, n - start), 2, first=start)]
                f.write((",\n" if fmt == "json" and start else "") + (",\n" if fmt == "json" else "\n").join(batch)
                        + ("" if fmt == "json" else "\n"))
            f.write("\n]\n" if fmt == "json" else "")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PEAK, "eval", str(data), "--model",
                               "openai:gpt-4.1-mini", "--dry-run", "-m", "turn_relevancy", "-q"],
                              cwd=str(ROOT), capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"the dry run failed ({done.returncode}): {done.stderr[-2000:]}")
    peak = [line for line in done.stderr.splitlines() if line.startswith("VmHWM:")]
    return {"conversations": n, "format": fmt, "wall_s": round(wall, 1), "cpu_s": round(used, 1),
            "conversations_per_s": round(n / wall), "cpu_ms_per_conversation": round(1000 * used / n, 3),
            "peak_rss_mb": round(int(peak[-1].split()[1]) / 1024) if peak else None,
            "s_for_200000": round(200_000 * wall / n)}


def dry_runs(args: argparse.Namespace) -> list[dict]:
    """The dry run over each format asked, printed as it goes."""
    rows = []
    for fmt in ["jsonl", "json"] if args.dry_run_format == "both" else [args.dry_run_format]:
        dry = dry_run(args.dry_run_conversations, fmt)
        rows.append(dry)
        print(f"dry run (.{fmt}): {dry['conversations']} conversations of 2 exchanges in {dry['wall_s']} s wall, "
              f"{dry['cpu_s']} s CPU ({dry['cpu_ms_per_conversation']} ms a conversation, start-up included): "
              f"{dry['conversations_per_s']} conversations/s, peak RSS {dry['peak_rss_mb']} MB "
              + ("(200,000: measured)" if dry["conversations"] == 200_000 else
                 f"(200,000 would take about {dry['s_for_200000']} s)"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--exchanges", type=int, default=10)
    ap.add_argument("--window-size", type=int, default=3)
    ap.add_argument("--dense", type=int, default=10, help="windows per dense call (default 10)")
    ap.add_argument("--concurrency", type=int, default=16, help="calls in flight (default 16)")
    ap.add_argument("--latency", type=float, default=0.1, help="seconds per call for the bound (default 0.1)")
    ap.add_argument("--workers", type=int, default=2,
                    help="at --latency, also per window over this many worker processes (information; 1: no such row)")
    ap.add_argument("--dry-run-conversations", type=int, default=5000, help="0: no dry run (default 5000)")
    ap.add_argument("--dry-run-format", choices=["jsonl", "json", "both"], default="both",
                    help="the dry run's input: a .jsonl file, a .json array or both (default)")
    ap.add_argument("--dry-run-only", action="store_true", help="only the dry run (no server, no judge calls)")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    if args.dry_run_only:
        rows = dry_runs(args)
        if args.json:
            print(json.dumps({"dry_run": rows}))
        return 0

    startup: dict = {}
    rows, _ = with_server(serve, (0.0,), lambda url: asyncio.run(run_modes(args, url, 0.0, startup)))
    if args.latency > 0:
        slow, _ = with_server(serve, (args.latency,), lambda url: asyncio.run(run_modes(args, url, args.latency, None)))
        rows += slow
    print(f"start-up: {startup['cpu_s']:.2f} s CPU (imports and the first conversations), RSS {startup['rss_mb']:.0f} MB")
    print(f"{'mode':<10} {'latency':>7} {'calls':>6} {'errors':>6} {'cpu_s':>6} {'wall_s':>6} {'ms/call':>7} "
          f"{'ms/window':>9} {'calls/s':>7} {'x bound':>7} {'CPU x bound':>11} {'RSS MB':>6}")
    for r in rows:
        print(f"{r['mode']:<10} {r['latency_ms']:>5}ms {r['calls']:>6} {r['judge_errors']:>6} {r['cpu_s']:>6} "
              f"{r['wall_s']:>6} {r['cpu_ms_per_call']:>7} {r['cpu_ms_per_window']:>9} {r['calls_per_s']:>7} "
              f"{r['x_bound'] if r['x_bound'] is not None else '-':>7} "
              f"{r['cpu_x_bound'] if r['cpu_x_bound'] is not None else '-':>11} {r['rss_mb']:>6}")
    out: dict = {"startup": startup, "modes": rows}
    if args.dry_run_conversations:
        out["dry_run"] = dry_runs(args)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
