"""What several subcommands share: exit statuses, the flags several commands have (declared once: :data:`SHARED`
and the ``add_*`` groups; checked once by :func:`check_numbers`), and option readers."""

from __future__ import annotations

import argparse
import contextlib
import copy
import inspect
import json
import re
import signal
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ..data.safetext import safe as safe  # the commands print data with common.safe

if TYPE_CHECKING:
    import asyncio
    from contextlib import AbstractContextManager

    from rich.console import Console
    from rich.table import Table

    from ..judges import Judge

    #: what each subcommand module's ``register`` adds its parser to
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ERRORS, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
#: The exit status of a run stopped by SIGTERM (128 + 15, as a shell reports it);
#: everything finished is written and the summary printed, as after Ctrl-C (130).
EXIT_TERMINATED = 143

#: the most judge calls (``--concurrency``) or simulated conversations a command runs at
#: once: each one in flight holds its conversation, prompt and reply in memory (measured:
#: 213 MB at 16 and 1.46 GB at 100,000 on 10,000 conversations), and no judge server
#: serves more; a larger value is refused (exit 2), never silently cut
MAX_CONCURRENCY = 1024


def read_text_option(flag: str, path: str | Path) -> str:
    """The text of a file an option names; ValueError naming the option and the
    file when it cannot be read or is not UTF-8 (a usage error, never a crash)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{flag} {path}: not valid UTF-8 (byte {exc.start + 1})") from None
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from None


def add_results_command(sub: Subparsers, run: Callable[[argparse.Namespace], int], *, nargs: str | None = None,
                        **files: str) -> argparse.ArgumentParser:
    """The parser of a command that reads results files, running ``run``: named, helped and described by its module
    docstring (``"``judgegraph NAME``: HELP"``, then the description), a positional per ``files`` keyword (``OLD NEW``)."""
    head, _, description = inspect.cleandoc(sys.modules[run.__module__].__doc__ or "").partition("\n\n")
    usage, _, help = " ".join(head.split()).partition(": ")
    p = sub.add_parser(usage.strip("`").split()[1], help=help, description=" ".join(description.split()))
    for dest, text in files.items():
        p.add_argument(dest, metavar=dest.upper(), nargs=nargs, help=text)
    p.set_defaults(run=run)
    return p


class Models(argparse.Action):
    """``--model``, repeatable (a jury): ``models`` holds every one given, ``model`` the first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.models = [*(getattr(namespace, "models", None) or []), values]
        setattr(namespace, self.dest, namespace.models[0])


def add_judge_options(p: argparse.ArgumentParser, *, model: str, base_url: str, concurrency: str | None = None) -> None:
    """``--model``, ``--base-url`` and, with ``concurrency`` (its help), ``--concurrency``, ``--max-tries``
    and the jury flags (``--model`` repeated, ``--aggregate``, ``--quorum``, ``--repeat``: docs/juries.md)."""
    p.add_argument("--model", action=Models, help=model if concurrency is None else
                   f"{model}; repeat it for a jury of judges (docs/juries.md)")
    p.add_argument("--base-url", help=f"{base_url}; for a model of another built-in provider, that provider's server"
                   " (docs/providers.md)")
    if concurrency is not None:
        add_shared(p, "--concurrency", help=f"{concurrency} (default %(default)s)")
        p.add_argument("--max-tries", type=int, default=3,
                       help="asks per judgement when the model's output is invalid (default %(default)s)")
        from ..data.aggregates import AGGREGATES

        p.add_argument("--aggregate", choices=AGGREGATES,
                       help="how a jury's answers make one (default majority; docs/juries.md)")
        p.add_argument("--quorum", type=int, metavar="N",
                       help="jurors that must answer (default: a majority); fewer is a judge error")
        p.add_argument("--repeat", type=int, metavar="N",
                       help="judge every request N times with distinct seeds, majority kept (docs/juries.md)")


#: The flag of a metric option whose name is not the option's (``--guideline`` is ``--option guidelines=``...).
FLAGS = {"guidelines": "--guideline", "topics": "--topic", "arguments": "--tool-arguments", "strict_mode": "--strict"}


