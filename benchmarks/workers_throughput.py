"""Judge calls per second with 1 and 2 worker processes, and the wall time of
a run against the bound ``calls × latency / concurrency``.

The loopback OpenAI-compatible server runs in its own process (as a real LLM
endpoint would); the judge side is this process plus its workers. Two parts,
one run:

1. Throughput: 5 ms latency per call, concurrency 64 (the total over all
   workers). Judge calls/s and client CPU per call (this process + workers,
   from /proc) for one process (``--workers 1``, today's path) and 2 workers,
   each after its workers have started and warmed up. Target: 2 workers >= 1.7x.
2. The bound: 100 ms latency, concurrency 16, 2,000 windows (200 conversations
   x 10 exchanges), with 2 workers: wall with and without the workers' start,
   as a ratio of the bound. Target <= 1.2.
3. The offline judge: windows/s with 1 and 2 workers (what ``--workers auto``
   picks for it).

    python benchmarks/workers_throughput.py                 # both parts, ~1 minute
    python benchmarks/workers_throughput.py --calls 300     # a shorter part 1

Bounded: part 1 sends ``--calls`` windows per configuration, part 2 2,000,
part 3 ``--offline-windows`` per configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _loopback as loopback
from relevancy_throughput import make_conversations, responder

from judgegraph.runs.runner import evaluate_async
from judgegraph.scale import PlanSpec, WorkerPool
from tests.kit.openai_server import FakeOpenAIServer

TICK = os.sysconf("SC_CLK_TCK")


def serve(latency: float, nodelay: bool, conn) -> None:
    # nodelay: replies go out at once, as real endpoints send them (uvicorn and nginx set TCP_NODELAY); without it
    # Nagle's algorithm holds each reply's body until the client's delayed ACK, ~40 ms per call that are not the judge's
    with FakeOpenAIServer(responder, latency=latency, nodelay=nodelay) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send(server.calls["/v1/chat/completions"])


def cpu_s(pid: int) -> float:
    """user + system CPU seconds of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def measure(spec: PlanSpec, items, workers: int, concurrency: int, *, in_process: bool | None = None) -> dict:
    """One configuration: start (and warm up) the workers, then time the run alone.
    ``workers=1`` runs in this process (today's path) unless ``in_process=False``."""
    t_start = time.perf_counter()
    plan = spec.build()
    warm = make_conversations(10_000 + workers, 1)[10_000:]  # one per worker, texts of their own
    run_kw: dict[str, Any] = {"max_conversations": max(4, concurrency * 2)}
    if in_process is None:
        in_process = workers == 1
    if in_process:
        await evaluate_async(warm, plan, **run_kw)
        pids: list[int] = []
        t0, c0 = time.perf_counter(), time.process_time()
        summary = await evaluate_async(items, plan, **run_kw)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        startup = 0.0
        mem = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    else:
        async with WorkerPool(spec, workers=workers) as pool:
            pids = pool.pids
            await evaluate_async(warm, plan, judge_one=pool.judge, **run_kw)
            startup = time.perf_counter() - t_start
            w0 = sum(cpu_s(p) for p in pids)
            t0, c0 = time.perf_counter(), time.process_time()
            summary = await evaluate_async(items, plan, judge_one=pool.judge, **run_kw)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            cpu += sum(cpu_s(p) for p in pids) - w0
            mem = max(rss_mb(p) for p in pids)
    calls = summary.usage.calls
    windows = sum(len(r.verdicts) for r in summary.results)
    return {"windows": windows, "windows_per_s": windows / wall, "in_process": in_process, "workers": workers, "conversations": len(items), "calls": calls, "errors": summary.judge_errors + sum(
        1 for o in summary.outcomes if o.error), "wall_s": wall, "startup_s": startup, "calls_per_s": calls / wall,
        "cpu_ms_per_call": 1000 * cpu / calls if calls else float("nan"), "peak_rss_mb_per_process": mem}


