"""The sweep of issue 26 item 3: judgegraph's names renamed in 0.2, rewritten in every file that uses them.

    python rename.py [ROOT]       # ROOT: the repository (default: this file's folder); prints each file changed

"judge" now means the model that answers (Judge, LLMJudge, Jury, judge_node stay). Renamed:

- ``create_<name>_judge`` → ``create_<name>_metric``: every metric graph's factory (the built-ins', the registry's
  generated ones, create_pairwise_judge, the examples' and tests' own metrics); test names holding the old name too.
  Not openevals' ``create_llm_as_judge`` / ``create_async_llm_as_judge``.
- ``make_judge`` → ``make_metric``; not MLflow's (``MLflow's make_judge``, ``mlflow.genai.judges.make_judge``), and
  not in a file that defines a ``make_judge`` of its own (benchmarks/offline_throughput.py's makes a Judge).
- ``build_report_graph`` → ``report_builder`` (it returns the uncompiled StateGraph, LangGraph's "builder").

Swept: src, tests, examples, benchmarks, graphs, docs and README.md, text files only. Kept as they are: a line holding
"renamed in 0.2" (the aliases, the docs' rename table) and tests/unit/test_renamed.py (the old names' one test each).
Idempotent: a second run changes nothing; re-run it after merging branches that still use an old name.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SWEPT = ("src", "tests", "examples", "benchmarks", "graphs", "docs", "README.md")
SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".json", ".jsonl", ".txt", ".ambr", ".mmd", ".ipynb", ".cfg"}
KEEP_FILES = {"tests/unit/test_renamed.py"}
KEEP_LINE = re.compile(r"renamed in 0\.2", re.I)

EDGE_L, EDGE_R = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"  # "_" is an edge: test_make_judge_works is renamed too
#: ``<name>``, ``{name}`` (an f-string's) stand for a metric's name too
FACTORY = re.compile(EDGE_L + r"create_(?!(?:async_)?llm_as_judge)((?:[a-z0-9_]|\{[^{}]*\}|<[^<>]*>)+?)_judge" + EDGE_R)
MAKE = re.compile(EDGE_L + r"make_judge" + EDGE_R)
REPORT = re.compile(EDGE_L + r"build_report_graph" + EDGE_R)
MLFLOWS = re.compile(r"(MLflow's\s*`*|mlflow\.genai\.judges\.|mlflow\.genai\.)$")
OWN_MAKE = re.compile(r"^\s*(async\s+)?def make_judge\(", re.M)


def rename_line(line: str, make: bool) -> str:
    if KEEP_LINE.search(line):
        return line
    line = FACTORY.sub(r"create_\1_metric", line)
    line = REPORT.sub("report_builder", line)
    if make:
        line = MAKE.sub(lambda m: m[0] if MLFLOWS.search(line[: m.start()]) else "make_metric", line)
    return line


def rename_text(text: str) -> str:
    make = not OWN_MAKE.search(text)
    return "".join(rename_line(line, make) for line in text.splitlines(keepends=True))


def files(root: Path) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "--", *SWEPT], cwd=root, capture_output=True, check=True)
    names = [n for n in listed.stdout.decode().split("\0") if n]
    return [root / n for n in names if Path(n).suffix in SUFFIXES and n not in KEEP_FILES and (root / n).is_file()]


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent
    changed = 0
    for path in files(root):
        text = path.read_text(encoding="utf-8")
        new = rename_text(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(path.relative_to(root))
            changed += 1
    print(f"{changed} file(s) changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
