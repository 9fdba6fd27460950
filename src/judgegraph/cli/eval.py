"""``judgegraph eval``: judge the conversations in files, MLflow sessions and/or LangGraph threads."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from . import common
from .common import EXIT_ERRORS, markup_safe, os_error_message, safe, usage_error
from .configfile import apply_config
from .threads_option import add_thread_options, thread_inputs, thread_source_error, unique

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from rich.console import Console

    from ..cost.pricing import Prices
    from ..judges import Judge
    from ..loaders import InputError, LoadedConversation
    from ..runs.header import HeaderRecord
    from ..runs.runner import ConversationOutcome, MetricPlan, RunSummary
    from .common import Subparsers


def dense_refused(metrics: list[str] | None, judge: Judge) -> None:
    """``--dense`` needs an LLM judge and a metric with dense mode (judgegraph.core._dense says which and why): a
    ``ValueError`` otherwise."""
    from ..metrics import get_metric, registry

    if judge.kind != "llm":
        raise ValueError("--dense needs an LLM judge (--model): the offline judge makes no calls to merge")
    if metrics and not any("dense" in get_metric(m).options for m in metrics):
        dense = " and ".join(n.replace("_", "-") for n, spec in registry().items() if "dense" in spec.options)
        raise ValueError(f"--dense: none of {', '.join(metrics)} has a dense mode ({dense} have it; the others make "
                         "no overlapping per-window calls, docs/cost.md)")


def register(sub: Subparsers) -> None:
    ev = sub.add_parser("eval", help="judge conversations in files or MLflow sessions",
                        description="Judge the conversations in FILE(s) and/or the trace sessions of an MLflow experiment.")
    ev.add_argument("files", nargs="*", metavar="FILE", help=".jsonl, .json or .yaml (judgegraph, deepeval, promptfoo or OpenAI messages)")
    ev.add_argument("-m", "--metric", action="append", dest="metrics", metavar="METRIC",
                    help="metric to run, repeatable (default: turn-relevancy, or the file's own assertion)")
    common.add_judge_options(ev, model="LLM judge, e.g. openai:gpt-4.1-mini (default: the offline embedding judge)",
                             base_url="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)",
                             concurrency="judge calls in flight at once, across all conversations")
    common.add_metric_options(ev, role="role-adherence: the chatbot's role (default: each conversation's "
                                       "chatbot_role, else its system message)")
    ev.add_argument("--strict", action="store_true", default=None, dest="strict_mode", help="score 1 or 0, threshold 1")
    ev.add_argument("--reason", help="how the reason is written: deterministic (no extra call), llm or none (--option reason=)")
    ev.add_argument("--rubric", help="custom relevance rubric text, or @FILE to read it from a file")
    ev.add_argument("--dense", type=int, metavar="N", help="turn-relevancy, conversation-relevance: judge N windows "
                    "of a conversation per call, fewer tokens on long conversations (docs/cost.md)")
    ev.add_argument("--verify", action="store_true", default=None,
                    help="turn-contextual-relevancy: a second look at every 'irrelevant' statement verdict")
    ev.add_argument("--n-questions", type=int, help="response-relevancy: questions generated per reply (default 3)")
    common.add_shared(ev, "--embeddings")
    ev.add_argument("--offline-rule", metavar="FILE", help="the offline judge decides with this fitted rule "
                    "(judgegraph align; docs/offline_alignment.md)")
    common.add_aligned_option(ev)
    ev.add_argument("--allow-outside-files", action="store_true", default=None, help="promptfoo file:// references may leave the config file's folder")
    jg = ev.add_argument_group("judge client", "LLM judge settings (docs/judges.md)")
    jg.add_argument("--timeout", type=float, metavar="S",
                    help="deadline of each judge request, connect to the reply's last byte, in seconds (default 120)")
    jg.add_argument("--max-retries", type=int, metavar="N",
                    help="re-sends after a 429, 5xx, timeout or dropped connection (default 3); "
                         "401/403/404 and refused connections stop the judge at once")
    jg.add_argument("--rpm", type=float, metavar="N", help="judge requests per minute, for the whole run")
    jg.add_argument("--tpm", type=float, metavar="N", help="judge tokens per minute, for the whole run")
    jg.add_argument("--max-prompt-tokens", type=int, metavar="N",
                    help="a longer judge prompt is a judge error, not a call (default 120000)")
    jg.add_argument("--max-reply-bytes", type=int, metavar="N",
                    help="a longer judge reply (decoded) is cut off, a judge error (default 8388608: 8 MiB)")
    common.add_shared(jg, "--cache", "--no-cache")
    runs = ev.add_argument_group("runs", "durable runs: resume, cost, transcripts (docs/runs.md)")
    common.add_out_options(ev, runs, default="judgegraph-results.jsonl",
                           help="where the full results go (default %(default)s)")
    ev.add_argument("--html", metavar="FILE", help="also write an HTML report of the results (judgegraph report)")
    common.add_shared(ev, "--junit")
    runs.add_argument("--resume", action="store_true",
                      help="continue the run in --out: conversations already there are neither judged nor written again")
    runs.add_argument("--retry-errors", action="store_true",
                      help="with --resume: judge again the conversations written with judge errors or a failed run")
    runs.add_argument("--dry-run", action="store_true",
                      help="print the judge calls, tokens and cost the run will make, per metric; make no call")
    runs.add_argument("--batch", action="store_true",
                      help="send the judge requests through OpenAI's Batch API: half price, answers within 24 h; "
                           "--resume collects a run's batches instead of sending them again (docs/batch.md)")
    runs.add_argument("--batch-poll", type=float, default=5.0, metavar="S",
                      help="with --batch: first wait between polls of a batch, doubled up to 60 s (default 5)")
    common.add_shared(runs, "--price-in", "--price-out", "--prices", "--transcripts")
    runs.add_argument("--gate", choices=["stable"], help="stable: exit 1 only for failures that hold in every "
                      "repeat of a judge, not those that flipped (docs/stability.md)")
    runs.add_argument("--max-rows", type=int, default=50, metavar="N",
                      help="table rows at most, errors and failures first (default 50; all results are in --out)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    common.add_shared(ev, "--quiet")
    sc = ev.add_argument_group("scale", "judge on every core, or on a Ray cluster (docs/scale.md)")
    sc.add_argument("--workers", type=_workers_arg, default="auto", metavar="N",
                    help="worker processes, each with its own event loop; --concurrency is the total of all of them "
                         "(default auto: one per core, up to 4, for an LLM judge and 256 KB+ of input; else 1)")
    sc.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                    help="run on a Ray cluster (pip install 'judgegraph[ray]'): ADDRESS such as 10.0.0.5:6379, or none "
                         "for the cluster ray.init() finds; --workers actors (default one per cluster CPU)")
    ml = ev.add_argument_group("MLflow", "judge the trace sessions of an MLflow experiment (pip install 'judgegraph[mlflow]')")
    common.add_shared(ml, "--mlflow-uri")
    ml.add_argument("--experiment", metavar="NAME", help="experiment name (or id) whose traces are read")
    ml.add_argument("--log-assessments", action="store_true", help="write the results back to MLflow as assessments")
    ml.add_argument("--session-key", metavar="KEY", default="mlflow.trace.session", help="trace metadata key grouping traces into sessions (default %(default)s)")
    ml.add_argument("--max-traces", metavar="N", type=int, help="read the newest N traces (and the rest of their sessions)")
    ml.add_argument("--request-key", metavar="ARG", help="name of the traced function's argument holding the user message, when ambiguous")
    ml.add_argument("--response-key", metavar="KEY", help="key of the traced function's output holding the reply, when ambiguous")
    ev.add_argument("--config", metavar="FILE", help="settings from a judgegraph.yaml (judgegraph init writes one); "
                    "the command line overrides it (docs/runs.md)")
    add_thread_options(ev)
    ev.set_defaults(run=run, parser=ev)


def _workers_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None


def _workers(args: argparse.Namespace, input_bytes: int, kind: str = "llm") -> int | None:
    """``--workers``, with ``auto`` resolved from the size of the input files (measured: docs/scale.md); None on
    Ray: one actor per CPU of the cluster."""
    from ..scale.spec import AUTO_MIN_INPUT_BYTES, auto_workers

    if args.workers != "auto":
        return int(args.workers)
    if args.ray:
        return None
    return 1 if input_bytes < AUTO_MIN_INPUT_BYTES else auto_workers(kind)


def _bad_flags(args: argparse.Namespace) -> str | None:
    """eval's flags that go together or exclude each other, checked before any work (the numbers: check_numbers)."""
    if args.model is None and args.base_url and not args.embeddings:
        return "--base-url needs --model (the model name the server serves) or --embeddings"
    if args.workers != "auto" and args.workers > args.concurrency:
        return f"--workers {args.workers} cannot share --concurrency {args.concurrency} (each needs at least 1)"
    if args.retry_errors and not args.resume:
        return "--retry-errors goes with --resume (it judges again what the results file holds with errors)"
    if args.resume and args.overwrite:
        return "--resume and --overwrite exclude each other: continue the results file, or replace it"
    if args.batch and (args.ray or (args.workers != "auto" and args.workers > 1)):
        return "--batch judges in this process (the provider does the work): --workers and --ray do not apply"
    if args.batch and (args.rpm or args.tpm):
        return "--rpm and --tpm pace live calls; a batch is paced by the provider: leave them out with --batch"
    return None


