"""``judgegraph init``: write a commented starter ``judgegraph.yaml`` that ``eval --config`` takes as it is."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from .common import EXIT_OK, EXIT_USAGE, fail

if TYPE_CHECKING:
    from .common import Subparsers

#: The starter file: every section, the common settings set, the others commented out with their defaults.
STARTER = """\
# judgegraph.yaml: the settings of `judgegraph eval --config judgegraph.yaml`.
# A flag given on the command line overrides the same setting here.
# Relative paths are read from this file's folder. Reference: docs/runs.md.

# The conversations to judge: .jsonl, .json or .yaml files (judgegraph, deepeval,
# promptfoo or OpenAI messages). `judgegraph init` wrote two sample conversations in
# chats.jsonl when there was none: replace them with yours.
inputs:
  - chats.jsonl

# The metrics to run (`judgegraph metrics` lists them). A metric may take its own
# options, which win over `options:` below, e.g.
#   - conversation-completeness: {threshold: 0.8}
metrics:
  - turn-relevancy

# A metric's passing score, for short (the same as its own threshold option above).
# thresholds:
#   turn-relevancy: 0.7

# Options of every metric that takes them (unset: each metric's default).
options:
  threshold: 0.5          # the passing score, 0..1
  # window_size: 3        # exchanges per sliding window
  # strict: false         # score 1 or 0, threshold 1
  # reason: deterministic # deterministic | llm | none
  # guidelines: ["Apologise when the user reports a problem."]   # conversational-guidelines
  # role: "A polite support agent for an online shop."           # role-adherence

# Who judges. No model: the offline embedding judge (no API key, no cost).
judge:
  model: null             # e.g. openai:gpt-4.1-mini
  # base_url: http://127.0.0.1:8000/v1   # an OpenAI-compatible server (vLLM, Ollama, llama.cpp)
  # concurrency: 16       # judge calls in flight at once
  # max_tries: 3          # asks per judgement when the reply is invalid
  # timeout: 120          # seconds per judge request
  # price_in: 0.40        # dollars per million input tokens (else the price table)
  # price_out: 1.60       # dollars per million output tokens

# What is written.
outputs:
  out: judgegraph-results.jsonl   # the results file (its first line: the run header)
  # html: report.html             # the HTML report
  # junit: junit.xml              # JUnit XML, a test case per conversation x metric
  # transcripts: full             # full | errors | none

# How the run is spread.
run:
  workers: auto           # worker processes: auto, or a number
"""

#: Written beside the config when it names a ``chats.jsonl`` that does not exist, so the file runs as written.
SAMPLE_CHATS = "".join(json.dumps(c) + "\n" for c in [
    {"id": "sample-refund", "turns": [
        {"role": "user", "content": "Hi, I returned a jacket last week. When will I get my refund?"},
        {"role": "assistant", "content": "Refunds are paid within 5 business days of the return reaching us."}]},
    {"id": "sample-delivery", "turns": [
        {"role": "user", "content": "How long does delivery to Lyon take?"},
        {"role": "assistant", "content": "Delivery to Lyon takes two working days."},
        {"role": "user", "content": "And can I change the address after ordering?"},
        {"role": "assistant", "content": "Yes, until the parcel ships: use the link in your order email."}]},
])


def register(sub: Subparsers) -> None:
    p = sub.add_parser("init", help="write a commented starter judgegraph.yaml for eval --config",
                       description="Write a commented starter config file; `judgegraph eval --config FILE` reads it.")
    p.add_argument("path", nargs="?", default="judgegraph.yaml", metavar="FILE",
                   help="where to write it (default %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing FILE (refused without it)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if path.is_dir():
        return fail(f"{path} is a directory; give a file path such as {path / 'judgegraph.yaml'}")
    if path.exists() and not args.overwrite:
        return fail(f"{path} already exists: pass --overwrite to replace it", EXIT_USAGE)
    path.write_text(STARTER, encoding="utf-8")
    chats = path.parent / "chats.jsonl"
    sample = not chats.exists()
    if sample:
        chats.write_text(SAMPLE_CHATS, encoding="utf-8")
    print(f"wrote {path}" + (f" and {chats} (two sample conversations: replace them with yours)" if sample else "")
          + f": edit inputs and metrics, then run: judgegraph eval --config {path}")
    return EXIT_OK
