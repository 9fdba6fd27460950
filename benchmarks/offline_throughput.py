#!/usr/bin/env python
"""Offline judge throughput: windows/s on the labelled set, today's path vs the
batching encoder, on an idle machine and while CPU-bound processes run.

    python benchmarks/offline_throughput.py                 # 3 rounds, 1 busy process
    python benchmarks/offline_throughput.py --rounds 5 --busy 2 --modes today,batched,batched-1thread,batched-env
    python benchmarks/offline_throughput.py --conversations 30          # a third of the set: quicker

Every measurement is one fresh subprocess (model load and warm-up not timed)
that judges all of ``benchmarks/data/relevance_labelled.jsonl`` with turn
relevancy through judgegraph's runner (``evaluate_async``, as ``judgegraph eval``
does) and prints windows/s, process CPU per window and the encoder's counters.
Modes:

* ``today``: the offline judge before the batching encoder: every window embeds
  its own 2-3 texts in its own ``encode`` call, one window at a time under a
  lock, in a worker thread (``asyncio.to_thread``), BLAS threads at numpy's
  default (reproduced here by :class:`TodayJudge`);
* ``batched``: the offline judge as shipped (one BatchingEncoder per process,
  defaults: BLAS threads limited to 1 with threadpoolctl, ``encode_threads``
  = min(2, cores));
* ``batched-1thread``: the same with ``encode_threads=1``;
* ``batched-env``: the batching encoder without threadpoolctl, BLAS threads set
  by ``OPENBLAS_NUM_THREADS=1`` in the subprocess's environment instead.

Conditions: ``idle`` (nothing else started by this program; the load average
printed says how idle the machine really was) and ``busy`` (``--busy`` Python
busy-loop processes, each bounded in time, killed after the measurement).
Rounds interleave modes and conditions so that a shared machine's changing load
hits all of them alike; the figures are medians over rounds. The verdicts of
every mode are compared with ``today``'s (same verdicts, max score difference).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "relevance_labelled.jsonl"
MODES = ("today", "batched", "batched-1thread", "batched-env")
BUSY_CODE = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


# -- worker (one measurement, in its own process) ----------------------------------------------


def make_judge(mode: str):
    from judgegraph.embeddings.batching import BatchingEncoder
    from judgegraph.embeddings.minilm import get_default_embeddings
    from judgegraph.judges.base import Judge, JudgeOutcome
    from judgegraph.judges.offline import EmbeddingJudge
    from judgegraph.judges.offline_scoring import relevance_score

    class TodayJudge(EmbeddingJudge):
        """The offline judge before issue 13: one window at a time under a lock, its own
        encode call, run in a worker thread by Judge.ajudge, BLAS threads left alone."""

        def __init__(self) -> None:
            super().__init__(get_default_embeddings())
            self._lock = threading.Lock()

        def judge(self, request):
            inputs = request.inputs
            try:
                with self._lock:
                    score = relevance_score(
                        self.embeddings.encode, inputs["reply"], inputs["latest_user"], list(inputs["context"])
                    )
            except Exception as exc:  # noqa: BLE001
                return JudgeOutcome(None, f"{type(exc).__name__}: {exc}", 1)
            relevant = score >= self.threshold
            reason = f"embedding similarity {score:.2f}"
            value = request.schema.model_validate({"reason": reason, "verdict": "yes" if relevant else "no"})
            return JudgeOutcome(value, None, 1, score=score)

        ajudge = Judge.ajudge

    if mode == "today":
        return TodayJudge()
    model = get_default_embeddings()
    settings = {"batched": {}, "batched-1thread": {"encode_threads": 1}, "batched-env": {"blas_threads": None}}[mode]
    return EmbeddingJudge(model, encoder=BatchingEncoder.for_embeddings(model, **settings))


def worker(mode: str, conversations: int) -> None:
    import resource

    from judgegraph.data.conversation import Conversation
    from judgegraph.embeddings.minilm import get_default_embeddings
    from judgegraph.judges.base import JudgeCache
    from judgegraph.loaders import LoadedConversation
    from judgegraph.runs.runner import MetricPlan, evaluate_async

    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = rows[:conversations] if conversations > 0 else rows
    items = [
        LoadedConversation(Conversation.model_validate(r), f"{DATA.name}#{i + 1}", "judgegraph", {})
        for i, r in enumerate(rows)
    ]
    get_default_embeddings().load()

    def one_pass(conversations):
        judge = make_judge(mode)  # fresh judge, cache and encoder LRU: nothing carried over
        judge.cache = JudgeCache()
        plan = MetricPlan(["turn_relevancy"], judge)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        summary = asyncio.run(evaluate_async(conversations, plan))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        return judge, summary, wall, cpu

    one_pass(items[:6])  # warm-up: first forward passes, graph compilation
    judge, summary, wall, cpu = one_pass(items)
    windows = sum(r.details["windows"] for r in summary.results)
    verdicts = sorted(
        [o.conversation_id, v.window, v.verdict, v.score]
        for o in summary.outcomes for r in o.results.values() for v in r.verdicts
    )
    stats = judge._encoder.stats.as_dict() if getattr(judge, "_encoder", None) is not None else None
    print(json.dumps({
        "mode": mode, "windows": windows, "wall_s": wall, "windows_per_s": windows / wall,
        "cpu_ms_per_window": cpu / windows * 1000, "errors": summary.judge_errors,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "encoder": stats, "verdicts": verdicts,
    }))


# -- driver ------------------------------------------------------------------------------------


def measure(mode: str, busy: int, busy_seconds: float, conversations: int) -> dict:
    env = dict(os.environ)
    if mode == "batched-env":
        env["OPENBLAS_NUM_THREADS"] = "1"
    hogs = [
        subprocess.Popen([sys.executable, "-c", BUSY_CODE.format(seconds=busy_seconds)])
        for _ in range(busy)
    ]
    try:
        if hogs:
            time.sleep(0.5)  # let the busy loops get going
        load = os.getloadavg()[0]
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--worker", mode, "--conversations", str(conversations)],
            env=env, capture_output=True, text=True, timeout=1800, check=False,
        )
    finally:
        for hog in hogs:  # ours, by pid
            hog.kill()
            hog.wait()
    if proc.returncode != 0:
        raise SystemExit(f"{mode} worker failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load_avg"] = load
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=1, help="busy-loop processes in the busy condition")
    parser.add_argument("--busy-seconds", type=float, default=300.0, help="upper bound on each busy loop's life")
    parser.add_argument("--modes", default="today,batched", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--conversations", type=int, default=0, help="the first N conversations only (0: all 90)")
    parser.add_argument("--json", help="also write every measurement to this file")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.conversations)
        return 0

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown mode(s) {sorted(unknown)}")
    conditions = [("idle", 0)] + ([("busy", args.busy)] if args.busy > 0 else [])
    print(f"# {os.cpu_count()} cores; load average at start {os.getloadavg()[0]:.2f}; "
          f"busy = {args.busy} busy-loop process(es); {args.rounds} rounds, interleaved")
    runs: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else modes[::-1]
        for cond, busy in conditions:
            for mode in order:
                res = measure(mode, busy, args.busy_seconds, args.conversations)
                runs.setdefault((mode, cond), []).append(res)
                print(f"round {r + 1} {cond:4s} {mode:16s} {res['windows_per_s']:7.1f} windows/s  "
                      f"{res['cpu_ms_per_window']:6.1f} ms CPU/window  load {res['load_avg']:.1f}", flush=True)

    def med(mode: str, cond: str, key: str) -> float:
        return statistics.median(x[key] for x in runs[(mode, cond)])

    first = runs[(modes[0], "idle")][0]
    print(f"\nlabelled set: {first['windows']} windows; medians over {args.rounds} rounds\n")
    header = f"{'mode':16s} {'cond':5s} {'data/windows/s':>10s} {'CPU/window':>11s} {'peak RSS':>9s} {'batches':>8s} {'max batch':>9s}"
    print(header)
    print("-" * len(header))
    for mode in modes:
        for cond, _ in conditions:
            enc = runs[(mode, cond)][0]["encoder"] or {}
            print(f"{mode:16s} {cond:5s} {med(mode, cond, 'windows_per_s'):10.1f} "
                  f"{med(mode, cond, 'cpu_ms_per_window'):9.1f}ms {med(mode, cond, 'peak_rss_mb'):7.0f}MB "
                  f"{enc.get('batches', '-'):>8} {enc.get('max_batch', '-'):>9}")
    print()
    if "today" in modes:
        for mode in modes:
            if mode == "today":
                continue
            for cond, _ in conditions:
                ratio = med(mode, cond, "windows_per_s") / med("today", cond, "windows_per_s")
                target = " (target >= 1.5x)" if cond == "idle" else ""
                print(f"{mode} vs today, {cond}: {ratio:.2f}x windows/s{target}")
    if len(conditions) == 2:
        for mode in modes:
            slow = med(mode, "idle", "windows_per_s") / med(mode, "busy", "windows_per_s")
            print(f"{mode}: busy is {slow:.2f}x slower than idle (target <= 2x)")
    reference = runs[(modes[0], "idle")][0]["verdicts"]
    for (mode, cond), results in runs.items():
        for res in results:
            same = [a[:3] for a in res["verdicts"]] == [b[:3] for b in reference]
            diff = max((abs((a[3] or 0) - (b[3] or 0)) for a, b in zip(res["verdicts"], reference)), default=0.0)
            if not same or diff > 1e-5:
                print(f"VERDICTS DIFFER: {mode} {cond} (max score diff {diff:.2e})")
    diffs = [
        abs((a[3] or 0) - (b[3] or 0))
        for results in runs.values() for res in results for a, b in zip(res["verdicts"], reference)
    ]
    print(f"verdicts: every run equals {modes[0]}'s ({len(reference)} windows); "
          f"max score difference {max(diffs, default=0.0):.1e}")
    print(f"# load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({f"{m}/{c}": v for (m, c), v in runs.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