def _unusable_inputs(files: list[str]) -> list[str]:
    """Input files that cannot be judged at all, each named: a path that is not there, or a judgegraph results
    file (:func:`judgegraph.runs.is_results_file`), which holds verdicts, not conversations."""
    from ..runs import is_results_file

    problems = []
    for name in files:
        if not Path(name).exists():
            problems.append(f"{name}: file not found")
        elif is_results_file(name):
            problems.append(f"{name} is a judgegraph results file (verdicts, not conversations): see it with "
                            f"`judgegraph report {name}`, or judge chosen verdicts again with `judgegraph rejudge "
                            f"{name} --input CONVERSATIONS ...`")
    return problems


def _out_error(args: argparse.Namespace) -> str | None:
    """``--out`` checked before any work: not an input, not a directory, and not
    a results file that would be lost (unless --resume / --overwrite)."""
    from ..runs.resultsfile import ResultsFileError, check_out_path

    try:  # a dry run writes nothing
        check_out_path(args.out, args.files, resume=args.resume, overwrite=args.overwrite or args.dry_run)
    except ResultsFileError as exc:
        return str(exc)
    for flag, value in (("--junit", args.junit), ("--html", args.html)):  # written after the run: checked before it
        if value and Path(value).is_dir():
            return f"{flag} {value} is a directory; give a file path such as {Path(value) / 'report'}"
        if value and any(parent.exists() and not parent.is_dir() for parent in Path(value).parents):
            return f"{flag} {value}: a folder on its path is a file"
    return None


