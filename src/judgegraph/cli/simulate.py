"""``judgegraph simulate``: simulated users talk to your chatbot; the
conversations are judged and written with their results."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._lazy import import_object
from . import common
from .common import EXIT_OK, usage_error

if TYPE_CHECKING:
    from .common import Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser("simulate", help="simulate users talking to a chatbot, then judge the conversations",
                       description="A simulated user (an LLM with a persona, a goal and a scenario) talks to APP until "
                                   "the goal is reached, the user gives up, or --max-turns; the conversations are then "
                                   "judged with the metrics and written, with their results, to --out.")
    p.add_argument("app", metavar="MODULE:APP", help="the chatbot: a compiled LangGraph graph over messages, a Runnable, "
                                                     "or a callable taking the list of messages (module on PYTHONPATH or in the current directory)")
    p.add_argument("--scenarios", required=True, metavar="FILE", help=".jsonl, .json or .yaml: id, goal, persona (a description, or "
                                                                      "an escalating persona {kind: jailbreak | topic_drift | frustration | custom, ...}), scenario, "
                                                                      "opening, max_turns, expected_outcome, chatbot_role")
    p.add_argument("--user-model", required=True, metavar="MODEL", help="the LLM playing the user, e.g. openai:gpt-4.1-mini")
    p.add_argument("-m", "--metric", action="append", dest="metrics", metavar="METRIC",
                   help="metric judging each conversation, repeatable (default: none, only simulate)")
    common.add_judge_options(p, model="LLM judge for the metrics (default: the offline embedding judge)",
                             base_url="OpenAI-compatible server for --user-model and --model")
    common.add_metric_options(p, role="role-adherence: the chatbot's role (default: each scenario's chatbot_role)")
    p.add_argument("--max-turns", type=int, default=6, help="user messages per conversation at most (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=8, help="conversations simulated at once (default %(default)s)")
    p.add_argument("--max-calls", type=int, default=16, help="LLM calls in flight at once, user and judge (default %(default)s)")
    common.add_out_options(p, default="judgegraph-simulations.jsonl",
                           help="results, one line per conversation with the conversation itself (default %(default)s)")
    p.add_argument("--conversations", metavar="FILE", help="also write the conversations as judgegraph JSONL "
                                                           "(re-judge them later with judgegraph eval FILE)")
    common.add_shared(p, "--junit", "--quiet")
    p.set_defaults(run=run, checks=(common.check_numbers, common.guidelines_missing, common.out_refused))


def run(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from ..apps.simulate import load_scenarios, simulate
    from ..apps.simulate.graph import user_judge
    from ..apps.simulate.runfile import simulation_counts, simulation_header, simulation_summary
    from ..judges import resolve_judge
    from ..metrics import get_metric
    from ..providers import server_url
    from ..report import metric_graphs
    from ..runs.runner import ResultsWriter

    out, err = common.consoles()
    user_url = server_url(args.user_model, args.base_url)  # --base-url, else $OPENAI_BASE_URL for an OpenAI model
    user_kw: dict[str, Any] = {"base_url": user_url} if user_url else {}
    settings = None
    try:
        app = import_object(args.app, "mybot:graph")
        scenarios = load_scenarios(args.scenarios)
        if args.metrics:
            settings = common.judge_settings(args, args.model, args.max_calls)
        judge = resolve_judge(**settings) if settings else None
        user = user_judge(args.user_model, judge=judge, max_concurrency=args.max_calls, **user_kw)
        given = common.metric_options(args)
        options = {name: {k: v for k, v in given.items() if k in get_metric(name).options}
                   for name in args.metrics or []}
        metrics = metric_graphs(args.metrics, model=judge, options=options) if args.metrics else []
    except (KeyError, ValueError, TypeError, OSError) as exc:
        return usage_error(err, exc)

    err.print(f"simulating {len(scenarios)} conversation(s) with {args.app} (user: {user.name}"
              f"{f'; judge: {judge.name}' if judge else ''})")
    held, locked = common.lock_out(args)  # a second run on the same --out is refused at once
    if locked:
        return usage_error(err, locked)
    started = datetime.now(timezone.utc)
    header = simulation_header(
        args.scenarios, user, judge=judge, metrics=args.metrics or [], options=given, app=args.app,
        app_file=getattr(sys.modules.get(args.app.partition(":")[0]), "__file__", None),  # hashed in the header
        max_turns=args.max_turns, argv=getattr(args, "argv", None), user_settings=user_kw, judge_settings=settings,
        started_at=started)
    with held:
        runs = simulate(app, scenarios, user_model=user, metrics=metrics or None, max_turns=args.max_turns,
                        max_concurrency=args.concurrency)
        with closing(ResultsWriter(args.out)) as writer:
            writer.write(header)
            for r in runs:
                writer.write(r.to_record(f"simulate:{args.scenarios}"))
            writer.write(simulation_summary(runs, started, judge=judge.name if judge else ""))
    if args.conversations:
        path = Path(args.conversations)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r.conversation.model_dump(mode="json", exclude_defaults=True),
                                           ensure_ascii=False) + "\n" for r in runs if r.conversation), encoding="utf-8")
    if args.junit:
        from ..apps.junit import write_junit

        write_junit(args.out, args.junit)
    if not args.quiet:
        table = common.table("scenario", "ended", "turns", "metric", "score", "result", "reason", fold=True,
                             wide=("reason",), title="judgegraph simulations")
        for r in runs:
            how = f"{r.status} (stage {r.stage.stage}/{r.stage.of})" if r.stage else r.status
            if not r.results:
                table.add_row(r.scenario.id, how, str(r.turns), "—", "—", "—", r.error or "")
            for i, res in enumerate(r.results.values()):
                head = (r.scenario.id, how, str(r.turns)) if i == 0 else ("", "", "")
                table.add_row(*head, res.key, common.score_text(res.score), res.status, res.reason)
        out.print(table)
    counts = simulation_counts(runs)
    ended = {s: sum(1 for r in runs if r.status == s) for s in sorted({r.status for r in runs})}
    out.print(f"{len(runs)} conversations ({', '.join(f'{n} {s}' for s, n in ended.items())}); "
              f"{counts.result_count} results: {counts.count('passed')} passed, {counts.count('failed')} failed, "
              f"{counts.count('error')} errors; {counts.judge_errors} judge errors, {counts.failed_runs} failed runs; "
              f"{counts.usage.calls} LLM calls. results: {args.out}")
    return counts.exit_code if runs else EXIT_OK
