"""What re-judging costs against judging again: calls and wall time.

Judges N conversations of E exchanges each with turn relevancy through the real
langchain-openai client against the loopback OpenAI server (no key), then
changes the rubric for ONE window of ONE conversation three ways:

* ``eval`` again with the new rubric (every window of every conversation);
* ``judgegraph rejudge`` on the results file (the chosen window only);
* ``judgegraph.steering.rejudge`` on a checkpointed thread of that conversation.

Prints the calls and wall time (commands in their own process: start-up included) of each and the ratio to a full re-run.

Run:  python benchmarks/rejudge_cost.py [--conversations 40] [--exchanges 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit
from _loopback import parcel_conversations

from judgegraph.runs import read_run
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured


def conversations(n: int, exchanges: int) -> list[dict]:
    return parcel_conversations(n, exchanges)


def quiet(argv: list[str]) -> tuple[int, float]:
    """The command in its own process (as a user runs it), its output dropped; wall time includes start-up."""
    start = time.perf_counter()
    # a judge cache of its own: the command's calls are its own (a shared cache would answer the rejudge from
    # "eval again", and from earlier runs of this benchmark)
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "JUDGEGRAPH_JUDGE_CACHE": str(Path(cache) / "judge-cache.sqlite")}
        proc = subprocess.run([sys.executable, "-m", "judgegraph.cli", *argv], capture_output=True, text=True,
                              timeout=600, env=env)
    if proc.returncode > 1:
        raise SystemExit(f"judgegraph {argv[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.returncode, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=40)
    ap.add_argument("--exchanges", type=int, default=5)
    args = ap.parse_args()
    yes = structured({"reason": "It answers the question.", "verdict": "yes"})
    strict = structured({"reason": "Not specific enough for the strict rubric.", "verdict": "no"})
    responder = ScriptedResponder([(lambda r: "STRICT" in r.text, strict)], default=yes)
    rubric = "STRICT: relevant only when the reply gives a delivery date."
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(responder) as server:
        data = Path(tmp) / "chats.jsonl"
        data.write_text("".join(json.dumps(c) + "\n" for c in conversations(args.conversations, args.exchanges)))
        llm = ["--model", "gpt-4.1-mini", "--base-url", server.base_url]
        results = Path(tmp) / "results.jsonl"

        def calls() -> int:
            return server.calls["/v1/chat/completions"]

        rows = []
        base = calls()
        _, wall = quiet(["eval", str(data), "-m", "turn-relevancy", *llm, "--out", str(results), "-q",
                         "--no-progress"])
        first = calls() - base
        base = calls()
        _, wall_full = quiet(["eval", str(data), "-m", "turn-relevancy", *llm, "--rubric", rubric, "--out",
                              str(Path(tmp) / "full.jsonl"), "-q", "--no-progress"])
        judged = sum(c.results["turn_relevancy"].usage.calls
                     for c in read_run(Path(tmp) / "full.jsonl").conversations.values())
        rows.append(("eval again, new rubric", calls() - base, wall_full))
        assert judged == calls() - base, (judged, calls() - base)
        base = calls()
        _, wall_cli = quiet(["rejudge", str(results), "--input", str(data), "-m", "turn-relevancy", "--conversation",
                             "c0", "--window", "2", "--rubric", rubric, *llm, "--out", str(Path(tmp) / "new.jsonl")])
        rows.append(("judgegraph rejudge (1 window)", calls() - base, wall_cli))

        from langchain_openai import ChatOpenAI
        from langgraph.checkpoint.memory import InMemorySaver

        from judgegraph.metrics.relevancy import create_turn_relevancy_metric
        from judgegraph.steering import rejudge

        model = ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="test-key")
        graph = create_turn_relevancy_metric(model=model, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "c0"}}
        graph.invoke({"conversation": conversations(1, args.exchanges)[0]}, config)
        base = calls()
        start = time.perf_counter()
        rejudge(graph, config, model=model, verdict_ids=["2"], rubric=rubric)
        rows.append(("steering.rejudge on a thread (1 window)", calls() - base, time.perf_counter() - start))

    windows = args.conversations * args.exchanges
    print(f"{args.conversations} conversations x {args.exchanges} exchanges = {windows} windows; "
          f"first eval: {first} calls, {wall:.2f} s wall")
    print(f"{'change the rubric of one window by':42} {'calls':>6} {'wall s':>8} {'calls vs full':>14}")
    full = rows[0][1] or 1
    for name, n, seconds in rows:
        print(f"{name:42} {n:6d} {seconds:8.2f} {n / full:14.4f}")


if __name__ == "__main__":
    main()
