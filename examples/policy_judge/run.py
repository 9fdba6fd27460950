"""Run the policy judge (did the bot answer from the policy it retrieved?).

    python examples/policy_judge/run.py                     # canned answers, scripted chat model, no key
    python examples/policy_judge/run.py --model openai:gpt-4.1-mini
    python examples/policy_judge/run.py --model openai:qwen2.5 --base-url http://localhost:8000/v1 FILE
    python examples/policy_judge/run.py --graph             # the graph as Mermaid

Without ``--model`` the judge talks to judgegraph's scripted chat model
(``ScriptedChatModel``) answering from ``canned_answers.json``, and says so:
the prompts, structured output and scoring run, but the verdicts are canned,
not judged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # so `policy_judge` imports when run as a script

from judgegraph import resolve_judge  # noqa: E402
from policy_judge import create_policy_metric  # noqa: E402
from policy_judge.canned import scripted_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", nargs="?", default=str(HERE / "chats.jsonl"), help="conversations (default: chats.jsonl)")
    p.add_argument("--model", help="LLM judge, e.g. openai:gpt-4.1-mini (default: canned answers)")
    p.add_argument("--base-url", help="OpenAI-compatible server for --model")
    p.add_argument("--threshold", type=float, default=1.0, help="share of supported claims to pass (default 1.0)")
    p.add_argument("--graph", action="store_true", help="print the graph as Mermaid and exit")
    args = p.parse_args(argv)

    from judgegraph import load_conversations

    if args.graph:
        print(create_policy_metric().get_graph().draw_mermaid())  # drawing needs no model
        return 0
    kwargs = {"base_url": args.base_url} if args.base_url else {}
    model = args.model
    if model is None:
        model = scripted_model()
        kwargs = {"cache": False}  # canned answers must never land in the user's persistent judge cache
        print("no --model: canned answers from a scripted chat model (no LLM, no key; the verdicts are canned,"
              " not judged)")
    graph = create_policy_metric(model=resolve_judge(model, **kwargs), threshold=args.threshold)
    conversations = load_conversations(args.file)
    outputs = graph.batch([{"conversation": c} for c in conversations])

    calls = 0
    for conversation, out in zip(conversations, outputs):
        for result in out["results"].values():
            calls += result.usage.calls
            score = "—" if result.score is None else f"{result.score:.2f}"
            print(f"\n{conversation.id}: {result.status} (score {score}, threshold {result.threshold})")
            print(f"  {result.reason}")
            for v in result.verdicts:
                mark = {"supported": "+", "unsupported": "-", None: "!"}[v.verdict]
                what = v.claim or "(claim extraction)"
                print(f"  {mark} turn {', '.join(str(t + 1) for t in v.turns)}: {what} — {v.reason or v.error}")
    print(f"\n{len(conversations)} conversations, {calls} judge calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
