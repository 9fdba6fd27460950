"""``judgegraph eval --config FILE``: the file's settings, under the command line's."""

from __future__ import annotations

import argparse


def explicit_dests(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The argument destinations ``argv`` sets itself (not left to their defaults): ``argv`` parsed again with
    every default suppressed, so only what it gives is set."""
    defaults = [(action, action.default) for action in parser._actions]
    try:
        for action, _ in defaults:
            action.default = argparse.SUPPRESS
        return set(vars(parser.parse_args(argv)))
    finally:
        for action, default in defaults:
            action.default = default


def apply_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Fill ``args`` from ``args.config`` where the command line did not set a value; keeps the file's
    data in ``args.config_data``, each metric's own options in ``args.per_metric`` and the ``options:`` no flag
    gives in ``args.config_options``.
    :class:`~judgegraph.runs.config.ConfigError` when the file is unreadable or invalid."""
    from ..runs.config import config_arguments, load_config

    config, data = load_config(args.config)
    values, per_metric = config_arguments(config, args.config)
    argv = list(getattr(args, "argv", None) or [])
    after = argv[argv.index(args.command) + 1:] if args.command in argv else argv
    given = explicit_dests(parser, after) | {p.partition("=")[0].strip().replace("-", "_")  # --option NAME=VALUE too
                                             for p in getattr(args, "option_pairs", None) or ()}
    dests = {action.dest for action in parser._actions}
    args.config_options = {k: v for k, v in values.items() if k not in dests}
    for dest in dests.intersection(values) - given:
        setattr(args, dest, values[dest])
    for name, opts in per_metric.items():  # a flag given on the command line wins over a metric's own option too
        per_metric[name] = {k: v for k, v in opts.items() if k not in given}
    args.per_metric = {k: v for k, v in per_metric.items() if v}
    args.config_data = data