def add_metric_options(p: argparse._ActionsContainer, *, role: str, guideline: str = "", scored: bool = True) -> None:
    """``--option NAME=VALUE`` for any metric's option, and the flags that give one (each the same as ``--option``
    with the option its destination names, :func:`metric_options`); ``--threshold`` and the like when ``scored``."""
    p.add_argument("--option", action="append", dest="option_pairs", metavar="NAME=VALUE", help="a metric's option, "
                   "repeatable: NAME=VALUE, typed and checked by the metric's declaration (a list option repeated; "
                   "@FILE reads a text, or a list one item a line); `judgegraph metrics METRIC` lists them; an option "
                   "no metric of the run (-m) declares is refused")
    if scored:
        p.add_argument("--threshold", type=float, help="passing score, 0..1 (--option threshold=)")
        p.add_argument("--window-size", type=int, help="exchanges per sliding window (--option window_size=)")
        p.add_argument("--min-judged", type=float, metavar="FRACTION", help="a result whose verdicts were judged "
                       "less than this share of the time (the rest judge errors) is an error, not a score (0..1)")
    add_shared(p, "--guideline", help=guideline or SHARED["--guideline"]["help"])
    p.add_argument("--role", help=role)
    p.add_argument("--trajectory", help="tool-correctness: how expected_tools is matched (--option trajectory=; docs/agents.md)")
    p.add_argument("--tool-arguments", dest="arguments", help="tool-correctness: how arguments are compared (--option arguments=)")
    p.add_argument("--topic", action="append", dest="topics", metavar="TEXT",
                   help="topic-adherence: an allowed topic, repeatable; @FILE reads one per line (default: each "
                        "conversation's metadata.reference_topics)")


#: The flags that mean the same in every command that has them, declared once (:func:`add_shared`). A flag whose
#: name means another thing in another command (``--seed``, ``--concurrency`` of simulate...) is declared there.
SHARED: dict[str, dict[str, Any]] = {
    "--metric": dict(action="append", dest="metrics", metavar="NAME", help="only this metric (repeatable)"),
    "--concurrency": dict(type=int, default=16, help="judge calls in flight at once (default %(default)s)"),
    "--json": dict(action="store_true", help="print the report as JSON on stdout"),
    "--quiet": dict(action="store_true", help="no table, only the summary line"),
    "--junit": dict(metavar="FILE", help="also write JUnit XML: a test case per conversation × metric"),
    "--cache": dict(metavar="PATH", help="the persistent judge cache file (SQLite; default: $JUDGEGRAPH_JUDGE_CACHE, "
                    "else $JUDGEGRAPH_CACHE_DIR/judge-cache.sqlite; used when the judge runs at temperature 0)"),
    "--no-cache": dict(action="store_true", help="no judge cache at all: every judgement is asked"),
    "--price-in": dict(type=float, metavar="USD", help="judge input price, dollars per million tokens"),
    "--price-out": dict(type=float, metavar="USD", help="judge output price, dollars per million tokens"),
    "--prices": dict(metavar="FILE", help="a price table (JSON or YAML) overriding the built-in one "
                     "(default: $JUDGEGRAPH_PRICES); docs/cost_cache.md"),
    "--transcripts": dict(choices=["full", "errors", "none"], default="full", help="what the results keep of each "
                          "verdict's judge calls (default full; 'judgegraph show' reads them)"),
    "--embeddings": dict(help="response-relevancy: embeddings model, e.g. openai:text-embedding-3-small "
                         "(default: the offline all-MiniLM-L6-v2); served at --base-url when given"),
    "--mlflow-uri": dict(metavar="URI", help="MLflow tracking URI, e.g. http://127.0.0.1:5000"),
    "--input": dict(action="append", dest="inputs", default=[], metavar="FILE",
                    help="the conversations the results were judged from (repeatable)"),
    "--labels": dict(action="append", default=[], metavar="FILE", help="people's labels (labels JSONL, MLflow "
                     "traces/assessments JSON, LangSmith feedback JSON); repeatable"),
    "--guideline": dict(action="append", dest="guidelines", metavar="TEXT",
                        help="conversational-guidelines: a guideline, repeatable; @FILE reads one per line"),
}
SHORT = {"--metric": "-m", "--quiet": "-q"}


def add_shared(p: argparse._ActionsContainer, *flags: str, **change: Any) -> None:
    """Add these :data:`SHARED` flags to ``p`` (a parser or a group), each with ``change`` (a metavar...) applied;
    a copy of each, so no parsed command line shares a default list with another."""
    for flag in flags:
        p.add_argument(*filter(None, (SHORT.get(flag), flag)), **{**copy.deepcopy(SHARED[flag]), **change})


