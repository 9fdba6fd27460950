"""Aligning an LLM judge to people's labels: agreement before and after on held-out labels, and what it costs.

A scripted judge behind the loopback OpenAI server (no key) judges turn relevancy of N single-exchange
conversations of four kinds: direct answers (people: relevant), greetings that offer help (people: relevant),
deflections to another channel (people: irrelevant) and off-topic replies (people: irrelevant). The plain judge
disagrees with people on greetings and deflections, and flips a seeded 10% of the rest; told a guideline about a
kind (what ``judgegraph align`` distils from the disagreements it shows the model), it follows people on it.

``judgegraph align --model gpt-4.1-mini --json`` runs as a user runs it (its own process); printed: the held-out
labels' n, % agreement and Cohen's kappa of the plain and the aligned judge, the calls and tokens alignment
cost (train judging + distilling) and the held-out measurement's, and the wall time.

Run:  python benchmarks/align_llm_judge.py [--conversations 200] [--test-fraction 0.3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit

from tests.kit.openai_server import ChatRequest, FakeOpenAIServer, Reply, structured

KINDS = {  # kind -> (reply, people's label)
    "answer": ("Your parcel {i} left the depot this morning and arrives tomorrow.", "yes"),
    "greeting": ("Hello! Happy to help with parcel {i}: what would you like to know?", "yes"),
    "deflection": ("I cannot discuss parcel {i} here, please contact our support line.", "no"),
    "off-topic": ("Our summer sale ends on Friday, do not miss it ({i}).", "no"),
}
GUIDELINES = {
    "greeting": "A greeting that offers help with the user's own request is relevant.",
    "deflection": "A reply that sends the user to another channel without answering is not relevant.",
}


def kind_of(text: str) -> str:
    for kind, (reply, _) in KINDS.items():
        if reply.split("{i}")[0] in text:
            return kind
    return "answer"


def flipped(text: str) -> bool:
    """A seeded 10% of the plain judge's other answers are wrong."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % 10 == 0


def responder(request: ChatRequest) -> Reply:
    if request.schema_name == "DistilledGuidelines":
        shown = [g for kind, g in GUIDELINES.items() if KINDS[kind][0].split("{i}")[0] in request.text]
        return structured({"reason": "People judge greetings and deflections differently.", "guidelines": shown})
    task = request.text.split("The task:")[-1]
    reply = task.split("<reply_to_judge>")[-1] if "<reply_to_judge>" in task else task
    kind = kind_of(reply)
    people = KINDS[kind][1]
    if kind in GUIDELINES:
        verdict = people if GUIDELINES[kind] in request.text else ("no" if people == "yes" else "yes")
    else:
        verdict = ("no" if people == "yes" else "yes") if flipped(reply) else people
    return structured({"reason": f"Scripted ({kind}).", "verdict": verdict})


def data(n: int, folder: Path) -> tuple[Path, Path]:
    convs, labels = [], []
    kinds = list(KINDS)
    for i in range(n):
        kind = kinds[i % len(kinds)]
        reply, label = KINDS[kind]
        cid = f"c{i:04d}"
        convs.append({"id": cid, "turns": [{"role": "user", "content": f"Where is my parcel {i}?"},
                                           {"role": "assistant", "content": reply.format(i=i)}]})
        labels.append({"conversation_id": cid, "metric": "turn_relevancy", "turn": 2, "label": label})
    cpath, lpath = folder / "chats.jsonl", folder / "labels.jsonl"
    cpath.write_text("".join(json.dumps(c) + "\n" for c in convs), encoding="utf-8")
    lpath.write_text("".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8")
    return cpath, lpath


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--test-fraction", type=float, default=0.3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(responder) as server:
        cpath, lpath = data(args.conversations, Path(tmp))
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "judgegraph.cli", "align", str(cpath), "-m", "turn-relevancy",
                               "--labels", str(lpath), "--model", "gpt-4.1-mini", "--base-url", server.base_url,
                               "--test-fraction", str(args.test_fraction), "--out", str(Path(tmp) / "aligned"),
                               "--json", "--no-cache"],
                              capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"judgegraph align failed ({proc.returncode}): {proc.stderr[-2000:]}")
        report = json.loads(proc.stdout)
        served = server.calls["/v1/chat/completions"]
    held = report["held_out"]
    print(f"judgegraph align, turn-relevancy, {args.conversations} labelled conversations "
          f"({report['train']['conversations']} train, {held['conversations']} held out), loopback server")
    print(f"{'judge':<44}{'n':>5}{'% agreement':>14}{'kappa':>8}")
    for name, fig in (("plain " + report["judge"].split("+")[0], held["before"]), ("aligned " + report["judge"],
                                                                                   held["after"])):
        print(f"{name:<44}{fig['n']:>5}{100 * fig['agreement']:>13.1f}%{fig['kappa']:>8.3f}")
    cost, usage = report["alignment_cost"], report["usage"]
    measure = {k: usage["held_out_plain"][k] + usage["held_out_aligned"][k] for k in ("calls", "input_tokens", "output_tokens")}
    print(f"guidelines distilled: {len(report['guidelines'])}; examples: {report['examples']}")
    print(f"alignment cost: {cost['calls']} calls ({usage['train']['calls']} train judgements + "
          f"{usage['distil']['calls']} distilling), {cost['input_tokens']} tokens in / {cost['output_tokens']} out")
    print(f"held-out measurement: {measure['calls']} calls, {measure['input_tokens']} tokens in / "
          f"{measure['output_tokens']} out (the aligned judge's prompts are longer: "
          f"{usage['held_out_aligned']['input_tokens'] / max(1, usage['held_out_plain']['input_tokens']):.2f}x input)")
    print(f"calls the server saw: {served}; wall time {wall:.1f} s (start-up included)")


if __name__ == "__main__":
    main()
