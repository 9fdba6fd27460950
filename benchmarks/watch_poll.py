"""What one ``judgegraph watch`` poll of a SqliteSaver file costs when nothing is left to judge: time and Python
memory (tracemalloc peak) against the number of threads, each thread one checkpoint of two messages.

Two polls per size: one where no thread is due yet (``--idle`` far away: the listing alone), and one where every
thread is due and already judged (the listing plus one look-up per thread in the on-disk judged set).

    python benchmarks/watch_poll.py                  # 1,000 / 4,000 / 16,000 threads
    python benchmarks/watch_poll.py --sizes 500 2000

Reading: the listing reads every checkpoint (``checkpointer.list``), so a poll's time grows with the checkpoints;
its memory holds one small record per thread during the poll (the judged set itself stays on disk).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from judgegraph.loaders.langgraph_threads import open_checkpointer
from judgegraph.runs.watch import CheckpointerThreads, Remembered, Watch


def write_threads(path: Path, n: int) -> None:
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": [HumanMessage(f"question {i}"), AIMessage(f"answer {i}")]}
        saver.put({"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}, cp, {"source": "loop", "step": 1}, {})
    conn.close()


def remember_all(path: Path, source: str, n: int) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE IF NOT EXISTS judged (source TEXT NOT NULL, thread_id TEXT NOT NULL, "
                   "tries INTEGER NOT NULL, done INTEGER NOT NULL, judged_at TEXT NOT NULL, "
                   "PRIMARY KEY (source, thread_id))")
        db.executemany("INSERT OR REPLACE INTO judged VALUES (?, ?, 1, 1, '')", ((source, f"t{i}") for i in range(n)))
    db.close()


def poll(watch: Watch) -> tuple[float, float, int]:
    """Seconds, tracemalloc peak (MB) and items yielded of one pass over ``watch.due()``."""
    tracemalloc.start()
    started = time.perf_counter()
    yielded = sum(1 for _ in watch.due())
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return seconds, peak, yielded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    args = ap.parse_args()
    print(f"{'threads':>8} {'poll (none due)':>16} {'peak MB':>8} {'poll (all judged)':>18} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            db, state = Path(tmp) / f"agent{n}.sqlite", Path(tmp) / f"state{n}.sqlite"
            write_threads(db, n)
            spec = f"sqlite:{db}"
            remember_all(state, spec, n)
            remembered = Remembered(state)
            with open_checkpointer(spec) as saver:
                source = CheckpointerThreads(saver, spec)
                plan = None  # due() reads neither the plan nor the results file
                far = Watch(source, plan, Path(tmp) / "out.jsonl", remembered, idle=1e9)  # type: ignore[arg-type]
                now = Watch(source, plan, Path(tmp) / "out.jsonl", remembered, idle=0)  # type: ignore[arg-type]
                s1, m1, y1 = poll(far)
                s2, m2, y2 = poll(now)
            remembered.close()
            assert y1 == 0 and y2 == 0, (y1, y2)
            print(f"{n:>8} {s1:>15.2f}s {m1:>8.1f} {s2:>17.2f}s {m2:>8.1f}")


if __name__ == "__main__":
    main()
