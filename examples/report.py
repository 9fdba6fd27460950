"""One graph for a whole conversation report: several metrics as parallel subgraphs.

    python examples/report.py                                   # offline judge, no key
    python examples/report.py --model openai:gpt-4.1-mini [--base-url URL]

Runs turn relevancy, turn contextual relevancy and response relevancy (plus the
session judges when an LLM is given) over ``examples/rag_support.jsonl`` as ONE
graph invocation per conversation, streams each metric's nodes as they run,
prints the nested drawing and every result.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from judgegraph import create_report_graph, load_conversations

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", default=str(HERE / "rag_support.jsonl"))
    ap.add_argument("--model", help="an LLM judge, e.g. openai:gpt-4.1-mini (default: the offline judge)")
    ap.add_argument("--base-url", help="an OpenAI-compatible server for --model")
    args = ap.parse_args(argv)

    metrics = ["turn_relevancy", "turn_contextual_relevancy", "response_relevancy"]
    if args.model:
        metrics += ["conversation_completeness", "knowledge_retention", "user_frustration"]
    kwargs = {"base_url": args.base_url} if args.base_url else {}
    report = create_report_graph(metrics, model=args.model, **kwargs)
    print("judge:", args.model or "offline all-MiniLM-L6-v2 (no LLM)")
    print(report.get_graph(xray=1).draw_mermaid())

    for conversation in load_conversations(args.file):
        print(f"\n== {conversation.id}")
        final: dict = {}
        for namespace, update in report.stream({"conversation": conversation}, subgraphs=True, stream_mode="updates"):
            where = namespace[0].split(":")[0] if namespace else "report"
            for node, value in update.items():
                print(f"   {where:28} {node}")
                if not namespace and isinstance(value, dict) and "results" in value:
                    final.update(value["results"])
        for name, result in sorted(final.items()):
            score = "—" if result.score is None else f"{result.score:.2f}"
            print(f"   {name:28} {score:>5}  {result.status:15} {result.reason[:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
