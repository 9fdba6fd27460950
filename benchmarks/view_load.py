"""Load time of ``judgegraph view``'s runs page, and the server's memory, over a folder of runs.

For each folder size (default 50 and 500 runs of 200 conversations, made up by ``tests.kit.results.write_runs``
into a temporary folder, removed after), starts the real command (``judgegraph view DIR``, uvicorn, in a
subprocess on a free loopback port) and prints: the first load of ``/`` (every file read once), the median of the
next 5 loads (files unchanged: read from the server's memory), the page's size, the first label page, and the
server's peak resident memory (``VmHWM`` of /proc/PID/status). Prints figures; asserts nothing about time.

Run:  python benchmarks/view_load.py  [--runs 50 500] [--conversations 200] [--gets 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import _loopback

from tests.kit.results import write_runs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        size = len(response.read())
    return time.perf_counter() - start, size


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(runs: int, conversations: int, gets: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="judgegraph-view-bench-") as tmp:
        folder = Path(tmp) / "runs"
        made = time.perf_counter()
        paths = write_runs(folder, runs, conversations)
        made = time.perf_counter() - made
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_loopback.ROOT / "src"),
                                                                          os.environ.get("PYTHONPATH")]))}
        server = subprocess.Popen([sys.executable, "-m", "judgegraph.cli", "view", str(folder), "--labels",
                                   str(Path(tmp) / "labels.jsonl"), "--port", str(port)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None:
                        raise RuntimeError(server.stderr.read() if server.stderr else "the server stopped") from None
                    time.sleep(0.1)
            first, size = _get(base + "/")
            times = [_get(base + "/")[0] for _ in range(gets)]
            label, _ = _get(f"{base}/label?run={paths[0]}&annotator=bench")
            return {"runs": runs, "conversations": conversations, "files_mb": sum(p.stat().st_size for p in paths) / 1e6,
                    "write_s": made, "first_s": first, "median_s": statistics.median(times), "page_kb": size / 1e3,
                    "label_s": label, "peak_rss_mb": _peak_rss_mb(server.pid)}
        finally:
            server.kill()
            server.communicate(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[50, 500])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--gets", type=int, default=5)
    args = parser.parse_args()
    print(f"{'runs':>5} {'convs':>6} {'files MB':>9} {'first load s':>13} {'median of ' + str(args.gets) + ' s':>12} "
          f"{'page kB':>8} {'label page s':>13} {'server peak RSS MB':>19}")
    for runs in args.runs:
        m = measure(runs, args.conversations, args.gets)
        print(f"{m['runs']:>5} {m['conversations']:>6} {m['files_mb']:>9.1f} {m['first_s']:>13.2f} "
              f"{m['median_s']:>12.3f} {m['page_kb']:>8.0f} {m['label_s']:>13.2f} {m['peak_rss_mb']:>19.0f}",
              flush=True)


if __name__ == "__main__":
    main()