def _jurors(args: argparse.Namespace, judge: Judge) -> list[str]:
    """The judge's jurors' names, one per repeat (a judge alone: itself); a dry run's judge stands for the first
    model only, so its jury is read from the command line."""
    if args.dry_run and args.model:
        from ..cost.dryrun import DryRunJudge

        return [DryRunJudge.name_for(m) for m in getattr(args, "models", None) or [args.model]] * (args.repeat or 1)
    return [j.name for j in getattr(judge, "jurors", None) or [judge]]


def _prices(args: argparse.Namespace, judge: Judge) -> Prices | None:
    """The judge's prices; a jury's, each juror's share at its own prices (pricing.jury_prices)."""
    from ..cost.pricing import jury_prices, user_prices

    if judge.kind != "llm":
        return None
    return jury_prices(_jurors(args, judge), args.price_in, args.price_out, user_prices(args.prices))


def _no_batch_api(args: argparse.Namespace, judge: Judge) -> str | None:
    """Why ``--batch`` cannot be used with this judge (said at once, exit 2); a real run asks the
    endpoint (``GET /v1/batches``), a dry run only looks at the judge."""
    from ..batch import NoBatchAPI, batch_client

    if args.dry_run:
        return None if judge.kind == "llm" else f"the {judge.name} judge makes no LLM calls: nothing to batch"
    try:
        batch_client(judge)
    except NoBatchAPI as exc:
        return str(exc)
    return None


