"""Hostile input files: how big they are, how long loading takes, how much
memory it needs, and what is reported — each in a fresh process, so the peak
memory (ru_maxrss) is the file's own.

    python benchmarks/input_limits.py            # the big cases at full size: a 1 GB line, a 3 GB file://
    python benchmarks/input_limits.py --scale 0.1  # the big cases at a tenth of that

Goal (issue 8): every case loads the good record, refuses the bad one with its
line and field, and stays far below the memory the input would cost if followed
(a billion-laughs file expands to ~10^10 characters, 12+ GB).

Goal (issue 21 C.10): a 1 GB ``.jsonl`` line without a newline, and a promptfoo
``rubricPrompt: file://`` naming a 3 GB file, are refused holding at most the
record limit (10 MB) of them: before, the line took 2.2 GB and the file 3.2 GB.
Both big files are sparse (their size without using the disk): the line is
read through, chunk by chunk; the file is refused by its size, unread.

Goal (issue 21 C.16): a 200,000-conversation ``.json`` list is read one record
at a time, costing what its JSONL twin costs (before: 373 MB against 126 MB in a
run). Measured here by streaming every record through ``iter_records``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path

GOOD = json.dumps({"id": "ok", "turns": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})
GOOD_YAML = "- id: ok\n  turns: [{role: user, content: q}, {role: assistant, content: a}]\n"


def laughs() -> str:
    anchors = ['a0: &a0 "lololololol"'] + [
        f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return GOOD_YAML + "- id: lol\n  metadata:\n" + "".join(f"    {a}\n" for a in anchors)


CASES: dict[str, tuple[str, str, float]] = {  # name: (file name, content, characters if followed)
    "billion laughs (YAML aliases)": ("lol.yaml", laughs(), 11 * 10**9),
    "JSONL nested 100,000 deep": ("deep.jsonl", GOOD + "\n" + '{"metadata": ' + "[" * 100_000 + "]" * 100_000 + "}\n", 0),
    "JSON list, one record 100,000 deep": ("deep.json", "[" + GOOD + ', {"metadata": ' + "[" * 100_000
                                           + "]" * 100_000 + "}]", 0),
    "YAML nested 1,200 deep (flow)": ("deep.yaml", GOOD_YAML + "- metadata: " + "[" * 1200 + "]" * 1200 + "\n", 0),
    "YAML 1,000,000 '[' (absurd)": ("absurd.yaml", GOOD_YAML + "- metadata: " + "[" * 1_000_000 + "\n", 0),
    "lone surrogate": ("sur.jsonl", GOOD + "\n" + '{"turns": [{"role": "user", "content": "\\udfff"}]}\n', 0),
}


def sparse(path: Path, head: bytes, size: int) -> None:
    """``head`` then NUL bytes up to ``size`` bytes, no newline: sparse, so no disk is used."""
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)


def big_cases(folder: Path, scale: float) -> dict[str, tuple[Path, float]]:
    """The cases made on disk: name -> (file to load, bytes it would cost if read whole)."""
    line = int(1e9 * scale)
    jsonl = folder / "long-line.jsonl"
    sparse(jsonl, (GOOD + '\n{"id": "big", "metadata": "').encode(), line)
    blob = int(3e9 * scale)
    sparse(folder / "huge.txt", b"", blob)
    yml = folder / "promptfooconfig.yaml"
    yml.write_text("tests:\n  - vars: {prompt: hi}\n    output: hello\n    assert:\n"
                   "      - {type: conversation-relevance, rubricPrompt: 'file://huge.txt'}\n")
    return {f"JSONL line of {line / 1e9:g} GB, no newline": (jsonl, line),
            f"file:// to a {blob / 1e9:g} GB file": (yml, blob)}


def stream(path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from judgegraph.loaders import InputError, iter_records

    start, cpu = time.perf_counter(), time.process_time()
    n = sum(1 for i in iter_records(path) if not isinstance(i, InputError))  # each dropped once counted, as a run does
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((wall, cpu, peak_mb, n))


def run_case(path: str, timeout: float = 600) -> tuple[float, float, float, list[str], list[str]] | None:
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=measure, args=(path, q))
    p.start(), p.join(timeout)
    if p.is_alive():
        p.terminate()
        return None
    return q.get()  # type: ignore[no-any-return]


def measure(path: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from judgegraph.loaders import load_file

    start, cpu = time.perf_counter(), time.process_time()
    res = load_file(path)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((wall, cpu, peak_mb, [c.conversation.id for c in res.conversations], [str(e)[-90:] for e in res.errors]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="size of the big cases: 1 = a 1 GB line, a 3 GB file")
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    baseline_q = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "one.jsonl"
        empty.write_text(GOOD + "\n")
        p = ctx.Process(target=measure, args=(str(empty), baseline_q))
        p.start(), p.join()
        base = baseline_q.get()[2]
        print(f"baseline: one good record, peak RSS {base:.0f} MB\n")
        print(f"{'case':38} {'file':>9} {'if followed':>12} {'wall s':>7} {'cpu s':>6} {'peak MB':>8} {'+MB':>5}  loaded / refused")
        for name, (fname, content, followed) in CASES.items():
            path = Path(tmp) / fname
            path.write_text(content)
            q = ctx.Queue()
            p = ctx.Process(target=measure, args=(str(path), q))
            p.start(), p.join(120)
            if p.is_alive():
                p.terminate()
                print(f"{name:38} did not finish in 120 s")
                continue
            wall, cpu, peak, ok, errors = q.get()
            size = f"{len(content.encode()):,}"
            follow = f"{followed:.1e}" if followed else "—"
            print(f"{name:38} {size:>9} {follow:>12} {wall:7.2f} {cpu:6.2f} {peak:8.0f} {peak - base:5.0f}  {ok} / "
                  f"{errors[0] if errors else '-'}")
        for name, (path, followed) in big_cases(Path(tmp), args.scale).items():
            got = run_case(str(path))
            if got is None:
                print(f"{name:38} did not finish in 600 s")
                continue
            wall, cpu, peak, ok, errors = got
            print(f"{name:38} {path.stat().st_size:>9,} {followed:12.1e} {wall:7.2f} {cpu:6.2f} {peak:8.0f} "
                  f"{peak - base:5.0f}  {ok} / {errors[0] if errors else '-'}")
        n = int(200_000 * args.scale)
        print(f"\n{n:,} conversations streamed through iter_records (none kept):")
        # written a line at a time: this process stays small (a spawned child starts at its size)
        with (Path(tmp) / "many.jsonl").open("w") as jsonl, (Path(tmp) / "many.json").open("w") as js:
            js.write("[\n")
            for i in range(n):
                row = json.dumps({"id": f"c{i}", "turns": [{"role": "user", "content": f"question {i} " * 8},
                                                           {"role": "assistant", "content": f"answer {i} " * 20}]})
                jsonl.write(row + "\n")
                js.write(row + (",\n" if i < n - 1 else "\n]\n"))
        for fname in ("many.jsonl", "many.json"):
            q = ctx.Queue()
            p = ctx.Process(target=stream, args=(str(Path(tmp) / fname), q))
            p.start(), p.join(600)
            wall, cpu, peak, count = q.get()
            print(f"  {fname:11} {(Path(tmp) / fname).stat().st_size / 1e6:7.1f} MB  {count:,} records  "
                  f"{wall:6.2f} s  peak {peak:5.0f} MB (+{peak - base:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