def add_report_options(p: argparse.ArgumentParser, *, bootstrap: str = "bootstrap resamples", json_flag: bool = True) -> None:
    """``--bootstrap`` (``bootstrap``: its help; checked by :func:`check_numbers`), ``--seed`` and, when ``json_flag``,
    ``--json``: the options of a command that prints a report with bootstrap intervals."""
    p.add_argument("--bootstrap", type=int, default=1000, metavar="B", help=f"{bootstrap} (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default %(default)s)")
    if json_flag:
        add_shared(p, "--json")


def json_text(data: object) -> str:
    """``data`` as JSON text that can be written as UTF-8: a lone surrogate read from a results file (JSON
    ``"\\udfff"``) is written as that same escape, so the output reads back as the same strings."""
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, ensure_ascii=False, indent=1))


def show_report(args: argparse.Namespace, report: Any, table: Callable[[Any, Console], None], out: Console) -> None:
    """``report`` on stdout: its ``to_json()`` as :func:`json_text` with ``--json``, else drawn by ``table``."""
    if args.json:
        print(json_text(report.to_json()))
    else:
        table(report, out)


def add_out_options(p: argparse.ArgumentParser, group: argparse._ActionsContainer | None = None, **out: Any) -> None:
    """``--out`` (``out``: its default or ``required``, help ...) and ``--overwrite`` (in ``group`` if given)."""
    p.add_argument("--out", **out)
    (group or p).add_argument("--overwrite", action="store_true", help="replace a non-empty --out (refused without it)")


#: Whole-number options, by attribute: a whole number >= 1 and, when given, at most the value
#: (``--concurrency`` and ``--max-calls``: :data:`MAX_CONCURRENCY`); ``--workers auto`` is resolved later.
WHOLE_OPTIONS: dict[str, int | None] = dict.fromkeys(
    ("max_tries", "max_turns", "window_size", "dense", "repeat", "quorum", "n_questions", "max_traces", "max_prompt_tokens", "max_reply_bytes",
     "workers", "max_polls"))
WHOLE_OPTIONS.update(concurrency=MAX_CONCURRENCY, max_calls=MAX_CONCURRENCY)
#: Other number options, by attribute: (the bound, whether the bound itself is refused, the unit).
BOUNDED_OPTIONS: dict[str, tuple[float, bool, str]] = {
    "timeout": (0, True, ""), "rpm": (0, True, ""), "tpm": (0, True, ""), "max_retries": (0, False, ""),
    "max_rows": (0, False, ""), "price_in": (0, False, " dollars per million tokens"),
    "price_out": (0, False, " dollars per million tokens"), "idle": (0, False, " seconds"), "interval": (0, True, " seconds"),
    "batch_poll": (0, True, " seconds"), "max_regressions": (0, False, ""), "max_examples": (0, False, ""),
    "max_guidelines": (0, False, "")}


def check_numbers(args: argparse.Namespace) -> str | None:
    """What is wrong with the number options the command has (and ``--base-url``, ``--cache`` with ``--no-cache``,
    the price table), or None: checked before any work, with the metrics' own message (:mod:`judgegraph.core.scoring`)."""
    from ..core.scoring import check_threshold, check_whole

    def flag(name: str) -> str:
        return "--" + name.replace("_", "-")

    try:
        for name, most in WHOLE_OPTIONS.items():
            value = getattr(args, name, None)
            if value in (None, "auto"):
                continue
            check_whole(value, flag(name))
            if most is not None and value > most:
                return f"{flag(name)} must be at most {most}, got {value} (each one in flight holds memory)"
        for name in ("threshold", "min_judged"):
            if getattr(args, name, None) is not None:
                check_threshold(getattr(args, name), flag(name))
    except ValueError as exc:
        return str(exc)
    if (resamples := getattr(args, "bootstrap", None)) is not None and resamples < 0:
        return f"--bootstrap must be 0 or more, got {resamples}"
    for name, (low, strict, unit) in BOUNDED_OPTIONS.items():
        value = getattr(args, name, None)
        if value is not None and not (value > low if strict else value >= low):  # NaN fails too
            return f"{flag(name)} must be {'>' if strict else '>='} {low}{unit}, got {value}"
    if getattr(args, "cache", None) and getattr(args, "no_cache", False):
        return "--cache and --no-cache cannot be used together"
    if hasattr(args, "prices"):  # --prices, else $JUDGEGRAPH_PRICES
        from ..cost.pricing import PriceFileError, user_prices

        try:
            user_prices(args.prices)
        except PriceFileError as exc:
            return str(exc)
    return bad_base_url(getattr(args, "base_url", None))