def _resume_refused(args: argparse.Namespace, header: HeaderRecord, err: Console) -> str | None:
    """With ``--resume`` of a non-empty ``--out``: why it is refused (the settings differ from its
    header, each difference named), or None; a file without a header resumes, with a warning."""
    from ..runs import read_header
    from ..runs.header import differences
    from ..runs.resultsfile import is_nonempty

    if not args.resume or not is_nonempty(args.out):
        return None
    if (line := read_header(args.out)) is None:
        common.warn_headerless(err, args.out, "resumed without checking that its metrics, judge and inputs are this run's")
        return None
    if changed := differences(line.data(), header):
        return common.settings_refused("--resume", args.out, changed, "run with the settings of that file, or "
                                       "write the new run to another --out (or --overwrite it)")
    return None


def run(args: argparse.Namespace) -> int:
    from ..runs.header import run_header
    from ..runs.resultsfile import ResultsFileError, check_writable
    from ..runs.runner import MetricPlan

    out, err = common.consoles()
    if args.config:
        from ..runs.config import ConfigError

        try:
            apply_config(args, args.parser)
        except ConfigError as exc:
            return usage_error(err, exc)
    if bad := common.check_numbers(args):  # a flag's number, named as the flag
        return usage_error(err, bad)
    try:  # checked as early as a config file's options: the same refusal first, whatever else is wrong
        options = {**getattr(args, "config_options", {}), **common.metric_options(args)}  # flags over the file's
    except (KeyError, ValueError, TypeError, OSError) as exc:
        return usage_error(err, exc)
    for check in (_bad_flags, _source_error, common.aligned_error, common.guidelines_missing, _out_error):
        if bad := check(args):
            return usage_error(err, bad)
    try:
        settings = common.judge_settings(args, args.model, args.concurrency)  # data: workers rebuild the judge
        judge = common.make_judge(args, settings)
        plan = MetricPlan(args.metrics, judge, {
            **options, **({"embeddings_base_url": args.base_url} if args.embeddings and args.base_url else {})},
            getattr(args, "per_metric", None))
        plan.check()
        if options.get("reason") == "llm" and judge.kind != "llm":
            raise ValueError("--reason llm needs an LLM judge (--model)")
        if (options.get("dense") or 0) > 1:
            dense_refused(args.metrics, judge)
    except (KeyError, ValueError, TypeError, OSError) as exc:
        return usage_error(err, exc)
    if args.batch and (no_batch := _no_batch_api(args, judge)):
        return usage_error(err, no_batch)
    if unusable := _unusable_inputs(args.files):  # after the command line's checks, before anything is written: the corrected command runs
        for problem in unusable:
            err.print(f"[red]input error:[/] {markup_safe(problem)}")
        err.print(f"nothing was judged and nothing written (exit {EXIT_ERRORS})")
        return EXIT_ERRORS
    sources = [{"path": args.mlflow_uri, "experiment": args.experiment, "sha256": None}] if args.mlflow_uri else []
    args.header = run_header(plan, inputs=list(args.files), argv=getattr(args, "argv", None), sources=sources,
                             config=getattr(args, "config_data", None), judge_settings=settings)
    if refused := _resume_refused(args, args.header, err):
        return usage_error(err, refused)
    try:  # the last check before any work (a dry run writes nothing)
        if not args.dry_run:
            check_writable(args.out)
    except ResultsFileError as exc:
        return usage_error(err, exc)
    held, locked = common.lock_out(args)
    if locked:
        return usage_error(err, locked)
    _say_judge(args, judge, err)
    with held:
        return _dry_run(args, judge, plan, out, err) if args.dry_run else _run(args, judge, plan, settings, out, err)


