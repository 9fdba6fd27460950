"""Throughput of turn relevancy through the real langchain-openai client path.

Generates conversations, serves judge replies from the loopback
OpenAI-compatible server with a fixed latency per call, runs them through
judgegraph's runner (the same path as `judgegraph eval`), and prints judge
calls, duplicate calls, tokens, wall time, peak memory and wall time as a
ratio of the bound ``calls × latency / concurrency``.

    python benchmarks/relevancy_throughput.py                       # 200 × 10, 0.5 s, concurrency 16
    python benchmarks/relevancy_throughput.py --conversations 50 --latency 0.1

Target (issue 2): ratio <= 1.2 at concurrency 16, and exactly one call per window.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import resource
import sys
import time
from collections import Counter

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit
from langchain_openai import ChatOpenAI

from judgegraph.data.conversation import Conversation
from judgegraph.judges.limiter import CallLimiter
from judgegraph.judges.llm import LLMJudge
from judgegraph.loaders import LoadedConversation
from judgegraph.runs.runner import MetricPlan, evaluate_async
from tests.kit.openai_server import FakeOpenAIServer, structured

TOPICS = ["refund", "password", "delivery", "invoice", "upgrade", "warranty", "roaming", "booking"]


def make_conversations(n: int, exchanges: int) -> list[LoadedConversation]:
    out = []
    for c in range(n):
        turns = []
        for e in range(exchanges):
            topic = TOPICS[(c + e) % len(TOPICS)]
            turns.append({"role": "user", "content": f"Conversation {c}, question {e}: how does the {topic} process work for order {c * 100 + e}?"})
            reply = f"For order {c * 100 + e}, the {topic} process takes three steps: check, confirm, done."
            if (c * 7 + e) % 10 == 3:
                reply = "OFFTOPIC: our office has a lovely garden with tulips."
            turns.append({"role": "assistant", "content": reply})
        out.append(LoadedConversation(Conversation(id=f"bench-{c}", turns=turns), f"bench#{c}", "judgegraph", {}))
    return out


def responder(request):
    target = request.text.split("<reply_to_judge>")[-1]
    if "OFFTOPIC" in target:
        return structured({"reason": "The reply is about something else.", "verdict": "no"})
    return structured({"reason": "The reply answers the question.", "verdict": "yes"})


def serve(latency: float, conn) -> None:
    """The server runs in its own process, as a real LLM endpoint would: the
    judge's process pays only its own CPU."""
    with FakeOpenAIServer(responder, latency=latency) as server:
        conn.send(server.base_url)
        conn.recv()  # wait until the benchmark is done
        bodies = [json.dumps(b.get("messages"), sort_keys=True) for b in server.requests if "messages" in b]
        conn.send([hashlib.sha256(b.encode()).hexdigest() for b in bodies])


async def bare_client(items, model, concurrency, window_size):
    """The floor of this harness: the same prompts sent straight through
    ``with_structured_output`` under a semaphore, with no graph around them."""
    from judgegraph.data.prompts import load_prompt
    from judgegraph.data.windows import sliding_windows
    from judgegraph.metrics.relevancy import TurnVerdict, turn_request

    rubric = load_prompt("turn_relevancy/rubric").template.strip()
    prompts = [turn_request(w, rubric=rubric).render() for it in items for w in sliding_windows(it.conversation, window_size)]
    structured_model = model.with_structured_output(TurnVerdict, include_raw=True)
    sem = asyncio.Semaphore(concurrency)

    async def one(p):
        async with sem:
            return await structured_model.ainvoke(p)

    await one(prompts[0])
    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(p) for p in prompts))
    return len(prompts) + 1, time.perf_counter() - t0, time.process_time() - c0


async def run(items, plan, concurrency):
    # Warm up first: the openai SDK imports much of itself lazily on the first call.
    warmup = await evaluate_async(make_conversations(1, 1), plan)
    t0, c0 = time.perf_counter(), time.process_time()
    summary = await evaluate_async(items, plan, max_conversations=max(4, concurrency * 2))
    return warmup.usage.calls, summary, time.perf_counter() - t0, time.process_time() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--exchanges", type=int, default=10)
    ap.add_argument("--window-size", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per judge call at the server (default 0.5, a fast hosted LLM)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line too")
    ap.add_argument("--baseline", action="store_true",
                    help="also send the same prompts through the bare client (no graph) to show the harness's floor")
    args = ap.parse_args()

    items = make_conversations(args.conversations, args.exchanges)
    expected_windows = args.conversations * args.exchanges
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=serve, args=(args.latency, child), daemon=True)
    proc.start()
    try:
        base_url = parent.recv()
        model = ChatOpenAI(model="bench-judge", base_url=base_url, api_key="bench", max_retries=0, temperature=0)
        limiter = CallLimiter(args.concurrency)
        judge = LLMJudge(model, limiter=limiter)
        plan = MetricPlan(["turn_relevancy"], judge, {"window_size": args.window_size})

        async def both():
            # one event loop for everything: langchain-openai shares its async
            # HTTP client process-wide, bound to the loop it first ran on
            out = await run(items, plan, args.concurrency)
            base = await bare_client(items, model, args.concurrency, args.window_size) if args.baseline else None
            return out, base

        (warmup_calls, summary, wall, cpu), baseline = asyncio.run(both())
        parent.send("done")
        digests = parent.recv()[warmup_calls:]
        if baseline:
            digests = digests[: len(digests) - baseline[0]]
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
    calls = len(digests)
    duplicates = sum(n - 1 for n in Counter(digests).values())
    usage = summary.usage
    bound = calls * args.latency / args.concurrency
    scores = [r.score for r in summary.results if r.score is not None]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = {
        "conversations": args.conversations,
        "exchanges": args.exchanges,
        "window_size": args.window_size,
        "windows": expected_windows,
        "judge_calls": calls,
        "calls_per_window": round(calls / expected_windows, 3),
        "duplicate_calls": duplicates,
        "judge_errors": summary.judge_errors,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "peak_in_flight": limiter.peak,
        "wall_s": round(wall, 2),
        "bound_s": round(bound, 2),
        "ratio_to_bound": round(wall / bound, 3) if bound else None,
        "mean_score": round(sum(scores) / len(scores), 4) if scores else None,
        "judge_process_cpu_s": round(cpu, 2),
        "cpu_ms_per_call": round(1000 * cpu / calls, 2) if calls else None,
        "peak_rss_mb": round(peak_mb, 1),
    }
    if baseline:
        figures["baseline_bare_client_wall_s"] = round(baseline[1], 2)
        figures["baseline_ratio_to_bound"] = round(baseline[1] / bound, 3)
        figures["baseline_cpu_ms_per_call"] = round(1000 * baseline[2] / (baseline[0] - 1), 2)
        figures["judgegraph_wall_over_bare_client"] = round(wall / baseline[1], 3)
    width = max(map(len, figures))
    for k, v in figures.items():
        print(f"{k:<{width}}  {v}")
    ok = calls == expected_windows and duplicates == 0 and wall / bound <= 1.2
    print(f"target (one call per window, no duplicates, ratio <= 1.2): {'MET' if ok else 'NOT MET'}")
    if args.json:
        print(json.dumps(figures))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
