"""judgegraph's own CPU per request on the prompt and request path, no client, no graph: µs per request for
building a turn-relevancy request, looking its prompt up, rendering it, the request's key (stamped on every
transcript entry), the LLM judge's cache key and its first message. Best of ``--rounds`` over
``--conversations`` × 10 exchanges, window 3 (fresh requests each round: every cached value computed again).

    python benchmarks/prompt_path_cpu.py                 # run it on each tree (PYTHONPATH=OLD/src) to compare
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import _loopback  # noqa: F401 - the repository root on sys.path, for judge_call_cpu's conversations
from judge_call_cpu import conversations

from judgegraph.data.prompts import load_prompt
from judgegraph.data.windows import sliding_windows
from judgegraph.judges import resolve_judge
from judgegraph.metrics.relevancy import turn_request


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    judge = resolve_judge(model="openai:bench-judge", base_url="http://127.0.0.1:9/v1", api_key="sk-bench-12345678",
                          cache=False)  # never called: nothing is sent
    rubric = load_prompt("turn_relevancy/rubric").template.strip()
    windows = [w for it in conversations(args.conversations, 10, "p") for w in sliding_windows(it.conversation, 3)]

    def requests() -> list[Any]:
        return [turn_request(w, rubric=rubric) for w in windows]

    def rendered(items: list[Any]) -> list[Any]:
        for r in items:
            r.rendered  # noqa: B018 - computed and kept on the request
        return items

    def best(label: str, fn: Callable[[list[Any]], object], fresh: Callable[[], list[Any]]) -> float:
        low = float("inf")
        for _ in range(args.rounds):
            items = fresh()
            c0 = time.process_time()
            fn(items)
            low = min(low, time.process_time() - c0)
        per = 1e6 * low / len(windows)
        print(f"{label:<34} {per:8.2f} µs a request")
        return per

    total = best("build (turn_request)", lambda _: requests(), list)
    best("load_prompt (a lookup, not summed)", lambda _: [load_prompt("turn_relevancy/judge_turn") for _ in windows], list)
    total += best("rendered (lookup + render)", lambda items: [r.rendered for r in items], requests)
    total += best("request key (cache_key)", lambda items: [r.cache_key() for r in items], lambda: rendered(requests()))
    total += best("LLM judge cache key", lambda items: [judge.cache_key(r) for r in items],
                  lambda: rendered(requests()))
    total += best("first message (first_request)", lambda items: [judge.first_request(r) for r in items],
                  lambda: rendered(requests()))
    print(f"{'sum':<34} {total:8.2f} µs a request ({len(windows)} requests)")


if __name__ == "__main__":
    main()
