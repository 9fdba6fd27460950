"""The dry run's figures on two source trees, side by side (issue 28: the fast dry run must print what the
graph run printed): ``judgegraph eval FILE --dry-run`` over every example and benchmark data set, every metric
(a row each) and the file's own metrics, for an OpenAI model (automatic prefix cache) and a Claude model (marked
cache), and a dense run; prints each case's figures and whether both trees agree.

    git archive 00fdddd src | tar -x -C /tmp/old          # the tree before
    python benchmarks/dry_run_same.py --old /tmp/old/src   # --new: this tree's src (default)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = ["turn-relevancy", "conversation-relevance", "turn-contextual-relevancy", "turn-faithfulness",
           "goal-completion", "response-relevancy", "conversational-safety", "conversation-completeness",
           "user-frustration", "knowledge-retention", "role-adherence", "tool-correctness", "topic-adherence"]
MODELS = ["openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5"]


def cases(all_metrics: bool = True) -> list[list[str]]:
    files = sorted(str(p.relative_to(ROOT)) for p in [*ROOT.glob("examples/*.jsonl"), *ROOT.glob("benchmarks/data/*.jsonl")])
    out = []
    for model in MODELS:
        for f in files:
            out.append([f, "--model", model])  # the file's own metrics, or the defaults
        for f in files if all_metrics else ():
            out.append([f, "--model", model, *(a for m in METRICS for a in ("-m", m))])  # a row per metric and step
        out.append([files[0], "--model", model, "-m", "turn-relevancy", "--dense", "3"])
    return out


def figures(src: str, case: list[str]) -> str:
    env = {**os.environ, "PYTHONPATH": src, "COLUMNS": "400", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "judgegraph.cli", "eval", *case, "--dry-run", "-q"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False)
    rows = [line for line in done.stdout.splitlines() if "│" in line or line.startswith(("prefix cache", "dry run"))]
    return f"exit {done.returncode}\n" + "\n".join(re.sub(r"\s+", " ", r).strip() for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the src folder of the tree before")
    ap.add_argument("--new", default=str(ROOT / "src"), help="the src folder of the tree after (default: this one)")
    ap.add_argument("--quick", action="store_true", help="each file's own metrics only, not every metric too")
    args = ap.parse_args()
    same = 0
    all_cases = cases(not args.quick)
    for case in all_cases:
        old, new = figures(args.old, case), figures(args.new, case)
        same += old == new
        table = [r for r in new.splitlines() if r.startswith("│ total")]
        print(f"{'same' if old == new else 'DIFFERENT'}: {' '.join(case)}: {new.splitlines()[0]}; "
              f"{table[0] if table else '(no table)'}")
        if old != new:
            print("  old:\n    " + old.replace("\n", "\n    ") + "\n  new:\n    " + new.replace("\n", "\n    "))
    print(f"{same} of {len(all_cases)} cases print the same figures")
    return 0 if same == len(all_cases) else 1


if __name__ == "__main__":
    sys.exit(main())
