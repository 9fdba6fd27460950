"""Size and speed of the HTML report at 1,000 conversations.

Writes a made-up run (``tests.kit.results``: 8 turns per
conversation, 2 metrics, 4 turn verdicts each with its judge transcript, a
failing reply, a judge error with re-asks, replies holding markup) and prints,
for the report with and without transcripts: file size, wall and CPU time of
``write_report`` (reading the results and the input file, drawing the graph,
writing the page), peak Python memory; and, when Debian's chromium and
chromedriver are installed, the browser's time to show the table, to open a
conversation and to apply a filter.

Run:  python benchmarks/html_report.py  [--n 1000] [--turns 8]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit

from judgegraph.outputs.html import write_report
from tests.kit.results import write_sample_run


def _generate(directory: Path, n: int, turns: int, transcripts: bool) -> dict[str, float]:
    chats, results = write_sample_run(directory, n, turns_per_conversation=turns, transcripts=transcripts)
    out = directory / "report.html"
    write_report(results, directory / "warmup.html", inputs=[chats])  # imports, first graph build
    wall, cpu = time.perf_counter(), time.process_time()
    made = write_report(results, out, inputs=[chats])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    tracemalloc.start()  # a second run for memory: tracing slows the first one's figures down
    write_report(results, out, inputs=[chats])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"path": str(out), "results_mb": results.stat().st_size / 1e6, "html_mb": made.bytes / 1e6,
            "wall_s": wall, "cpu_s": cpu, "peak_mb": peak / 1e6, "conversations": made.conversations}


def _browser(path: str) -> dict[str, float] | None:
    if not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    profile = tempfile.mkdtemp(prefix="judgegraph-bench-")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    try:
        t = time.perf_counter()
        driver.get(Path(path).resolve().as_uri())  # returns after the load event: the table is built by then
        rows = len(driver.find_elements(By.CSS_SELECTOR, "#conversations-table tr.row"))
        load = time.perf_counter() - t
        t = time.perf_counter()
        driver.find_element(By.CSS_SELECTOR, "#conversations-table tr.row[data-id='conv-0003']").click()
        driver.find_element(By.CSS_SELECTOR, "tr.detail .turn")
        open_s = time.perf_counter() - t
        t = time.perf_counter()
        driver.find_element(By.ID, "filter-failed").click()
        shown = driver.find_element(By.ID, "shown").text
        filter_s = time.perf_counter() - t
        heap = driver.execute_script("return performance.memory ? performance.memory.usedJSHeapSize : null")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return {"rows": rows, "load_s": load, "open_s": open_s, "filter_s": filter_s, "shown": shown,
            "heap_mb": (heap or 0) / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="conversations (default 1000)")
    ap.add_argument("--turns", type=int, default=8, help="turns per conversation (default 8)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for transcripts in (True, False):
            d = Path(tmp) / ("with" if transcripts else "without")
            f = _generate(d, args.n, args.turns, transcripts)
            print(f"{f['conversations']} conversations, {args.turns} turns each, transcripts "
                  f"{'on' if transcripts else 'off'}: results {f['results_mb']:.2f} MB -> report {f['html_mb']:.2f} MB "
                  f"({f['html_mb'] * 1e3 / f['conversations']:.1f} KB per conversation); write_report wall "
                  f"{f['wall_s']:.2f} s, CPU {f['cpu_s']:.2f} s ({f['cpu_s'] * 1e3 / f['conversations']:.2f} ms "
                  f"per conversation), peak Python memory {f['peak_mb']:.0f} MB")
            b = _browser(f["path"])
            if b is None:
                print("  browser: skipped (no /usr/bin/chromium + /usr/bin/chromedriver)")
            else:
                print(f"  headless Chromium: {b['rows']} rows shown {b['load_s']:.2f} s after navigation; a "
                      f"conversation opens in {b['open_s'] * 1e3:.0f} ms; 'failed only' filter {b['filter_s'] * 1e3:.0f} ms "
                      f"({b['shown']}); JS heap {b['heap_mb']:.0f} MB")


if __name__ == "__main__":
    main()
