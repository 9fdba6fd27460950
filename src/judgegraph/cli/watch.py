"""``judgegraph watch``: judge an agent's threads once they have ended (:mod:`judgegraph.runs.watch`; docs/threads.md)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import common
from .common import EXIT_ERRORS, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, markup_safe, safe, usage_error
from .threads_option import add_thread_options, thread_filters, thread_source_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from ..data.conversation import Conversation
    from ..runs.runner import ConversationOutcome, MetricPlan, RunSummary
    from ..runs.watch import ThreadSource
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    w = sub.add_parser("watch", help="judge a checkpointer's or LangGraph server's threads as they end",
                       description="Poll an agent's threads and judge each one once, when it has been idle for "
                                   "--idle seconds; results are appended to --out as eval writes them.")
    add_thread_options(w, threads=False)
    w.add_argument("-m", "--metric", action="append", dest="metrics", metavar="METRIC",
                   help="metric to run, repeatable (default turn-relevancy)")
    common.add_judge_options(w, model="LLM judge, e.g. openai:gpt-4.1-mini (default: the offline embedding judge)",
                             base_url="OpenAI-compatible server for --model", concurrency="judge calls in flight at once")
    common.add_metric_options(w, role="role-adherence: the chatbot's role")
    p = w.add_argument_group("polling")
    p.add_argument("--idle", type=float, default=300.0, metavar="SECONDS",
                   help="a thread not updated for this long has ended and is judged (default %(default)s)")
    p.add_argument("--sample", type=float, default=1.0, metavar="RATE",
                   help="judge this share of the threads, 0..1, chosen by --seed and the thread id (default 1)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--interval", type=float, default=30.0, metavar="SECONDS", help="between polls (default %(default)s)")
    p.add_argument("--once", action="store_true", help="poll once, judge what is due, stop")
    p.add_argument("--max-polls", type=int, metavar="N", help="stop after N polls")
    p.add_argument("--out", default="judgegraph-watch.jsonl", help="results file, appended to (default %(default)s)")
    p.add_argument("--state", metavar="PATH", help="the threads already judged (SQLite; default: --out's path + "
                   "'.watched.sqlite'): a restart judges none of them again")
    common.add_shared(p, "--transcripts")
    ml = w.add_argument_group("MLflow", "write the verdicts to an MLflow experiment (pip install 'judgegraph[mlflow]')")
    ml.add_argument("--log-assessments", action="store_true", help="log each judged thread to --experiment as a "
                    "trace carrying its verdicts as assessments (docs/mlflow.md)")
    common.add_shared(ml, "--mlflow-uri")
    ml.add_argument("--experiment", metavar="NAME", help="experiment the traces go to (created if missing)")
    w.set_defaults(run=run, checks=(common.check_numbers, _bad))


def _bad(args: argparse.Namespace) -> str | None:
    if not (args.checkpointer or args.langgraph_url):
        return "watch needs --checkpointer sqlite:PATH or --langgraph-url URL"
    if bad := thread_source_error(args):
        return bad
    if not 0 < args.sample <= 1:
        return f"--sample must be > 0 and <= 1, got {args.sample}"
    if args.once and args.max_polls not in (None, 1):
        return "--once is --max-polls 1: give one of them"
    if Path(args.out).is_dir():
        return f"--out {args.out} is a directory"
    if (args.mlflow_uri or args.experiment) and not args.log_assessments:
        return "--mlflow-uri and --experiment go with --log-assessments (watch reads LangGraph threads, not MLflow)"
    if args.log_assessments and not (args.mlflow_uri and args.experiment):
        return "--log-assessments needs --mlflow-uri URI and --experiment NAME (the experiment the traces go to)"
    if args.log_assessments:
        from ..integrations.mlflow.common import import_mlflow

        try:
            import_mlflow()
        except ImportError as exc:
            return str(exc)
    return None


def run(args: argparse.Namespace) -> int:
    from ..judges import resolve_judge
    from ..runs.runner import MetricPlan

    out, err = common.consoles()
    try:
        settings = common.judge_settings(args, args.model, args.concurrency)
        plan = MetricPlan(args.metrics, resolve_judge(**settings), common.metric_options(args))
        plan.check()
    except (KeyError, ValueError, TypeError, OSError) as exc:
        return usage_error(err, exc)
    held, locked = common.lock_out(args)  # one watcher per results file
    if locked:
        return usage_error(err, locked)
    with held, contextlib.ExitStack() as stack:
        source = _source(args, stack, err)
        return EXIT_ERRORS if source is None else _watch(args, source, plan, settings, out, err)


def _source(args: argparse.Namespace, stack: contextlib.ExitStack, err: Console) -> ThreadSource | None:
    """The threads watched, or None (said on ``err``) when the checkpointer or server cannot be read."""
    from ..runs.watch import CheckpointerThreads, ServerThreads

    kw, where = thread_filters(args), ""
    try:
        if args.checkpointer:
            from ..loaders.langgraph_threads import checkpointer_name, open_checkpointer

            where = checkpointer_name(args.checkpointer)
            return CheckpointerThreads(stack.enter_context(open_checkpointer(args.checkpointer)), where, **kw)
        from ..loaders.langgraph_server import client

        return ServerThreads(client(args.langgraph_url), args.langgraph_url, **kw)
    except OSError as exc:  # a server that does not answer: ServerUnreachable
        err.print(f"[red]error:[/] {markup_safe(f'{where}: {exc}' if where else exc)}")
        return None


def _watch(args: argparse.Namespace, source: ThreadSource, plan: MetricPlan, settings: dict[str, Any], out: Console,
           err: Console) -> int:
    from ..runs.header import RunSettingsChanged
    from ..runs.watch import Remembered, Watch, begin

    state = Path(args.state) if args.state else Path(f"{args.out}.watched.sqlite")
    watched = {"idle": args.idle, "sample": args.sample, "seed": args.seed, "transcripts": args.transcripts}
    try:  # --out made with other settings is refused, each difference named (as eval --resume names them)
        start = begin(args.out, plan, source, argv=getattr(args, "argv", None), watched=watched, judge_settings=settings)
    except RunSettingsChanged as exc:
        return usage_error(err, common.settings_refused("watch", args.out, exc.differences,
                                                        "watch with the settings of that file, or write to another --out"))
    if start.old is None and not start.fresh:
        common.warn_headerless(err, args.out, "appended to without checking that its metrics and judge are this watch's")
    if args.log_assessments:
        from ..integrations.mlflow.common import unreachable

        if why := unreachable(args.mlflow_uri):
            err.print(f"[red]error:[/] {markup_safe(why)}")
            return EXIT_ERRORS
    remembered = Remembered(state)
    stopped_by: list[int] = []
    unlogged: list[str] = []

    def said(o: ConversationOutcome) -> None:
        shown = ", ".join(f"{r.key} {r.status}" + (f" {r.score:.2f}" if r.score is not None else "")
                          for r in o.results.values())
        out.print(f"{safe(o.conversation_id)}: {safe(o.error or shown)}", markup=False, highlight=False)

    watch = Watch(source, plan, args.out, remembered, idle=args.idle, sample=args.sample, seed=args.seed,
                  interval=args.interval, max_polls=1 if args.once else args.max_polls, transcripts=args.transcripts,
                  max_conversations=max(4, args.concurrency * 2), on_outcome=said, start=start,
                  on_input_error=lambda e: err.print(f"[red]input error:[/] {markup_safe(e)}"),
                  on_poll=lambda n, judged: err.print(f"poll {n}: {common.plural(judged, 'thread')} judged", markup=False),
                  on_judged=_mlflow_writer(args, err, unlogged) if args.log_assessments else None)

    async def main() -> RunSummary:
        stop = asyncio.Event()
        common.stop_on_signals(stop, err, stopped_by, "stopping the watch, the judged threads are written")
        return await watch.run(stop)

    err.print(f"watching {markup_safe(source.where)}: threads idle for {args.idle:g}s"
              + (f", a {args.sample:g} sample (seed {args.seed})" if args.sample < 1 else "")
              + f"; judged ones remembered in {markup_safe(state)}")
    try:
        summary = asyncio.run(main())
    finally:
        remembered.close()
    out.print(f"{common.plural(watch.polls, 'poll')}, {common.plural(summary.conversations, 'thread')} judged: "
              f"{summary.count('passed')} passed, {summary.count('failed')} failed, "
              f"{common.plural(summary.count('error'), 'error')}; {common.plural(summary.judge_errors, 'judge error')}, "
              f"{common.plural(summary.input_error_count, 'input error')}. results: {markup_safe(args.out)}",
              highlight=False, soft_wrap=True)
    if summary.interrupted:
        return common.EXIT_TERMINATED if signal.SIGTERM in stopped_by else EXIT_INTERRUPTED
    if unlogged:
        err.print(f"[red]MLflow:[/] {len(unlogged)} writes failed (the verdicts are in {markup_safe(args.out)})")
    if summary.input_error_count or summary.judge_errors or summary.count("error") or summary.failed_runs or unlogged:
        return EXIT_ERRORS
    return EXIT_FAILED if summary.count("failed") else EXIT_OK


def _mlflow_writer(args: argparse.Namespace, err: Console,
                   failures: list[str]) -> Callable[[list[tuple[Conversation, ConversationOutcome]]], None]:
    """What ``--log-assessments`` does after each poll: the final judgements, one MLflow trace each with its
    assessments (:func:`judgegraph.integrations.mlflow.traces.log_conversation_traces`); failures said and kept."""
    from ..integrations.mlflow.traces import log_conversation_traces

    def write(judged: list[tuple[Conversation, ConversationOutcome]]) -> None:
        logged = log_conversation_traces(args.mlflow_uri, args.experiment, judged)
        for failure in logged.failures:
            err.print(f"[red]MLflow write failed:[/] {markup_safe(failure)}")
        failures.extend(logged.failures)
        err.print(f"MLflow ({len(judged)} threads, experiment {markup_safe(repr(args.experiment))}): {markup_safe(logged)}")

    return write

