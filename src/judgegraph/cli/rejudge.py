"""``judgegraph rejudge``: judge chosen windows of a results file again with a
changed rubric or prompt; everything not chosen is copied (0 calls)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_ERRORS, EXIT_FAILED, EXIT_OK, EXIT_USAGE, read_rubric


def register(sub: Any) -> None:
    p = sub.add_parser(
        "rejudge", help="re-judge chosen windows of a results file with a new rubric or prompt",
        description="Re-judge chosen windows of RESULTS (a judgegraph eval --out file) with a changed rubric or "
                    "prompt. Verdicts not chosen are kept (no calls); each changed result is recomputed with its "
                    "metric's own rules; every other line is copied as it is. Metrics: turn-relevancy, "
                    "conversation-relevance.")
    p.add_argument("results", metavar="RESULTS", help="results file (.jsonl) written by judgegraph eval")
    p.add_argument("--input", required=True, metavar="FILE", action="append", dest="inputs",
                   help="the conversations the results were computed from (repeatable)")
    p.add_argument("-m", "--metric", required=True, metavar="METRIC", help="the metric whose verdicts are re-judged")
    p.add_argument("--conversation", action="append", dest="conversations", metavar="ID",
                   help="conversation to re-judge, repeatable (default: every conversation in RESULTS)")
    p.add_argument("--window", action="append", dest="windows", type=int, metavar="N",
                   help="window number (a verdict's 'window'), repeatable (default: every window)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--rubric", help="the new rubric text, or @FILE to read it from a file")
    what.add_argument("--prompt", metavar="FILE", help="a new judge_turn prompt file (same placeholders)")
    p.add_argument("--model", help="LLM judge, e.g. openai:gpt-4.1-mini (needed: a rubric or prompt steers an LLM)")
    p.add_argument("--base-url", help="OpenAI-compatible server for --model")
    p.add_argument("--max-tries", type=int, default=3, help="asks per judgement when the output is invalid (default 3)")
    p.add_argument("--concurrency", type=int, default=16, help="judge calls in flight at once (default 16)")
    p.add_argument("--out", required=True, metavar="NEW.jsonl", help="where the new results file goes")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out (refused without it)")
    p.set_defaults(run=run)


def _fail(message: str, status: int = EXIT_USAGE) -> int:
    print(f"judgegraph rejudge: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    from ..judges import resolve_judge
    from ..loaders import load_files
    from ..metrics import MetricNotFound, canonical_name, get_metric
    from ..resultsfile import ResultsFileError, lock_results
    from ..steering import REJUDGE_METRICS, RejudgeError, as_prompt

    metric = canonical_name(args.metric)
    try:
        get_metric(metric)
    except MetricNotFound as exc:
        return _fail(str(exc))
    if metric not in REJUDGE_METRICS:
        return _fail(f"metric {args.metric!r} cannot be re-judged; covered: {', '.join(REJUDGE_METRICS)}")
    if not args.model:
        return _fail("a rubric or prompt steers an LLM judge: give --model (and --base-url for a local server)")
    if args.max_tries < 1 or args.concurrency < 1:
        return _fail("--max-tries and --concurrency must be >= 1")
    results_path = Path(args.results)
    if not results_path.is_file():
        return _fail(f"results file {args.results!r} not found")
    if Path(args.out).resolve() == results_path.resolve():
        return _fail("--out must be a new file, not RESULTS itself")
    refused = _out_refused(args)
    if refused:
        return _fail(refused)
    try:
        rubric = read_rubric(args.rubric)
        prompt = as_prompt(args.prompt)
    except (OSError, RejudgeError) as exc:
        return _fail(str(exc))
    kwargs: dict[str, Any] = {"base_url": args.base_url} if args.base_url else {}
    try:
        judge = resolve_judge(args.model, max_concurrency=args.concurrency, max_tries=args.max_tries, **kwargs)
    except ValueError as exc:
        return _fail(str(exc))

    loaded = load_files(args.inputs)
    for err in loaded.errors:
        print(f"judgegraph rejudge: input: {err}", file=sys.stderr)
    conversations = {c.conversation.id: c.conversation for c in loaded.conversations}

    try:
        held = lock_results(args.out)
    except (ResultsFileError, OSError) as exc:
        return _fail(str(exc))
    try:
        return _rejudge(args, results_path, metric, judge, conversations, rubric, prompt)
    finally:
        held.release()


def _out_refused(args: argparse.Namespace) -> str | None:
    """A non-empty ``--out`` is replaced only with ``--overwrite`` (as ``eval`` does)."""
    from ..resultsfile import is_nonempty

    if is_nonempty(args.out) and not args.overwrite:
        return f"{args.out} already holds results: pass --overwrite to replace it (or choose another --out)"
    return None


def _rejudge(args: argparse.Namespace, results_path: Path, metric: str, judge: Any,
             conversations: dict[str, Any], rubric: Any, prompt: Any) -> int:
    """Write ``--out``: RESULTS with the chosen windows judged again (the caller holds ``--out``'s lock)."""
    from ..steering import RejudgeError, rejudge_result

    wanted = set(args.conversations or [])
    problems = 0
    failed = False
    changed: list[str] = []
    calls = 0
    seen: set[str] = set()
    tmp = Path(f"{args.out}.tmp")
    with results_path.open(encoding="utf-8") as src, tmp.open("w", encoding="utf-8") as dst:
        for lineno, line in enumerate(src, 1):
            record, where = None, f"{args.results}:{lineno}"
            try:
                record = json.loads(line) if line.strip() else None
            except json.JSONDecodeError as exc:
                print(f"judgegraph rejudge: {where}: not JSON ({exc.msg}); copied as it is", file=sys.stderr)
                problems += 1
            cid = record.get("conversation_id") if isinstance(record, dict) else None
            results = record.get("results") if isinstance(record, dict) else None
            chosen = (isinstance(record, dict) and record.get("type") == "conversation" and isinstance(results, dict)
                      and metric in results and (not wanted or cid in wanted))
            if chosen and isinstance(record, dict) and isinstance(results, dict):
                seen.add(str(cid))
                conversation = conversations.get(str(cid))
                if conversation is None:
                    print(f"judgegraph rejudge: {where}: conversation {cid!r} is not in"
                          f" {', '.join(args.inputs)}; its result is kept", file=sys.stderr)
                    problems += 1
                else:
                    old = results[metric]
                    try:
                        new = rejudge_result(old, conversation, model=judge, windows=args.windows,
                                             rubric=rubric, prompt=prompt)
                    except (RejudgeError, ValueError) as exc:
                        print(f"judgegraph rejudge: {where}: conversation {cid!r}, {metric}: {exc};"
                              " its result is kept", file=sys.stderr)
                        problems += 1
                    else:
                        redone = set(new.details.get("rejudged", {}).get("windows", []))
                        calls += sum(v.usage.calls for v in new.verdicts if getattr(v, "window", None) in redone)
                        results[metric] = new.model_dump(mode="json")
                        for judge_error in new.errors:
                            print(f"judgegraph rejudge: {where}: conversation {cid!r}, {metric}: judge error at"
                                  f" {judge_error.where}: {judge_error.message}", file=sys.stderr)
                        problems += len(new.errors)
                        failed = failed or new.status == "failed"
                        changed.append(f"{cid}: {_score(old.get('score'))} → {_score(new.score)} ({new.status})")
                        line = json.dumps(record, ensure_ascii=False) + "\n"
            dst.write(line if line.endswith("\n") else line + "\n")
    os.replace(tmp, args.out)
    for cid in sorted(wanted - seen):
        print(f"judgegraph rejudge: conversation {cid!r} has no {metric} result in {args.results}", file=sys.stderr)
        problems += 1
    print(f"{metric}: {len(changed)} result(s) re-judged with {calls} judge call(s); wrote {args.out}")
    for text in changed:
        print(f"  {text}")
    if problems:
        return EXIT_ERRORS
    return EXIT_FAILED if failed else EXIT_OK


def _score(value: Any) -> str:
    return "—" if value is None else f"{value:.2f}"
