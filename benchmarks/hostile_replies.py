"""Hostile judge replies: how long one judgement takes and how much memory the
judging process needs, for a server that trickles, floods or bombs — each case
in a fresh process (the loopback server in another), so the peak memory
(ru_maxrss) is the judge's own.

    python benchmarks/hostile_replies.py            # every case
    python benchmarks/hostile_replies.py huge bomb  # some

Goal (issue 21, C.5 / C.6): under ``timeout=5`` every request ends by its
deadline (the old client held a one-byte-every-0.5-s reply 175 s, an endless
chunked one 41 s under 30); every reply is cut at ``max_reply_bytes`` (8 MiB)
decoded, so a 100 MB body, a gzip bomb or an endless body costs a few MB over
the baseline, not the 0.9 / 3 / 7 GB it did, and is a judge error naming the limit.
"""

from __future__ import annotations

import multiprocessing
import resource
import sys
import time
from typing import Any

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit

VERDICT = {"reason": "It answers the question.", "verdict": "yes"}
CASES = {
    "baseline": "a normal verdict",
    "trickle": "a valid reply, one byte every 0.5 s",
    "endless": "a chunked reply that never ends",
    "huge": "a valid reply padded to 100 MB",
    "bomb": "a valid reply padded to 1 GiB, gzipped (~1 MB on the wire)",
}


def reply(case: str) -> Any:
    from tests.kit.openai_server import endless, gzip_bomb, huge, structured, trickle

    return {"baseline": structured(VERDICT), "trickle": trickle(VERDICT, interval=0.5, max_seconds=300),
            "endless": endless(max_seconds=300), "huge": huge(VERDICT, 100_000_000),
            "bomb": gzip_bomb(VERDICT, 1 << 30)}[case]


def serve(case: str, conn: Any) -> None:
    from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, _gzip_padding, structured

    if case == "bomb":
        _gzip_padding(1 << 30)  # compressed once, before the clock starts
    # the first request (the judge's warm-up) is answered normally, every later one as the case says
    responder = ScriptedResponder([(lambda request: True, [structured(VERDICT), reply(case)])])
    with FakeOpenAIServer(responder) as server:
        conn.send(server.base_url)
        conn.recv()


def judge(base_url: str, conn: Any) -> None:
    from judgegraph.judges import resolve_judge
    from judgegraph.metrics.relevancy import create_turn_relevancy_metric

    judge = resolve_judge(model="gpt-4.1-mini", base_url=base_url, api_key="bench-key", timeout=5, max_retries=0,
                          cache=False)
    graph = create_turn_relevancy_metric(model=judge)
    conversation = {"id": "c", "turns": [{"role": "user", "content": "What is 2+2?"},
                                         {"role": "assistant", "content": "2+2 equals 4."}]}
    graph.invoke({"conversation": conversation})  # warm: imports, prompt files, tokenizer
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = graph.invoke({"conversation": conversation})["results"]["turn_relevancy"]
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    errors = [e.message for e in result.errors]
    conn.send((elapsed, before / 1024, peak / 1024, errors[0][:110] if errors else "verdict accepted"))


def run(case: str) -> None:
    server_end, server_child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(case, server_child), daemon=True)
    server.start()
    base_url = server_end.recv()
    judge_end, judge_child = multiprocessing.Pipe()
    judging = multiprocessing.Process(target=judge, args=(base_url, judge_child), daemon=True)
    judging.start()
    elapsed, before, peak, outcome = judge_end.recv()
    judging.join(30)
    server_end.send("done")
    server.join(10)
    if server.is_alive():
        server.terminate()
    print(f"{case:9} {elapsed:7.2f} s  peak RSS {peak:7.1f} MB (+{peak - before:6.1f} MB)  {outcome}")


def main(argv: list[str]) -> None:
    cases = argv or list(CASES)
    print("judge: timeout=5, max_retries=0, max_reply_bytes=8 MiB (default); one judgement after a warm-up")
    for case in cases:
        print(f"  {case}: {CASES[case]}")
    for case in cases:
        run(case)


if __name__ == "__main__":
    main(sys.argv[1:])