def _say_judge(args: argparse.Namespace, judge: Judge, err: Console) -> None:
    """The judge of the run, where it is served, and its cache, on ``err``."""
    if judge.kind == "offline":
        err.print("judge: [bold]offline[/] all-MiniLM-L6-v2 sentence embeddings (no LLM, no API key; pass --model for an LLM judge)")
        return
    from ..providers import server_url

    url = getattr(judge, "base_url", "") or server_url(args.model, args.base_url)
    err.print(f"judge: [bold]{markup_safe(judge.name)}[/]" + (f" at {markup_safe(url)}" if url else "")
              + (" (OPENAI_BASE_URL)" if url and not args.base_url else ""))
    disk = getattr(getattr(judge, "jurors", [judge])[0].cache, "disk", None)  # a jury's: its first juror's
    if args.dry_run:
        return  # nothing is sent, so no cache is opened
    if disk is None:
        err.print("judge cache: off (on disk only at temperature 0)", markup=False)
    elif disk.usable():  # not usable: one warning above says why and how to fix it
        err.print(f"judge cache: {safe(disk.path)}", markup=False)
    else:
        err.print(f"judge cache: off for this run ({safe(disk.path)} {safe(disk.problem)})", markup=False)


def _inputs(args: argparse.Namespace) -> tuple[Iterator[LoadedConversation | InputError], list[LoadedConversation]]:
    """The stream of conversations (files read as judged, then MLflow sessions, then LangGraph threads) and the
    MLflow sessions (kept for --log-assessments)."""
    from ..runs.runner import iter_inputs

    seen: set[str] = set()
    sessions: list[LoadedConversation] = []
    errors: list[InputError] = []
    if args.mlflow_uri:  # the experiment's sessions, and the input errors of its unreadable traces
        from ..integrations.mlflow import load_sessions

        loaded = load_sessions(args.mlflow_uri, args.experiment, session_key=args.session_key,
                               max_traces=args.max_traces, request_key=args.request_key, response_key=args.response_key)
        sessions, errors = list(loaded), list(loaded.errors)
    files = iter_inputs(args.files, seen=seen, allow_outside_files=args.allow_outside_files)
    from_mlflow = unique([*errors, *sessions], args.mlflow_uri, "session", seen)
    return itertools.chain(files, from_mlflow, thread_inputs(args, seen)), sessions


def _dry_run(args: argparse.Namespace, judge: Judge, plan: MetricPlan, out: Console, err: Console) -> int:
    from ..cost.dryrun import DryRunJudge, StepCost
    from ..runs.dry import DryRunConversations
    from ..runs.resultsfile import scan_results
    from ..runs.runner import RunSummary, evaluate_async

    done = scan_results(args.out, repair=False, retry_errors=args.retry_errors).done if args.resume else set()
    summary = RunSummary(keep_outcomes=False, max_rows=0)
    # an LLM judge's requests are made by each metric's own nodes, without the graph's run when it can
    judge_one: Any = DryRunConversations(plan) if judge.kind == "llm" else _judge_nothing
    asyncio.run(evaluate_async(_inputs(args)[0], plan, skip=done, summary=summary,
                               max_conversations=max(4, args.concurrency * 2), judge_one=judge_one))
    for e in summary.input_errors:
        err.print(f"[red]input error:[/] {markup_safe(e)}")
    status = EXIT_ERRORS if summary.input_error_count or not (summary.conversations or done) else 0
    head = (f"dry run: {common.plural(summary.conversations, 'conversation')} to judge"
            + (f" ({len(done)} already in {markup_safe(args.out)}, skipped)" if done else "")
            + (f", {common.plural(summary.input_error_count, 'input error')}" if summary.input_error_count else ""))
    if judge.kind != "llm":
        out.print(f"{head}; the offline judge makes no LLM calls: nothing to pay. No call was made.")
        return status
    dry = cast(DryRunJudge, plan.judge)  # an LLM judge in a dry run is the DryRunJudge run() built
    prices = _prices(args, judge)
    jurors = len(_jurors(args, judge))  # each asked every request: the first one's requests, that many times
    est = dry.estimate(prices.batch() if prices is not None and args.batch else prices, jurors=jurors)
    table = common.table("metric / step", "calls", "input tokens", "output tokens (est.)", "cost",
                         left=("metric / step",), title=head)

    def row(label: str, c: StepCost, cost: str = "", style: str = "") -> None:
        table.add_row(label, str(c.calls), str(c.input_tokens), f"~{c.output_tokens}", cost, style=style)

    for metric, cost in est.by_metric().items():
        row(metric, cost, common.cost_text(est.cost_usd(cost)))
        steps = {step: c for step, c in est.steps.items() if step.startswith(metric + "/")}
        for step, c in steps.items() if len(steps) > 1 else ():
            row(f"  {step.split('/', 1)[1]}", c)
    row("total", est.total, common.cost_text(est.cost_usd()), style="bold")
    out.print(table)
    out.print(f"basis: {markup_safe(est.basis)}.")
    if est.cache_line:  # by the provider's rule (judgegraph.providers.prefixcache), or "unknown"
        out.print(markup_safe(est.cache_line))
    if jurors > 1:
        out.print(f"a jury: each judgement asks {jurors} jurors (models × repeats); the table counts every one.")
    if est.prices is not None:
        out.print(f"prices: {markup_safe(est.prices.describe())}.")
    out.print("No call was made.")
    return status