#: The LLM judge client flags (``eval``'s "judge client" group), by attribute: given to ``resolve_judge``.
JUDGE_CLIENT = ("timeout", "max_retries", "rpm", "tpm", "max_prompt_tokens", "max_reply_bytes")


def make_judge(args: argparse.Namespace, settings: dict[str, Any]) -> Judge:
    """The command's judge, ``resolve_judge(**settings)``; a ``--dry-run`` with ``--model``'s sends nothing (no
    client is built, so no key is needed)."""
    if getattr(args, "dry_run", False) and args.model:
        from ..cost.dryrun import DryRunJudge

        return DryRunJudge.for_model(args.model, max_tries=args.max_tries)
    from ..judges import resolve_judge

    return resolve_judge(**settings)


def cost_text(dollars: float | None, spec: str = "") -> str:
    """A cost in dollars as the commands print it (``spec``: its format; default 4 decimals below $1, else 2)."""
    if dollars is None:
        return "cost unknown (no price for this model: --price-in/--price-out)"
    return f"${dollars:{spec or ('.4f' if dollars < 1 else '.2f')}}"


def judge_settings(args: argparse.Namespace, model: str | None, max_concurrency: int) -> dict[str, Any]:
    """``resolve_judge`` keyword arguments for ``model`` from the judge flags the command has (data: worker
    processes rebuild the judge from them)."""
    no_cache = bool(getattr(args, "no_cache", False))
    rule = {"rule": args.offline_rule} if getattr(args, "offline_rule", None) else {}  # the offline judge's fitted rule
    if getattr(args, "aligned", None):
        rule["aligned"] = args.aligned  # an aligned LLM judge's file (--aligned; docs/alignment.md)
    jury = {name: getattr(args, name) for name in ("repeat", "aggregate", "quorum") if getattr(args, name, None) is not None}
    if model is None:
        return {"cache": not no_cache, **rule, **jury}
    from ..providers import server_url

    models = getattr(args, "models", None) or [model]
    kwargs: dict[str, Any] = {}  # Any: keyword arguments of several types, spread into resolve_judge(**)
    if url := server_url(model, args.base_url):
        kwargs["base_url"] = url  # --base-url, else $OPENAI_BASE_URL
    kwargs.update({name: getattr(args, name) for name in JUDGE_CLIENT if getattr(args, name, None) is not None})
    cache: bool | str = False if no_cache else (getattr(args, "cache", None) or True)
    return dict(model=models if len(models) > 1 else model, max_concurrency=max_concurrency,
                max_tries=getattr(args, "max_tries", 3), cache=cache, **kwargs, **rule,  # a rule with --model: refused
                **jury)