def with_server(latency: float, fn, nodelay: bool = True):
    return loopback.with_server(serve, (latency, nodelay), fn)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=600, help="windows judged per configuration in part 1 (default 600)")
    ap.add_argument("--skip-bound", action="store_true", help="no part 2")
    ap.add_argument("--nagle", action="store_true",
                    help="leave the loopback server's sockets as they are (replies held ~40 ms by Nagle + delayed ACK)")
    ap.add_argument("--offline-windows", type=int, default=100,
                    help="part 3: windows judged by the offline judge in process, with 1 and 2 workers "
                         "(default 100; 0 skips)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; loopback server "
          f"{'as it is (Nagle on)' if args.nagle else 'replying at once (TCP_NODELAY)'} in its own process")

    # Part 1: throughput at 5 ms, concurrency 64.
    conc = 64
    items = make_conversations(max(1, args.calls // 10), 10)

    def part1(base_url: str):
        spec = PlanSpec(["turn_relevancy"], {"model": "bench-judge", "base_url": base_url, "max_concurrency": conc,
                                             "cache": False},
                        {"window_size": 10})
        return [asyncio.run(measure(spec, items, w, conc)) for w in (1, 2)]

    results, _ = with_server(0.005, part1, not args.nagle)
    print("\n1) latency 5 ms, concurrency 64 (total)")
    print(f"{'workers':>7} {'calls':>6} {'errors':>6} {'wall s':>7} {'calls/s':>8} {'CPU ms/call':>11} {'start s':>7} "
          f"{'peak RSS MB/proc':>16}")
    for r in results:
        print(f"{r['workers']:>7} {r['calls']:>6} {r['errors']:>6} {r['wall_s']:>7.2f} {r['calls_per_s']:>8.1f} "
              f"{r['cpu_ms_per_call']:>11.2f} {r['startup_s']:>7.2f} {r['peak_rss_mb_per_process']:>16.0f}")
    speedup = results[1]["calls_per_s"] / results[0]["calls_per_s"]
    print(f"2 workers / 1: {speedup:.2f}x calls/s (target >= 1.7x: {'MET' if speedup >= 1.7 else 'NOT MET'})")
    ok = speedup >= 1.7

    if not args.skip_bound:
        latency, conc = 0.1, 16
        items = make_conversations(200, 10)

        def part2(base_url: str):
            spec = PlanSpec(["turn_relevancy"], {"model": "bench-judge", "base_url": base_url,
                                                 "max_concurrency": conc, "cache": False}, {"window_size": 10})
            return asyncio.run(measure(spec, items, 2, conc))

        r, served = with_server(latency, part2, not args.nagle)
        bound = r["calls"] * latency / conc
        ratio = r["wall_s"] / bound
        ratio_all = (r["wall_s"] + r["startup_s"]) / bound
        print(f"\n2) latency 100 ms, concurrency 16, {r['calls']} windows, 2 workers ({r['errors']} errors, "
              f"{served} calls served incl. warm-up)")
        print(f"bound {bound:.2f} s; wall {r['wall_s']:.2f} s = {ratio:.3f}x the bound "
              f"(with the workers' start and warm-up {r['startup_s']:.2f} s: {ratio_all:.3f}x); "
              f"client CPU {r['cpu_ms_per_call']:.2f} ms/call")
        print(f"target (ratio <= 1.2): {'MET' if ratio <= 1.2 else 'NOT MET'}")
        ok = ok and ratio <= 1.2
    if args.offline_windows:
        items = make_conversations(max(1, args.offline_windows // 5), 5)
        spec = PlanSpec(["turn_relevancy"], {"cache": False}, {"window_size": 10})
        print("\n3) the offline judge (no server), windows/s after each worker loaded its model; numpy BLAS threads:"
              " this process as set, each worker cores/workers")
        off = [asyncio.run(measure(spec, items, w, 16, in_process=p)) for w, p in ((1, True), (1, False), (2, False))]
        for r in off:
            where = "in this process" if r["in_process"] else f"{r['workers']} worker process(es)"
            print(f"{where}: {r['windows']} windows in {r['wall_s']:.2f} s = {r['windows_per_s']:.1f} "
                  f"windows/s ({r['errors']} errors; start and model load {r['startup_s']:.2f} s)")
        print(f"2 workers / 1 worker: {off[2]['windows_per_s'] / off[1]['windows_per_s']:.2f}x; "
              f"2 workers / this process: {off[2]['windows_per_s'] / off[0]['windows_per_s']:.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f} at the end (the machine is shared: other processes take CPU too)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
