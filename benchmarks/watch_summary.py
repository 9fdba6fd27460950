"""What the summary a ``judgegraph watch`` appends when it ends costs (:func:`judgegraph.runs.watch.file_summary`: the
whole results file read, each thread counted by its last judgement): time and Python memory (tracemalloc peak)
against the number of judged threads in the file. Each line is one thread's turn-relevancy result with five verdicts,
each with its transcript (a 3,000-character prompt, a 300-character reply), as ``--transcripts full`` keeps them.

    python benchmarks/watch_summary.py                  # 1,000 / 4,000 / 16,000 threads
    python benchmarks/watch_summary.py --sizes 500 2000

Reading: the file is read twice, a line at a time (the last line of each thread, then the counts), so the time grows
with the file's size and the memory with the number of threads (one id and one line number each), not with the file.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

from judgegraph.data.results import JudgeAttempt, MetricResult, Usage, Verdict
from judgegraph.runs.watch import file_summary


def line(thread: str) -> str:
    usage = Usage(calls=1, input_tokens=1000, output_tokens=60)
    verdicts = [Verdict(turns=[2 * i + 1], verdict="yes", reason="on topic " * 20, usage=usage, transcript=[
        JudgeAttempt(step="turn_relevancy/judge_turn", messages=[{"role": "user", "content": "p" * 3000}],
                     reply="q" * 300, usage=usage)]) for i in range(5)]
    result = MetricResult(key="turn_relevancy", conversation_id=thread, score=1.0, threshold=0.5, passed=True,
                          status="passed", reason="all on topic", judge="llm:judge", verdicts=verdicts,
                          usage=Usage(calls=5, input_tokens=5000, output_tokens=300))
    return json.dumps({"type": "conversation", "conversation_id": thread, "source": f"langgraph:bench#{thread}",
                       "results": {"turn_relevancy": result.model_dump(mode="json")}, "error": None}) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    args = parser.parse_args()
    print(f"{'threads':>8} {'file MB':>8} {'seconds':>8} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm.jsonl"  # the first read imports and builds what later ones reuse: not measured
        warm.write_text(line("t0"), encoding="utf-8")
        file_summary(warm)
        for n in args.sizes:
            path = Path(tmp) / f"watch-{n}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                fh.writelines(line(f"t{i}") for i in range(n))
            tracemalloc.start()
            started = time.perf_counter()
            summary = file_summary(path)
            took = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert summary.conversations == n and summary.usage.calls == 5 * n
            print(f"{n:>8} {path.stat().st_size / 1e6:>8.1f} {took:>8.2f} {peak / 1e6:>8.1f}")
            path.unlink()


if __name__ == "__main__":
    main()