async def _judge_nothing(item: LoadedConversation) -> ConversationOutcome:
    """A dry run of the offline judge, which costs nothing: conversations are counted, none is judged."""
    from ..runs.runner import ConversationOutcome

    return ConversationOutcome(item.conversation.id, item.source)


def _run(args: argparse.Namespace, judge: Judge, plan: MetricPlan, settings: dict[str, Any], out: Console,
         err: Console) -> int:
    from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    from ..runs.runner import evaluate_to_file
    from ..scale import PlanSpec, judge_pool
    from .causes import FailureCauses

    stream, sessions = _inputs(args)
    causes = FailureCauses()  # said once after the table: the rows only say "see errors"
    prices = _prices(args, judge)
    keep = bool(args.log_assessments)  # MLflow writes need every result; otherwise finished results are dropped
    stopped_by: list[int] = []  # the signals that stopped the run: SIGTERM has its own exit status
    input_bytes = sum(os.path.getsize(f) for f in args.files if os.path.isfile(f))  # streamed: not counted before

    async def main() -> RunSummary:
        stop = asyncio.Event()
        common.stop_on_signals(stop, err, stopped_by, "finishing the results file")
        with Progress(SpinnerColumn(), TextColumn("judging"), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, disable=args.no_progress, transient=True) as progress:
            task = progress.add_task("judging", total=None)
            summary, answering, resumed = None, None, ""
            read: Iterable[LoadedConversation | InputError] | Callable[[], Iterable[LoadedConversation | InputError]]
            read = stream
            if args.batch:  # the judge's batch API answers; each pass reads the inputs again (docs/batch.md)
                from ..batch.run import BatchAnswering, BatchSummary

                summary = BatchSummary(judge=plan.judge.name, keep_outcomes=keep, max_rows=args.max_rows,
                                       prices=prices.batch() if prices else None, list_prices=prices)
                answering = BatchAnswering(plan, summary, poll_s=args.batch_poll,
                                           say=lambda line: err.print(markup_safe(line))).passes
                read, resumed = _read_again(args, stream), "; its batches are collected, not sent again"
            spec = PlanSpec(args.metrics, settings, plan.overrides, plan.per_metric)
            workers = 1 if args.batch else _workers(args, input_bytes, judge.kind)
            async with judge_pool(spec, workers=workers, ray=args.ray) as judge_one:  # None: judged in this process
                return await evaluate_to_file(
                    read, plan, args.out, resume=args.resume, retry_errors=args.retry_errors, overwrite=args.overwrite,
                    transcripts=args.transcripts, prices=summary.prices if summary else prices,
                    max_conversations=max(4, args.concurrency * 2), keep_outcomes=keep, max_rows=args.max_rows,
                    on_outcome=lambda o: causes.add(o.results.values(), then=lambda: progress.advance(task)),
                    on_input_error=lambda e: err.print(f"[red]input error:[/] {markup_safe(e)}"),
                    on_resumed=lambda state: err.print(
                        f"resuming {markup_safe(args.out)}: {common.plural(len(state.done), 'conversation')} already judged"
                        + (f", {state.retried} with errors to judge again" if state.retried else "")
                        + (", a torn last line cut off" if state.torn else "")
                        + (f", unreadable lines left as they are: {state.bad_lines[:5]}" if state.bad_lines else "")
                        + resumed),
                    stop=stop, judge_one=judge_one, answering=answering, summary=summary, header=args.header)

    try:
        summary = asyncio.run(main())
    except Exception as exc:
        if (why := _stopped_by(exc, args, plan)) is None:
            raise
        return usage_error(err, why, EXIT_ERRORS)
    unwritten = False  # --junit, --html or the MLflow assessments could not be written
    if args.junit:
        from ..apps.junit import write_junit

        try:
            write_junit(args.out, args.junit)
        except OSError as exc:
            err.print(f"[red]error:[/] cannot write --junit: {markup_safe(os_error_message(exc))}")
            unwritten = True
    logged = None
    if args.log_assessments and not summary.interrupted:
        from ..integrations.mlflow import log_assessments

        logged = log_assessments(args.mlflow_uri, summary, sessions)
        for failure in logged.failures:
            err.print(f"[red]MLflow write failed:[/] {markup_safe(failure)}")
    if not args.quiet:
        _print_table(out, summary)
    if (why := causes.report()) is not None:
        out.print(Text(safe(why), style="magenta"), soft_wrap=True)
    u = summary.usage
    if judge.kind == "llm":
        cached = f" ({u.cached_input_tokens} in from the provider's prompt cache)" if u.cached_input_tokens else ""
        cost = (f"calls {u.calls}, tokens {u.input_tokens} in / {u.output_tokens} out"
                f"{' (estimated)' if u.estimated else ''}{cached}, {common.cost_text(summary.cost_usd)}")
        if args.batch:
            from ..batch import BatchSummary

            if isinstance(summary, BatchSummary):
                if (listed := summary.list_cost_usd) is not None:
                    cost += f" at batch price (list price {common.cost_text(listed)})"
                cost += f", {len(summary.batches)} batches"
        if judge.cache is not None and (hits := judge.cache.hits + (judge.cache.disk.hits if judge.cache.disk else 0)):
            cost += f", {hits} answers from the cache"
    else:
        cost = "no LLM calls"
    out.print(
        f"{common.plural(summary.conversations, 'conversation')}"
        f"{f' ({summary.resumed} from the resumed file)' if summary.resumed else ''}, "
        f"{common.plural(summary.result_count, 'result')}: {summary.count('passed')} passed, {summary.count('failed')} "
        f"failed, {common.plural(summary.count('error'), 'error')}, {summary.count('not_applicable')} n/a; "
        f"{common.plural(summary.judge_errors, 'judge error')}, {common.plural(summary.input_error_count, 'input error')}"
        f"{', ' + common.plural(summary.failed_runs, 'failed run') if summary.failed_runs else ''}. "
        f"judge: {markup_safe(judge.name)} ({cost}). results: {markup_safe(args.out)}",
        highlight=False, soft_wrap=True,
    )
    if summary.interrupted:
        out.print(f"[yellow]interrupted[/]: written, {common.plural(summary.conversations, 'conversation')} above; "
                  f"continue with the same command and --resume.")
    if summary.problem:
        out.print(f"[red]batch:[/] {markup_safe(summary.problem)}", soft_wrap=True)
    if args.html:
        from .report import html_after_eval

        unwritten = html_after_eval(args, plan.graphs) != 0 or unwritten
    if logged is not None:
        out.print(f"MLflow: {markup_safe(logged)} (experiment {markup_safe(repr(args.experiment))} at "
                  f"{markup_safe(args.mlflow_uri)})")
        unwritten = unwritten or bool(logged.failures)
    if unwritten and summary.exit_code < EXIT_ERRORS:  # the results are written, not all that was asked with them
        return EXIT_ERRORS
    if signal.SIGTERM in stopped_by and summary.interrupted:
        return common.EXIT_TERMINATED
    if args.gate == "stable" and not summary.interrupted:
        from .stability import gate_exit

        return gate_exit(args, summary.exit_code, [s.conversation for s in sessions], out, err)
    return summary.exit_code


