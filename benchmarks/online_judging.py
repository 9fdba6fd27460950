"""Judging a chatbot online, after every reply: judge calls, prompt tokens, wall
time and CPU per call of ``judge_node(..., scope="latest")`` against judging
the whole conversation each time (``scope="conversation"``), with the judge's
cache off and on.

A LangGraph app ``StateGraph(MessagesState)``: chatbot → judge. It is run for
``--exchanges`` user turns on one thread (an in-memory checkpointer keeps the
history), the judge being the scripted fake chat model (``--latency`` seconds
per call), so the figures count what a real judge would be asked.

    python benchmarks/online_judging.py                    # 20 exchanges, 0.01 s per judge call
    python benchmarks/online_judging.py --exchanges 50 --latency 0.05

Bound: ``latest`` must make exactly one call per reply (N calls in all);
``conversation`` makes N(N+1)/2 without a cache.
"""

from __future__ import annotations

import argparse
import resource
import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from judgegraph.apps import judge_node
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics import create_metric


class Slow(ScriptedChatModel):
    latency: float = 0.0

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
        time.sleep(self.latency)
        return super()._generate(messages, stop, run_manager, **kwargs)


class State(MessagesState):
    judgements: dict[str, Any]


def run(exchanges: int, scope: str, cache: bool, latency: float) -> dict[str, float]:
    model = Slow(default={"reason": "It answers.", "verdict": "yes"}, section="reply_to_judge", latency=latency)
    judge = resolve_judge(model=model, cache=cache)
    node = judge_node(create_metric("turn_relevancy", model=judge), scope=scope)  # type: ignore[arg-type]

    def chatbot(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(f"Answer {len(state['messages'])}: here is what you asked for.")]}

    builder = StateGraph(State)
    builder.add_node("chatbot", chatbot)
    builder.add_node("judge", node)
    builder.add_edge(START, "chatbot")
    builder.add_edge("chatbot", "judge")
    app = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"{scope}-{cache}"}}
    tokens = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(exchanges):
        out = app.invoke({"messages": [HumanMessage(f"Question {i}: tell me about topic {i}.")]}, config)
        tokens += out["judgements"]["turn_relevancy"]["usage"]["input_tokens"]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    calls = model.call_count
    return {"calls": calls, "tokens": tokens, "wall": wall, "cpu_ms_per_call": 1000 * cpu / max(calls, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.01)
    args = ap.parse_args()
    n = args.exchanges
    print(f"{n} exchanges judged after every reply; judge latency {args.latency}s per call")
    print(f"{'scope':14} {'cache':6} {'calls':>6} {'bound':>6} {'prompt tokens':>14} {'wall s':>8} {'CPU ms/call':>12}")
    rows = [("latest", False, n), ("conversation", False, n * (n + 1) // 2), ("conversation", True, n)]
    base = None
    for scope, cache, bound in rows:
        r = run(n, scope, cache, args.latency)
        base = base or r
        print(f"{scope:14} {'on' if cache else 'off':6} {r['calls']:6.0f} {bound:6d} {r['tokens']:14.0f} "
              f"{r['wall']:8.2f} {r['cpu_ms_per_call']:12.2f}   calls ×{r['calls'] / base['calls']:.1f}, "
              f"tokens ×{r['tokens'] / base['tokens']:.1f} vs latest")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
