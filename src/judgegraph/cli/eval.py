"""``judgegraph eval``: judge the conversations in files and/or MLflow sessions."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from .common import EXIT_ERRORS, EXIT_USAGE, read_guidelines, read_rubric


def register(sub: Any) -> None:
    ev = sub.add_parser("eval", help="judge conversations in files or MLflow sessions",
                        description="Judge the conversations in FILE(s) and/or the trace sessions of an MLflow experiment.")
    ev.add_argument("files", nargs="*", metavar="FILE", help=".jsonl, .json or .yaml (judgegraph, deepeval, promptfoo or OpenAI messages)")
    ev.add_argument("-m", "--metric", action="append", dest="metrics", metavar="METRIC",
                    help="metric to run, repeatable (default: turn-relevancy, or the file's own assertion)")
    ev.add_argument("--model", help="LLM judge, e.g. openai:gpt-4.1-mini (default: the offline embedding judge)")
    ev.add_argument("--base-url", help="OpenAI-compatible server for --model (vLLM, Ollama, llama.cpp)")
    ev.add_argument("--window-size", type=int, help="exchanges per sliding window")
    ev.add_argument("--threshold", type=float, help="passing score, 0..1")
    ev.add_argument("--strict", action="store_true", default=None, dest="strict_mode", help="score 1 or 0, threshold 1")
    ev.add_argument("--reason", choices=["deterministic", "llm", "none"], help="how the reason is written (default deterministic: no extra call)")
    ev.add_argument("--rubric", help="custom relevance rubric text, or @FILE to read it from a file")
    ev.add_argument("--verify", action="store_true", default=None,
                    help="turn-contextual-relevancy: a second look at every 'irrelevant' statement verdict")
    ev.add_argument("--n-questions", type=int, help="response-relevancy: questions generated per reply (default 3)")
    ev.add_argument("--embeddings", help="response-relevancy: embeddings model, e.g. openai:text-embedding-3-small "
                                         "(default: the offline all-MiniLM-L6-v2); served at --base-url when given")
    ev.add_argument("--guideline", action="append", dest="guidelines", metavar="TEXT",
                    help="conversational-guidelines: a guideline, repeatable; @FILE reads one per line")
    ev.add_argument("--role", help="role-adherence: the chatbot's role (default: each conversation's chatbot_role)")
    ev.add_argument("--concurrency", type=int, default=16, help="judge calls in flight at once, across all conversations (default 16)")
    ev.add_argument("--max-tries", type=int, default=3, help="asks per judgement when the model's output is invalid (default 3)")
    ev.add_argument("--allow-outside-files", action="store_true", default=None, help="promptfoo file:// references may leave the config file's folder")
    jg = ev.add_argument_group("judge client", "LLM judge settings (docs/judges.md)")
    jg.add_argument("--timeout", type=float, metavar="S", help="seconds per judge request (default 120)")
    jg.add_argument("--max-retries", type=int, metavar="N",
                    help="re-sends after a 429, 5xx, timeout or dropped connection (default 3); "
                         "401/403/404 and refused connections stop the judge at once")
    jg.add_argument("--rpm", type=float, metavar="N", help="judge requests per minute, for the whole run")
    jg.add_argument("--tpm", type=float, metavar="N", help="judge tokens per minute, for the whole run")
    jg.add_argument("--max-prompt-tokens", type=int, metavar="N",
                    help="a longer judge prompt is a judge error, not a call (default 120000)")
    jg.add_argument("--cache", metavar="PATH", help="the persistent judge cache file (SQLite; default: "
                    "$JUDGEGRAPH_CACHE_DIR/judge-cache.sqlite, used when the judge runs at temperature 0)")
    jg.add_argument("--no-cache", action="store_true", help="no judge cache at all: every judgement is asked")
    ev.add_argument("--out", default="judgegraph-results.jsonl", help="where the full results go (default %(default)s)")
    ev.add_argument("--html", metavar="FILE", help="also write an HTML report of the results (judgegraph report)")
    ev.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per conversation × metric")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.add_argument("-q", "--quiet", action="store_true", help="no table, only the summary line")
    sc = ev.add_argument_group("scale", "judge on every core, or on a Ray cluster (docs/scale.md)")
    sc.add_argument("--workers", type=_workers_arg, default="auto", metavar="N",
                    help="worker processes, each with its own event loop; --concurrency is the total of all of them "
                         "(default auto: one per core, up to 4, for an LLM judge and 64+ conversations; else 1)")
    sc.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                    help="run on a Ray cluster (pip install 'judgegraph[ray]'): ADDRESS such as 10.0.0.5:6379, or none "
                         "for the cluster ray.init() finds; --workers actors (default one per cluster CPU)")
    ml = ev.add_argument_group("MLflow", "judge the trace sessions of an MLflow experiment (pip install 'judgegraph[mlflow]')")
    ml.add_argument("--mlflow-uri", metavar="URI", help="MLflow tracking URI, e.g. http://127.0.0.1:5000")
    ml.add_argument("--experiment", metavar="NAME", help="experiment name (or id) whose traces are read")
    ml.add_argument("--log-assessments", action="store_true", help="write the results back to MLflow as assessments")
    ml.add_argument("--session-key", metavar="KEY", default="mlflow.trace.session", help="trace metadata key grouping traces into sessions (default %(default)s)")
    ml.add_argument("--max-traces", metavar="N", type=int, help="read the newest N traces (and the rest of their sessions)")
    ml.add_argument("--request-key", metavar="ARG", help="name of the traced function's argument holding the user message, when ambiguous")
    ml.add_argument("--response-key", metavar="KEY", help="key of the traced function's output holding the reply, when ambiguous")
    ev.set_defaults(run=run)


def _judge_settings(args: argparse.Namespace) -> dict[str, Any]:
    """``resolve_judge`` keyword arguments (data: worker processes rebuild the judge from them)."""
    kwargs: dict[str, Any] = {}
    if args.base_url and args.model:
        kwargs["base_url"] = args.base_url
    if args.model is None and args.base_url and not getattr(args, "embeddings", None):
        raise ValueError("--base-url needs --model (the model name the server serves) or --embeddings")
    if args.model is None:
        return {"cache": not args.no_cache}  # the other judge client flags are for LLM judges
    for name in ("timeout", "max_retries", "rpm", "tpm", "max_prompt_tokens"):
        if getattr(args, name, None) is not None:
            kwargs[name] = getattr(args, name)
    cache: Any = False if getattr(args, "no_cache", False) else (getattr(args, "cache", None) or True)
    return dict(model=args.model, max_concurrency=args.concurrency, max_tries=args.max_tries, cache=cache, **kwargs)


def _judge(args: argparse.Namespace):
    from ..judges import resolve_judge

    return resolve_judge(**_judge_settings(args))


def _workers_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None


def _workers(args: argparse.Namespace, conversations: int, kind: str = "llm") -> int | None:
    """``--workers``, with ``auto`` resolved (measured: docs/scale.md); None on
    Ray: one actor per CPU of the cluster."""
    from ..scale.spec import AUTO_MIN_CONVERSATIONS, auto_workers

    if args.workers != "auto":
        return int(args.workers)
    if args.ray:
        return None
    return 1 if conversations < AUTO_MIN_CONVERSATIONS else auto_workers(kind)


def _bad_number(args: argparse.Namespace) -> str | None:
    """Option values checked before any work, whichever metrics run."""
    if args.concurrency < 1:
        return f"--concurrency must be >= 1, got {args.concurrency}"
    if args.workers != "auto" and args.workers < 1:
        return f"--workers must be >= 1, got {args.workers}"
    if args.workers != "auto" and args.workers > args.concurrency:
        return f"--workers {args.workers} cannot share --concurrency {args.concurrency} (each needs at least 1)"
    if args.max_tries < 1:
        return f"--max-tries must be >= 1, got {args.max_tries}"
    judge_bad = _bad_judge_setting(args)
    if judge_bad:
        return judge_bad
    if args.threshold is not None and not 0.0 <= args.threshold <= 1.0:  # NaN fails the comparison too
        return f"--threshold must be between 0 and 1, got {args.threshold}"
    if args.window_size is not None and args.window_size < 1:
        return f"--window-size must be >= 1, got {args.window_size}"
    if args.n_questions is not None and args.n_questions < 1:
        return f"--n-questions must be >= 1, got {args.n_questions}"
    return None


def _bad_judge_setting(args: argparse.Namespace) -> str | None:
    for flag, value, low, strict in (("--timeout", args.timeout, 0, True), ("--max-retries", args.max_retries, 0, False),
                                     ("--rpm", args.rpm, 0, True), ("--tpm", args.tpm, 0, True),
                                     ("--max-prompt-tokens", args.max_prompt_tokens, 1, False)):
        if value is not None and not (value > low if strict else value >= low):  # NaN fails too
            return f"{flag} must be {'>' if strict else '>='} {low}, got {value}"
    if args.cache and args.no_cache:
        return "--cache and --no-cache cannot be used together"
    return None


def _fmt_score(score: float | None) -> str:
    return "—" if score is None else f"{score:.2f}"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from ..loaders import load_files
    from ..runner import MetricPlan, ResultsWriter, evaluate_async
    from ..scale.limits import ScaleStartError

    out = Console()
    if not out.is_terminal:
        out = Console(width=160)  # a log or a pipe: do not squeeze the table into 80 columns
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    bad = _bad_number(args)
    if bad:
        err.print(f"[red]error:[/] {bad}")
        return EXIT_USAGE
    usage = _mlflow_usage_error(args) or _ray_usage_error(args)
    if usage:
        err.print(f"[red]error:[/] {usage}")
        return EXIT_USAGE
    try:
        judge = _judge(args)
        overrides = {
            "window_size": args.window_size, "threshold": args.threshold, "strict_mode": args.strict_mode,
            "reason": args.reason, "rubric": read_rubric(args.rubric), "verify": args.verify,
            "n_questions": args.n_questions, "guidelines": read_guidelines(args.guidelines), "role": args.role,
            "embeddings": args.embeddings, "embeddings_base_url": args.base_url if args.embeddings else None,
        }
        plan = MetricPlan(args.metrics, judge, overrides)
        plan.check()
        if args.reason == "llm" and judge.kind != "llm":
            raise ValueError("--reason llm needs an LLM judge (--model)")
    except (KeyError, ValueError, TypeError, OSError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return EXIT_USAGE

    loaded = load_files(args.files, allow_outside_files=args.allow_outside_files)
    sessions = _load_mlflow(args, loaded) if args.mlflow_uri else []
    if judge.kind == "offline":
        err.print("judge: [bold]offline[/] all-MiniLM-L6-v2 sentence embeddings (no LLM, no API key; pass --model for an LLM judge)")
    else:
        err.print(f"judge: [bold]{judge.name}[/]")
        disk = judge.cache.disk if judge.cache is not None else None
        err.print(f"judge cache: {disk.path}" if disk is not None else "judge cache: off (on disk only at temperature 0)",
                  markup=False)
    for e in loaded.errors:
        err.print(f"[red]input error:[/] {e}")

    writer = ResultsWriter(args.out)
    for e in loaded.errors:
        writer.input_error(e)
    try:
        with Progress(TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, disable=args.no_progress, transient=True) as progress:
            task = progress.add_task("judging", total=len(loaded.conversations))

            def done(outcome) -> None:
                writer.outcome(outcome)
                progress.advance(task)

            async def judged():
                from ..scale import PlanSpec, judge_pool

                workers = _workers(args, len(loaded.conversations), judge.kind)
                spec = PlanSpec(args.metrics, _judge_settings(args), overrides)
                async with judge_pool(spec, workers=workers, ray=args.ray) as judge_one:  # None: this process
                    return await evaluate_async(loaded.conversations, plan, on_outcome=done, judge_one=judge_one,
                                                max_conversations=max(4, args.concurrency * 2))

            try:
                summary = asyncio.run(judged())
            except ScaleStartError as exc:
                from rich.markup import escape

                err.print(f"[red]error:[/] {escape(str(exc))}")
                return EXIT_ERRORS
    finally:
        writer.close()
    if args.junit:
        from ..apps.junit import write_junit

        write_junit(args.out, args.junit)
    summary.input_errors = list(loaded.errors)
    logged = None
    if args.log_assessments:
        from ..integrations.mlflow import log_assessments

        logged = log_assessments(args.mlflow_uri, summary, sessions)
        for failure in logged.failures:
            err.print(f"[red]MLflow write failed:[/] {failure}")

    order = {item.conversation.id: i for i, item in enumerate(loaded.conversations)}
    outcomes = sorted(summary.outcomes, key=lambda o: order.get(o.conversation_id, 0))
    if not args.quiet:
        table = Table(title="judgegraph results", show_lines=False)
        for col in ("conversation", "metric", "score", "result", "reason"):
            table.add_column(col, overflow="fold", max_width=70 if col == "reason" else None)
        style = {"passed": "green", "failed": "red", "error": "magenta", "not_applicable": "dim"}
        for o in outcomes:
            if o.error:
                table.add_row(o.conversation_id, "—", "—", "[magenta]error[/]", o.error)
            for r in o.results.values():
                label = {"not_applicable": "n/a"}.get(r.status, r.status)
                if r.errors and r.status in ("passed", "failed"):
                    label += f" ({len(r.errors)} judge err)"
                table.add_row(o.conversation_id, r.key, _fmt_score(r.score), f"[{style[r.status]}]{label}[/]", r.reason)
        out.print(table)
    u = summary.usage
    failed_runs = sum(1 for o in outcomes if o.error)
    if judge.kind == "llm":
        cost = f"calls {u.calls}, tokens {u.input_tokens} in / {u.output_tokens} out{' (estimated)' if u.estimated else ''}"
        if judge.cache is not None and (hits := judge.cache.hits + (judge.cache.disk.hits if judge.cache.disk else 0)):
            cost += f", {hits} answers from the cache"
    else:
        cost = "no LLM calls"
    out.print(
        f"{len(outcomes)} conversations, {len(summary.results)} results: "
        f"{summary.count('passed')} passed, {summary.count('failed')} failed, "
        f"{summary.count('error')} errors, {summary.count('not_applicable')} n/a; "
        f"{summary.judge_errors} judge errors, {len(summary.input_errors)} input errors"
        f"{f', {failed_runs} failed runs' if failed_runs else ''}. "
        f"judge: {judge.name} ({cost}). results: {args.out}"
    )
    if args.html:
        from .report import html_after_eval

        if html_after_eval(args, plan, loaded) != 0 and summary.exit_code < EXIT_ERRORS:
            return EXIT_ERRORS
    if logged is not None:
        out.print(f"MLflow: {logged} (experiment {args.experiment!r} at {args.mlflow_uri})")
        if logged.failures:
            return EXIT_ERRORS
    return summary.exit_code


def _ray_usage_error(args: argparse.Namespace) -> str | None:
    if args.ray:
        from importlib.util import find_spec

        if find_spec("ray") is None:  # checked without importing it
            from ..scale.ray_backend import RAY_MISSING

            return RAY_MISSING
    return None


def _mlflow_usage_error(args: argparse.Namespace) -> str | None:
    if not args.mlflow_uri and (args.experiment or args.log_assessments or args.max_traces is not None):
        return "--experiment, --log-assessments and --max-traces need --mlflow-uri URI"
    if not args.files and not args.mlflow_uri:
        return "nothing to judge: give at least one FILE, or --mlflow-uri URI --experiment NAME"
    if args.mlflow_uri and not args.experiment:
        return "--mlflow-uri needs --experiment NAME (the experiment whose trace sessions are judged)"
    if args.max_traces is not None and args.max_traces < 1:
        return f"--max-traces must be >= 1, got {args.max_traces}"
    if args.mlflow_uri:
        from importlib.util import find_spec

        if find_spec("mlflow") is None:  # checked without importing it
            return "--mlflow-uri needs MLflow: pip install 'judgegraph[mlflow]'"
    return None


def _load_mlflow(args: argparse.Namespace, loaded: Any) -> list[Any]:
    """Add the experiment's sessions (and their unreadable traces) to ``loaded``."""
    from ..integrations.mlflow import load_sessions
    from ..loaders import InputError

    sessions = load_sessions(args.mlflow_uri, args.experiment, session_key=args.session_key,
                             max_traces=args.max_traces, request_key=args.request_key,
                             response_key=args.response_key)
    loaded.errors.extend(sessions.errors)
    seen = {item.conversation.id: item.source for item in loaded.conversations}
    kept = []
    for item in sessions:
        cid = item.conversation.id
        if cid in seen:
            loaded.errors.append(InputError(args.mlflow_uri, None, cid, "session",
                                            f"duplicate conversation id {cid!r} (first seen at {seen[cid]})"))
            continue
        kept.append(item)
    loaded.conversations.extend(kept)
    return kept