def metric_options(args: argparse.Namespace, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The metric options the command line gives, by their declared names: each ``--option NAME=VALUE`` and each flag that
    is one (its destination an option's name; ``skip``: one meaning another thing to the command), typed and checked by
    the declarations (:meth:`~judgegraph.metrics.MetricSpec.typed`) of the run's metrics (``-m``; none named: every
    metric's), ``@FILE`` read for a text or a list (one item a line). A ValueError naming the option, and the run's
    metrics when none of them declares it (:func:`~judgegraph.metrics.undeclared`, as a config file's options)."""
    from ..metrics import built_ins, get_metric, known_options, registry, undeclared
    from ..runs.config import RENAMED, refusal

    pairs = getattr(args, "option_pairs", None) or ()
    given = [(k, v, FLAGS.get(k, "--" + k.replace("_", "-"))) for k in sorted(known_options() - set(skip))
             if (v := getattr(args, k, None)) is not None]  # a flag gives a built-in's option: no plugin loaded for it
    if not given and not pairs:
        return {}
    named = getattr(args, "metrics", None) or ([args.metric] if isinstance(getattr(args, "metric", None), str) else [])
    specs = [get_metric(m) for m in named] or list((registry() if pairs else built_ins()).values())
    takes = f"{', '.join(m.replace('_', '-') for m in named)} take{'s' if len(named) == 1 else ''}:" if named else "known here:"
    for pair in pairs:
        key, eq, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key:
            raise ValueError(f"--option {pair}: expected NAME=VALUE, e.g. --option threshold=0.8 (judgegraph metrics METRIC lists them)")
        if why := undeclared(key, specs, takes, RENAMED):  # named as a config file names it (strict: strict_mode)
            raise ValueError(f"--option {key}: {why}")
        given.append((RENAMED.get(key, key), text, f"--option {key}"))
    out: dict[str, Any] = {}
    for key, value, flag in given:
        spec = next(s for s in [*specs, *built_ins().values()] if key in s.options)
        for text in value if isinstance(value, list) else [value]:  # a flag given again (--guideline) is a list
            if not isinstance(text, str):  # a number or a switch the flag's parser typed
                out[key] = text
                continue
            typed = spec.typed(key, text)
            if text.startswith("@") and isinstance(typed, (str, list)):
                typed = read_guidelines([text], flag) if isinstance(typed, list) else read_text_option(flag, text[1:])
            out[key] = [*out.get(key, []), *typed] if isinstance(typed, list) else typed
    for spec in specs:  # checked as a config file's are: by each metric taking them, before any work
        if (mine := {k: v for k, v in out.items() if k in spec.options}) and (bad := refusal(spec, mine)):
            raise ValueError(bad[1])
    return out


def out_refused(args: argparse.Namespace) -> str | None:
    """A non-empty ``--out`` is replaced only with ``--overwrite``."""
    from ..runs.resultsfile import is_nonempty

    if is_nonempty(args.out) and not args.overwrite:
        return f"{args.out} already holds results: pass --overwrite to replace it (or choose another --out)"
    return None


def lock_out(args: argparse.Namespace) -> tuple[AbstractContextManager[object], str | None]:
    """``--out`` locked, its folder made: (the lock, to hold in a ``with`` for the whole run, None), or (a lock that
    holds nothing, why) when another run holds it or it cannot be locked; a dry run writes nothing: no lock."""
    from ..runs.resultsfile import ResultsFileError, lock_results

    why = None
    try:
        if not getattr(args, "dry_run", False):
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            return lock_results(args.out), None
    except ResultsFileError as exc:
        why = str(exc)
    except OSError as exc:
        why = f"cannot lock --out {args.out}: {exc.strerror or exc}"
    return contextlib.nullcontext(), why


def consoles() -> tuple[Console, Console]:
    """A command's stdout (160 columns in a log or a pipe: tables are not squeezed into 80) and stderr consoles."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=160), Console(stderr=True, soft_wrap=True, highlight=False)


def table(*columns: str, left: Collection[str] = (), fold: bool = False, wide: Collection[str] = (), width: int = 60,
          **kw: Any) -> Table:
    """A rich table (``kw``: its title, caption...) of ``columns``, those not in ``left`` right-justified; with
    ``fold``, every column folds its text instead, those in ``wide`` (a reason, a note) at most ``width`` wide."""
    from rich.table import Table

    drawn = Table(**kw)
    for col in columns:
        if fold:
            drawn.add_column(col, overflow="fold", max_width=width if col in wide else None)
        else:
            drawn.add_column(col, justify="left" if col in left else "right")
    return drawn


def score_text(score: float | None, spec: str = ".2f") -> str:
    """A score or another figure as a table shows it (``spec``: its format), ``—`` when there is none."""
    return "—" if score is None else format(score, spec)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``"1 conversation"``, ``"2 conversations"`` (``many``: the plural when it is not ``word + "s"``)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def read_guidelines(values: list[str] | None, flag: str = "--guideline") -> list[str]:
    """The items a repeatable text flag gives (``--guideline``, or ``flag``: ``--topic``, ``--criterion``...):
    each value, or for ``@FILE`` the file's non-blank lines, stripped."""
    out: list[str] = []
    for value in values or ():
        if value.startswith("@"):
            out.extend(line.strip() for line in read_text_option(flag, value[1:]).splitlines() if line.strip())
        else:
            out.append(value)
    return out


def guidelines_missing(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--guideline``, checked before any work: a ``@FILE`` that cannot be read, or none given
    (with ``--guideline`` or ``--option guidelines=``) when the metrics (``-m``) include conversational-guidelines
    (said for the command line: the library's own message speaks Python, ``guidelines=[...]``)."""
    from ..metrics import canonical_name

    try:
        guidelines = read_guidelines(args.guidelines)
        read_guidelines(getattr(args, "topics", None), "--topic")  # an unreadable --topic @FILE, before any work
    except ValueError as exc:
        return str(exc)
    given = guidelines or any(p.replace("-", "_").startswith("guidelines=") for p in getattr(args, "option_pairs", None) or ())
    if not given and any(canonical_name(m) == "conversational_guidelines" for m in args.metrics or ()):
        return ("conversational-guidelines needs at least one --guideline TEXT (repeatable; --guideline @FILE reads "
                "one guideline per line), e.g. --guideline 'Apologise when the user reports a problem.'")
    return None


def bad_base_url(value: str | None) -> str | None:
    """What is wrong with a ``--base-url`` (checked before any work), or None."""
    if value is None:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"--base-url {value!r} is not a valid URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--base-url {value!r} must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000/v1"
    return None


def os_error_message(exc: OSError) -> str:
    """An environment error (full disk, unwritable path...) as one line naming the file."""
    text = exc.strerror or str(exc)
    return f"{exc.filename}: {text}" if exc.filename else text


def stop_on_signals(stop: asyncio.Event, err: Console, stopped_by: list[int], stopping: str) -> None:
    """Ctrl-C or SIGTERM sets ``stop`` (the run writes everything finished and prints its summary), notes the signal
    in ``stopped_by`` and says it is ``stopping`` on ``err``; the same signal again ends the process at once (a
    second Ctrl-C raises KeyboardInterrupt, a second SIGTERM its default action). Outside the main thread: no signals."""
    import asyncio

    loop = asyncio.get_running_loop()

    def handle(sig: int, said: str, again: str) -> None:
        stopped_by.append(sig)
        stop.set()
        loop.remove_signal_handler(sig)
        err.print(f"[yellow]{said}:[/] {stopping} ({again} again to stop at once)")

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, handle, signal.SIGINT, "interrupted", "Ctrl-C")
        loop.add_signal_handler(signal.SIGTERM, handle, signal.SIGTERM, "terminated", "SIGTERM")


def fail(message: object, status: int = EXIT_USAGE, prefix: str = "error") -> int:
    """Print ``prefix: message`` (:func:`safe`) on stderr; ``status``. A file given as RESULTS that cannot be read
    as one (:class:`judgegraph.runs.NotAResultsFile`) is ``fail(exc, EXIT_ERRORS)`` in every command."""
    print(f"{prefix}: {safe(message)}", file=sys.stderr)
    return status


def usage_error(err: Console, message: object, status: int = EXIT_USAGE) -> int:
    """Print ``message`` (data: never read as markup) as an error on ``err``; ``status``."""
    err.print(f"[red]error:[/] {markup_safe(message)}")
    return status


def markup_safe(text: object) -> str:
    """:func:`safe`, escaped for a rich markup string (``[/]`` printed literally)."""
    from rich.markup import escape

    return escape(safe(text))


def add_aligned_option(p: argparse.ArgumentParser) -> None:
    """``--aligned FILE`` of ``eval`` and ``rejudge`` (checked by :func:`aligned_error`; the judge is built by
    ``resolve_judge(..., aligned=FILE)``, which :func:`judge_settings` passes it to, worker processes included)."""
    p.add_argument("--aligned", metavar="FILE", help="judge with this aligned judge (judgegraph align --model M; "
                   "docs/alignment.md): its guidelines and examples go before every prompt of its metric")


def aligned_error(args: argparse.Namespace) -> str | None:
    """What is wrong with ``--aligned``, or None: a file that is not an aligned judge or was edited, no
    ``--model``, or metrics other than the one it aligns. ``eval`` with no ``-m`` runs that metric."""
    if not (path := getattr(args, "aligned", None)):
        return None
    from ..judges.aligned import read_alignment
    from ..metrics import canonical_name

    try:
        alignment = read_alignment(path)
    except ValueError as exc:
        return f"--aligned {exc}"
    if not args.model:
        return f"--aligned needs --model: the model it was made for ({alignment.model})"
    asked = getattr(args, "metrics", None) if hasattr(args, "metrics") else [args.metric]
    if asked is None:
        args.metrics = [alignment.metric]
    elif [canonical_name(m) for m in asked] != [canonical_name(alignment.metric)]:
        return (f"--aligned {path} aligns the judge of {alignment.metric}: judge that metric alone "
                f"(-m {alignment.metric}), not {', '.join(asked)}")
    return None


def settings_refused(command: str, out: str, changed: list[str], advice: str) -> str:
    """Why ``command`` will not add to ``out``: the file was made with other settings, each difference named."""
    return (f"{command} refused: {out} was made with other settings, and one results file must hold one run:\n"
            + "\n".join(f"  - {c}" for c in changed) + f"\n{advice}")


def warn_headerless(err: Console, out: str, done: str) -> None:
    """Say that ``out`` has no run header to check this run's settings against, and what is ``done`` anyway."""
    err.print(f"[yellow]warning:[/] {markup_safe(out)} has no run header (an older judgegraph wrote it): {done}")