def _stopped_by(exc: Exception, args: argparse.Namespace, plan: MetricPlan) -> str | None:
    """What to say of ``exc``, which stopped the run, when it is not a bug (None): the lines written before it
    stay in ``--out``, and ``--resume`` goes on."""
    import openai

    from ..scale.limits import ScaleStartError

    if isinstance(exc, ScaleStartError):
        return str(exc)
    if args.batch:  # the batch package imports the openai SDK: a run without --batch does not pay for it
        from ..batch.client import BatchWaitTimeout

        if isinstance(exc, BatchWaitTimeout):
            return f"{exc}; what was judged is in {args.out} (--resume --batch collects the batch when it ends)"
    if isinstance(exc, openai.APIError):  # the Batch API failed past the SDK's retries: nothing judged is lost
        return (f"the batch API failed: {type(exc).__name__}: {getattr(plan.judge, 'redact', str)(str(exc))[:300]}; "
                f"what was judged is in {args.out} (--resume --batch goes on)")
    if isinstance(exc, OSError):  # a full disk, --out /dev/full
        return (f"the run could not complete: {os_error_message(exc)}; what was written to {args.out} before it is "
                "kept (--resume continues)")
    return None


def _read_again(args: argparse.Namespace, stream: Iterator[LoadedConversation | InputError]
                ) -> Callable[[], Iterator[LoadedConversation | InputError]]:
    """The inputs of each pass of a ``--batch`` run: ``stream``, then read afresh."""
    first = [stream]
    return lambda: first.pop() if first else _inputs(args)[0]


