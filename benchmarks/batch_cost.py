"""What ``judgegraph eval --batch`` costs against a live run: calls, tokens, dollars.

Judges N conversations of E exchanges with turn relevancy through ``judgegraph eval`` (its own
process) against the loopback OpenAI server, once live and once with ``--batch`` (the server's fake
Batch API: /v1/files, /v1/batches). One reply in ten is first answered with invalid JSON, so both
runs re-ask it (the batch run in a follow-up batch). Prints, per run: requests the server answered,
batches, input and output tokens as the results file records them, dollars at the list price and
at the batch price (gpt-4.1-mini in the price table; half the list price for a batch), and whether
the verdicts are the same.

Run:  python benchmarks/batch_cost.py [--conversations 20] [--exchanges 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit
from _loopback import parcel_conversations

from judgegraph.cost.pricing import prices_for
from judgegraph.data.results import Usage
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, structured, text

MODEL = "openai:gpt-4.1-mini"


def conversations(n: int, exchanges: int) -> list[dict]:
    return parcel_conversations(n, exchanges, late=lambda i: i % 10 == 3)


def responder() -> ScriptedResponder:
    yes = structured({"reason": "It answers the question.", "verdict": "yes"})

    def late(req: object) -> bool:
        return "(late)" in str(getattr(req, "text", "")).split("<reply_to_judge>")[-1]

    return ScriptedResponder([(lambda r: "could not be used" in r.text, yes),
                              (late, text('{"reason": "cut'))], default=yes)  # re-asks: the first rule


def run(inputs: Path, out: Path, batch: bool) -> dict:
    with FakeOpenAIServer(responder()) as server:
        argv = [sys.executable, "-m", "judgegraph.cli", "eval", str(inputs), "--model", MODEL, "--base-url",
                server.base_url, "--out", str(out), "--no-progress", "--no-cache", "-q"]
        if batch:
            argv += ["--batch", "--batch-poll", "0.01"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                              env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-benchmark", "HOME": str(out.parent),
                                   **({"PYTHONPATH": p} if (p := __import__("os").environ.get("PYTHONPATH")) else {})})
        if proc.returncode != 0:
            raise SystemExit(f"eval failed ({proc.returncode}): {proc.stdout[-1500:]} {proc.stderr[-1500:]}")
        answered = server.calls["/v1/chat/completions"] + sum(
            1 for path, _ in server._requests if path == "/v1/batches#request")
        batches = server.batches.created
    records = [json.loads(line) for line in out.read_text().splitlines()]
    usage = Usage.total(Usage.model_validate(r["usage"]) for rec in records if rec["type"] == "conversation"
                        for r in rec["results"].values())
    verdicts = {rec["conversation_id"]: [v["verdict"] for r in rec["results"].values() for v in r["verdicts"]]
                for rec in records if rec["type"] == "conversation"}
    return {"answered": answered, "batches": batches, "usage": usage, "verdicts": verdicts}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=20)
    ap.add_argument("--exchanges", type=int, default=5)
    args = ap.parse_args()
    prices = prices_for(MODEL)
    assert prices is not None
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "conversations.jsonl"
        inputs.write_text("".join(json.dumps(c) + "\n" for c in conversations(args.conversations, args.exchanges)))
        live = run(inputs, Path(tmp) / "live.jsonl", batch=False)
        batch = run(inputs, Path(tmp) / "batch.jsonl", batch=True)
    print(f"{args.conversations} conversations x {args.exchanges} exchanges, turn relevancy, judge {MODEL} "
          f"({prices.describe()})")
    print(f"{'run':<8} {'requests':>8} {'batches':>7} {'input tok':>10} {'output tok':>10} {'list $':>9} "
          f"{'paid $':>9}")
    for name, r, paid in (("live", live, prices), ("--batch", batch, prices.batch())):
        u = r["usage"]
        print(f"{name:<8} {r['answered']:>8} {r['batches']:>7} {u.input_tokens:>10,} {u.output_tokens:>10,} "
              f"{prices.cost(u):>9.5f} {paid.cost(u):>9.5f}")
    print(f"verdicts the same: {live['verdicts'] == batch['verdicts']}")


if __name__ == "__main__":
    main()
