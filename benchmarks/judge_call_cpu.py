"""Client CPU per LLM judge call, through the real langchain-openai client.

The loopback OpenAI-compatible server runs in its own process (as a real
endpoint would), so this process's CPU time is the judge client's alone:
LangGraph scheduling, LangChain runnables and callbacks, structured-output
parsing, pydantic validation, transcripts, the cache, the HTTP client.
Prints CPU ms per call (process CPU time / calls) for each layer:

* ``runner``: turn relevancy through ``evaluate_async`` (what ``judgegraph eval`` does);
* ``graph``: the runner again with a judge that answers at once (no client, no server): judgegraph's own CPU per
  call (graph, runner, judge step), and ``writer``: the results writer per conversation (ms per conversation);
* ``langgraph``: for information: LangGraph alone running a graph of the same shape (a node, a ``Send`` task a
  window, a list reducer, a reducing node) with nodes that do nothing, as many runs and tasks as ``graph``: the floor
  a metric built as a LangGraph graph stands on; ``graph`` less ``langgraph`` is judgegraph's own;
* ``judge``: ``LLMJudge.arun`` on prepared requests (no graph);
* ``client``: the bare langchain-openai call the judge makes (no judgegraph): ``ChatOpenAI`` bound once to the
  strict ``response_format`` (the same request on the wire), ``ainvoke``, the reply validated by the schema. Not
  a floor: most of it is langchain-core's and the openai SDK's per-request work (the SDK walks the request's
  messages against its TypedDicts, builds the response model; httpcore's pool checks every idle connection);
* ``raw_sdk``: for information, not a target (the judge is built on langchain-openai): the same request through
  the openai SDK's ``AsyncOpenAI.chat.completions.create`` on the judge's HTTP client, what langchain-openai and
  langchain-core add shows as ``client`` less ``raw_sdk``.

    python benchmarks/judge_call_cpu.py                  # 1,000 windows, 5 ms latency, concurrency 32
    python benchmarks/judge_call_cpu.py --profile        # and a pyinstrument profile of the judge layer
    python benchmarks/judge_call_cpu.py --profile runner # ... of the runner layer
    python benchmarks/judge_call_cpu.py --loop uvloop    # every layer on uvloop's event loop (to compare)

Target (issue 28): runner <= 3 ms of CPU per call on the 2-core dev machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

from _loopback import with_server  # benchmarks/ beside this script
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from judgegraph.data.conversation import Conversation
from judgegraph.data.results import JudgeAttempt, Usage
from judgegraph.judges import JudgeOutcome, JudgeRequest, resolve_judge
from judgegraph.judges.base import Judge
from judgegraph.loaders import LoadedConversation
from judgegraph.metrics.relevancy import TurnVerdict
from judgegraph.runs.resultsfile import ResultsWriter
from judgegraph.runs.runner import MetricPlan, evaluate_async
from tests.kit.openai_server import FakeOpenAIServer, structured


def responder(request):
    return structured({"reason": "The reply answers the question.", "verdict": "yes"})


def serve(latency: float, conn) -> None:
    with FakeOpenAIServer(responder, latency=latency) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send(server.calls["/v1/chat/completions"])


def conversations(n: int, exchanges: int, tag: str) -> list[LoadedConversation]:
    out = []
    for c in range(n):
        turns = []
        for e in range(exchanges):
            turns.append({"role": "user", "content": f"[{tag}] conversation {c}, question {e}: when is order {c}-{e} due?"})
            turns.append({"role": "assistant", "content": f"Order {c}-{e} arrives on Tuesday, tracking number {c * 31 + e}."})
        out.append(LoadedConversation(Conversation(id=f"{tag}-{c}", turns=turns), f"bench#{c}", "judgegraph", {}))
    return out


class Instant(Judge):
    """Answers every request at once, as the LLM judge's outcome looks (one attempt, its transcript)."""

    name, kind = "llm:instant", "llm"

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        value = TurnVerdict(reason="The reply answers the question.", verdict="yes")
        usage = Usage(calls=1, input_tokens=len(request.rendered) // 4, output_tokens=12)
        attempt = JudgeAttempt(step=request.step, messages=[{"role": "user", "content": request.rendered}],
                               reply=value.model_dump_json(), latency_s=0.0, usage=usage, model="instant")
        return JudgeOutcome(value, None, 1, usage, transcript=[attempt])

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        return self.judge(request)


@contextmanager
def profiled(on: bool, into: dict, layer: str):
    """A pyinstrument profile of the block when ``on`` (its timings then are the profiler's too)."""
    if not on:
        yield
        return
    from pyinstrument import Profiler

    into[layer] = profiler = Profiler(async_mode="disabled")  # the loop thread's own stacks: CPU, not awaited time
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()


class FloorState(TypedDict, total=False):
    """The state of :func:`langgraph_floor`'s graph (at module level: LangGraph reads its hints)."""

    windows: list[int]
    verdicts: Annotated[list[int], operator.add]
    score: float


async def langgraph_floor(n_conv: int, windows: int, concurrency: int):
    """LangGraph's own CPU for the graph's shape, no judgegraph: a node, one ``Send`` task a window to a node that
    returns a verdict at once into a list reducer, a reducing node; ``n_conv`` runs of ``windows`` tasks,
    ``concurrency`` at a time, as the runner drives them. What the ``graph`` layer costs beyond it is judgegraph's."""
    async def judge(state: FloorState) -> FloorState:
        return {"verdicts": state["windows"]}

    g = StateGraph(FloorState)
    g.add_node("window", lambda state: {})
    g.add_node("judge", judge)
    g.add_node("reduce", lambda state: {"score": sum(state["verdicts"]) / max(1, len(state["verdicts"]))})
    g.add_edge(START, "window")
    g.add_conditional_edges("window", lambda state: [Send("judge", {"windows": [w]}) for w in state["windows"]], ["judge"])
    g.add_edge("judge", "reduce")
    g.add_edge("reduce", END)
    graph = g.compile()
    sem = asyncio.Semaphore(concurrency)

    async def one():
        async with sem:
            return await graph.ainvoke({"windows": list(range(windows))})

    await one()  # warm-up
    c0, t0 = time.process_time(), time.perf_counter()
    outs = await asyncio.gather(*(one() for _ in range(n_conv)))
    return (n_conv * windows, time.process_time() - c0, time.perf_counter() - t0,
            sum(1 for o in outs if len(o["verdicts"]) != windows))


async def measure(args, base_url):
    from judgegraph.data.prompts import load_prompt
    from judgegraph.data.windows import sliding_windows
    from judgegraph.metrics.relevancy import turn_request

    judge = resolve_judge(model="openai:bench-judge", base_url=base_url, max_concurrency=args.concurrency, cache=False)
    plan = MetricPlan(["turn_relevancy"], judge, {"window_size": args.window_size})
    n_conv = max(1, args.calls // args.exchanges)
    figures = {}

    await evaluate_async(conversations(2, 2, "warmup"), plan)  # the SDK imports much of itself on the first call
    items = conversations(n_conv, args.exchanges, "runner")
    profilers = {}
    c0, t0 = time.process_time(), time.perf_counter()
    with profiled(args.profile == "runner", profilers, "runner"):
        summary = await evaluate_async(items, plan, max_conversations=max(4, args.concurrency * 2))
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    calls = summary.usage.calls
    figures["runner"] = (calls, cpu, wall, summary.judge_errors)

    instant = MetricPlan(["turn_relevancy"], Instant(), {"window_size": args.window_size})
    await evaluate_async(conversations(2, 2, "warmup"), instant)
    outcomes: list = []
    c0, t0 = time.process_time(), time.perf_counter()
    summary = await evaluate_async(conversations(n_conv, args.exchanges, "graph"), instant, on_outcome=outcomes.append,
                                   max_conversations=max(4, args.concurrency * 2))
    figures["graph"] = (summary.usage.calls, time.process_time() - c0, time.perf_counter() - t0, summary.judge_errors)
    figures["langgraph"] = await langgraph_floor(n_conv, summary.usage.calls // n_conv, args.concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        writer = ResultsWriter(Path(tmp) / "results.jsonl")
        c0, t0 = time.process_time(), time.perf_counter()
        for outcome in outcomes:
            writer.outcome(outcome)
        figures["writer"] = (len(outcomes), time.process_time() - c0, time.perf_counter() - t0, 0)
        writer.close()

    rubric = load_prompt("turn_relevancy/rubric").template.strip()
    requests = [turn_request(w, rubric=rubric) for it in conversations(n_conv, args.exchanges, "judge")
                for w in sliding_windows(it.conversation, args.window_size)]
    c0, t0 = time.process_time(), time.perf_counter()
    with profiled(args.profile == "judge", profilers, "judge"):
        outs = await asyncio.gather(*(judge.arun(r) for r in requests))
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    figures["judge"] = (len(outs), cpu, wall, sum(1 for o in outs if not o.ok))

    prompts = [[HumanMessage(r.render() + " (client)")] for r in requests]
    runnable = judge.provider.structured(judge.model, TurnVerdict, None)  # what the judge sends through
    sem = asyncio.Semaphore(args.concurrency)

    async def timed(layer, ask, text_of):
        """Each prompt through ``ask`` (``sem`` in flight), the reply's ``text_of`` validated: ``figures[layer]``."""
        async def one(p):
            async with sem:
                reply = await ask(p)
            try:
                return TurnVerdict.model_validate_json(text_of(reply))
            except ValueError:
                return None

        c0, t0 = time.process_time(), time.perf_counter()
        raw = await asyncio.gather(*(one(p) for p in prompts))
        figures[layer] = (len(raw), time.process_time() - c0, time.perf_counter() - t0, sum(1 for r in raw if r is None))

    await timed("client", runnable.ainvoke, lambda reply: reply.text)

    # information only: the openai SDK alone on the same HTTP client, the same request body (not a target: the
    # judge is built on langchain-openai)
    from openai import AsyncOpenAI

    from judgegraph.providers.openai import strict_json_schema

    sdk = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0,
                      http_client=judge.model.http_async_client)
    fmt = {"type": "json_schema",
           "json_schema": {"name": "TurnVerdict", "schema": strict_json_schema(TurnVerdict), "strict": True}}

    def bare(p):
        return sdk.chat.completions.create(model="bench-judge", extra_body={"response_format": fmt},
                                           messages=[{"role": "user", "content": p[0].text + " sdk"}])

    await timed("raw_sdk", bare, lambda reply: reply.choices[0].message.content or "")
    return figures, profilers.get(args.profile)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000, help="judge calls per layer (default 1000)")
    ap.add_argument("--exchanges", type=int, default=10)
    ap.add_argument("--window-size", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.005, help="seconds per call at the server (default 0.005)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--profile", nargs="?", const="judge", choices=("runner", "judge"),
                    help="print a pyinstrument profile of one layer (default: judge)")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                    help="the event loop (default asyncio's, what judgegraph runs on; uvloop: to compare, if installed)")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()

    def run(url: str):
        if args.loop == "asyncio":
            return asyncio.run(measure(args, url))
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # Python 3.11+
            return runner.run(measure(args, url))

    (figures, profiler), served = with_server(serve, (args.latency,), run)
    out = {"latency_s": args.latency, "concurrency": args.concurrency, "loop": args.loop, "server_calls": served}
    print(f"{'layer':<8} {'calls':>6} {'errors':>6} {'cpu_s':>7} {'wall_s':>7} {'calls/s':>8} {'cpu_ms/call':>12}")
    for layer, (calls, cpu, wall, errors) in figures.items():
        per = 1000 * cpu / calls if calls else float("nan")
        print(f"{layer:<8} {calls:>6} {errors:>6} {cpu:>7.2f} {wall:>7.2f} {calls / wall:>8.1f} {per:>12.2f}")
        out[f"{layer}_cpu_ms_per_call"] = round(per, 2)
        out[f"{layer}_calls_per_s"] = round(calls / wall, 1)
    print("(writer: per conversation, not per call)")
    print(f"runner / client: {out['runner_cpu_ms_per_call'] / out['client_cpu_ms_per_call']:.2f} "
          "(ratios of one run: the machine's load changes every figure alike)")
    target = out["runner_cpu_ms_per_call"] <= 3.0
    print(f"target (issue 28: runner <= 3 ms CPU per call): {'MET' if target else 'NOT MET'}")
    if args.json:
        print(json.dumps(out))
    if profiler is not None:
        print(profiler.output_text(unicode=True, color=False, show_all=False))
    return 0 if target else 1


if __name__ == "__main__":
    sys.exit(main())