def _print_table(out: Console, summary: RunSummary) -> None:
    """At most ``--max-rows`` rows (a row a conversation × metric), errors and failures first, in input order."""
    from rich.text import Text

    from ..runs.runner import result_priority

    table = common.table("conversation", "metric", "score", "result", "reason", fold=True, wide=("reason",), width=70,
                         title="judgegraph results", show_lines=False)
    style = {"passed": "green", "failed": "red", "error": "magenta", "not_applicable": "dim"}
    rows: list[tuple[int, tuple[Any, ...]]] = []  # (priority, cells), in input order
    for o in summary.rows:
        cid = Text(safe(o.conversation_id))
        if o.error:
            rows.append((3, (cid, "—", "—", Text("error", style="magenta"), Text(safe(o.error)))))
        for r in o.results.values():
            label = {"not_applicable": "n/a"}.get(r.status, r.status)
            failed = sum(v.verdict is None for v in r.verdicts)
            if failed and r.status in ("passed", "failed", "error") and len(r.verdicts) > failed:
                label += f" (judged {len(r.verdicts) - failed} of {len(r.verdicts)}; {failed} judge errors)"
            elif r.errors and r.status in ("passed", "failed"):
                label += f" ({len(r.errors)} judge err)"
            rows.append((result_priority(r),
                         (cid, Text(safe(r.key)), common.score_text(r.score), Text(label, style=style[r.status]),
                          Text(safe(r.reason)))))
    shown = sorted(sorted(range(len(rows)), key=lambda i: -rows[i][0])[:summary.max_rows])
    for i in shown:
        table.add_row(*rows[i][1])
    out.print(table)
    left = summary.result_count + summary.failed_runs - len(shown)
    if left > 0:
        out.print(f"{common.plural(left, 'more row')} not shown (errors and failures are shown first; "
                  f"--max-rows N shows more; every result is in the results file)")


def _source_error(args: argparse.Namespace) -> str | None:
    """What is wrong with what is judged, and where: FILEs and/or MLflow, and the extras --mlflow-uri and --ray need."""
    if not args.mlflow_uri and (args.experiment or args.log_assessments or args.max_traces is not None):
        return "--experiment, --log-assessments and --max-traces need --mlflow-uri URI"
    if bad := thread_source_error(args):
        return bad
    if not args.files and not args.mlflow_uri and not args.checkpointer and not args.langgraph_url:
        return ("nothing to judge: give at least one FILE, --mlflow-uri URI --experiment NAME, "
                "--checkpointer sqlite:PATH or --langgraph-url URL")
    if args.mlflow_uri and not args.experiment:
        return "--mlflow-uri needs --experiment NAME (the experiment whose trace sessions are judged)"
    from importlib.util import find_spec  # the extras are looked for without importing them

    if args.mlflow_uri and find_spec("mlflow") is None:
        return "--mlflow-uri needs MLflow: pip install 'judgegraph[mlflow]'"
    if args.ray and find_spec("ray") is None:
        from ..scale.ray_backend import RAY_MISSING

        return RAY_MISSING
    return None
