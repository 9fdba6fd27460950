"""``judgegraph rejudge``: re-judge chosen verdicts of a results file with a new rubric, prompt or model

Re-judge chosen verdicts of RESULTS (a judgegraph eval --out file) with a changed rubric, prompt or model. Verdicts
not chosen are kept (no calls), and so are the answers they were judged from; each changed result is recomputed with
its metric's own rules; every other line is copied as it is. Any metric, built-in or custom (-m module:attr). (docs/steering.md)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import common
from .common import EXIT_ERRORS, EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..data.conversation import Conversation
    from ..data.prompts import Prompt
    from ..data.results import MetricResult
    from ..judges import Judge
    from ..runs.header import HeaderRecord
    from .common import Subparsers


#: print a message of this command on stderr (data made safe to print); returns the status, exit 2 by default
_say = partial(common.fail, prefix="judgegraph rejudge")


def register(sub: Subparsers) -> None:
    p = common.add_results_command(sub, run, results="results file (.jsonl) written by judgegraph eval")
    common.add_shared(p, "--input", required=True, default=None)
    p.add_argument("-m", "--metric", required=True, metavar="METRIC", help="the metric whose verdicts are re-judged")
    p.add_argument("--conversation", action="append", dest="conversations", metavar="ID",
                   help="conversation to re-judge, repeatable (default: every conversation in RESULTS)")
    p.add_argument("--verdict", action="append", dest="verdicts", metavar="ID",
                   help="a verdict's id, as `judgegraph show` prints it (a window number, a goal, a statement),"
                        " repeatable (default: every verdict)")
    p.add_argument("--window", action="append", dest="verdicts", metavar="N",
                   help="the same as --verdict, for window verdicts (turn-relevancy, conversation-relevance)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--rubric", help="the new rubric text, or @FILE to read it from a file (metrics with a rubric)")
    what.add_argument("--prompt", metavar="FILE", help="a new prompt file for the step that makes the verdicts"
                                                       " (placeholders among those the step fills)")
    common.add_metric_options(p, scored=False,
                              role="role-adherence: the role the results were judged with, if given then",
                              guideline="conversational-guidelines: the guidelines the results were judged with"
                                        " (results do not record them), repeatable; @FILE reads one per line")
    common.add_judge_options(p, model="LLM judge, e.g. openai:gpt-4.1-mini (needed: a rubric or prompt steers an LLM)",
                             base_url="OpenAI-compatible server for --model", concurrency="judge calls in flight at once")
    common.add_out_options(p, required=True, metavar="NEW.jsonl", help="where the new results file goes")
    common.add_aligned_option(p)


def run(args: argparse.Namespace) -> int:
    from ..judges import resolve_judge
    from ..loaders import load_files
    from ..metrics import MetricNotFound, canonical_name, get_metric
    from ..runs.resultsfile import ResultsFileError, check_out_path
    from ..steering import RejudgeError, as_prompt

    try:
        spec = get_metric(args.metric)
    except MetricNotFound as exc:
        return _say(exc)
    if not args.model:
        return _say("re-judging asks an LLM judge: give --model (and --base-url for a local server)")
    if (bad := common.check_numbers(args) or common.aligned_error(args)) is not None:
        return _say(bad)
    if not Path(args.results).is_file():
        return _say(f"results file {args.results!r} not found")
    try:  # not a directory, RESULTS or an input
        check_out_path(args.out, [args.results, *args.inputs])
    except ResultsFileError as exc:
        return _say(exc)
    if refused := common.out_refused(args):
        return _say(refused)
    rubric = args.rubric
    try:
        if rubric and rubric.startswith("@"):
            rubric = common.read_text_option("--rubric", rubric[1:])
        prompt = as_prompt(args.prompt)
        options = common.metric_options(args, skip=("rubric",))  # --rubric: the new rubric the verdicts are steered by
        settings = common.judge_settings(args, args.model, args.concurrency)
        judge = resolve_judge(**settings)
    except UnicodeDecodeError as exc:
        return _say(f"--prompt {args.prompt}: not valid UTF-8 (byte {exc.start + 1})")
    except (OSError, ValueError, RejudgeError) as exc:
        return _say(exc)
    loaded = load_files(args.inputs)
    for err in loaded.errors:
        _say(f"input: {err}")
    held, locked = common.lock_out(args)
    if locked:
        return _say(locked)
    from ..runs import read_header
    from ..runs.header import rejudge_header

    metric = spec.name if ":" not in args.metric else canonical_name(args.metric)
    header = rejudge_header(
        old.data() if (old := read_header(args.results)) is not None else None, source=Path(args.results),
        metric=metric, judge=judge, judge_settings=settings, rubric=rubric, prompt=args.prompt,
        conversations=sorted(set(args.conversations or [])), verdicts=args.verdicts or (),
        argv=["judgegraph", *sys.argv[1:]])
    with held:
        return _rejudge(args, header, metric, spec.name, judge, {c.conversation.id: c.conversation
                                                                 for c in loaded.conversations}, rubric, prompt, options)


def _rejudge(args: argparse.Namespace, header: HeaderRecord, metric: str, name: str, judge: Judge,
             conversations: dict[str, Conversation], rubric: str | None, prompt: Prompt | None,
             options: dict[str, Any]) -> int:
    """Write ``--out``: RESULTS with the chosen verdicts judged again (the caller holds ``--out``'s lock)."""
    from ..runs import elide_duplicates, restore_elided
    from ..runs.resultsfile import ResultsWriter
    from ..steering import RejudgeError, rejudge_result

    wanted = set(args.conversations or [])
    problems: list[str] = []  # each said on stderr as it happens
    failed = False
    changed: list[str] = []
    calls = 0
    seen: set[str] = set()

    def problem(message: str) -> None:
        problems.append(message)
        _say(message)

    tmp = Path(f"{args.out}.tmp")
    # surrogateescape: a byte that is not UTF-8 is copied back as it was
    with open(args.results, encoding="utf-8", errors="surrogateescape") as src, \
            closing(ResultsWriter(tmp, errors="surrogateescape")) as dst:
        dst.write(header)  # its own header: what was re-judged, how, from what
        for lineno, line in enumerate(src, 1):
            record, where = None, f"{args.results}:{lineno}"
            try:
                record = json.loads(line) if line.strip() else None
            except (ValueError, RecursionError) as exc:
                why = f"not JSON ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else "nested too deeply to read"
                problem(f"{where}: {why}; copied as it is")
            record = restore_elided(record) if isinstance(record, dict) else {}  # a long reason is stored once
            if record.get("type") in ("header", "summary"):
                continue  # the input's header is in the new one; its summary no longer holds (read from the lines)
            cid, results = record.get("conversation_id"), record.get("results")
            key = _result_key(results, metric, name) if isinstance(results, dict) else None
            if record.get("type") == "conversation" and isinstance(results, dict) and key is not None \
                    and (not wanted or cid in wanted):
                seen.add(str(cid))
                old, new, conversation = results[key], None, conversations.get(str(cid))
                if conversation is None:
                    problem(f"{where}: conversation {cid!r} is not in {', '.join(args.inputs)}; its result is kept")
                else:
                    try:
                        new = rejudge_result(old, conversation, model=judge, verdict_ids=args.verdicts, rubric=rubric,
                                             prompt=prompt, metric=args.metric, options=options)
                    except (RejudgeError, ValueError) as exc:
                        problem(f"{where}: conversation {cid!r}, {metric}: {exc}; its result is kept")
                if new is not None:
                    calls += new_calls(old, new)
                    results[key] = new.model_dump(mode="json")
                    for e in new.errors:
                        problem(f"{where}: conversation {cid!r}, {metric}: judge error at {e.where}: {e.message}")
                    failed = failed or new.status == "failed"
                    changed.append(f"{cid}: {common.score_text(old.get('score'))} → {common.score_text(new.score)}"
                                   f" ({new.status})")
                    line = json.dumps(elide_duplicates(record), ensure_ascii=False)
            dst.copy(line)
    os.replace(tmp, args.out)
    for cid in sorted(wanted - seen):
        problem(f"conversation {cid!r} has no {metric} result in {args.results}")
    print(f"{metric}: {len(changed)} result(s) re-judged with {calls} judge call(s); wrote {args.out}")
    for text in changed:
        print(f"  {text}")
    if problems:
        return EXIT_ERRORS
    return EXIT_FAILED if failed else EXIT_OK


def _result_key(results: Mapping[str, object], metric: str, name: str) -> str | None:
    """The key of the metric's result in a results line (its name, or for an import path the one custom result)."""
    if key := next((k for k in (metric, name) if k in results), None):
        return key
    return next(iter(results)) if ":" in metric and len(results) == 1 else None


def new_calls(old: MetricResult | dict[str, Any], new: MetricResult | dict[str, Any]) -> int:
    """Judge requests the re-judge sent: attempts in the new result's transcripts that are neither cached
    nor in the old result's."""
    def attempts(result: MetricResult | dict[str, Any]) -> list[dict[str, Any]]:  # JSON records
        data = result if isinstance(result, dict) else result.model_dump(mode="json")
        out = list(data.get("transcript") or [])
        for v in data.get("verdicts") or []:
            out.extend(v.get("transcript") or [])
        return out

    seen = {(a.get("request"), a.get("reply"), a.get("latency_s")) for a in attempts(old)}
    return sum(1 for a in attempts(new)
               if not a.get("cached") and (a.get("request"), a.get("reply"), a.get("latency_s")) not in seen)
