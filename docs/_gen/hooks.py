"""MkDocs hook: the reference pages made from the code, never typed twice.

* ``reference/cli.md``: every subcommand and flag, from ``judgegraph.cli.parser()`` (what ``--help`` shows);
* ``reference/metrics.md``: the metrics catalogue, from the metric registry;
* ``reference/api.md``: every name ``import judgegraph`` exports, rendered by mkdocstrings from its docstring.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, its one-line help as its description where it has none."""
    for action in parser._actions:  # argparse keeps its actions here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                sub.description = sub.description or (helps.get(name) or "").capitalize()
            return dict(action.choices)
    return {}


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    return ", ".join(f"`{flag}`" for flag in action.option_strings)


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _options(sub: argparse.ArgumentParser) -> list[str]:
    lines = ["```text", sub.format_usage().strip(), "```", "", "| flag | help | default |", "| --- | --- | --- |"]
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        default = action.default
        plain = default in (None, argparse.SUPPRESS, False) or isinstance(action, argparse._StoreTrueAction)
        help_text = sub._get_formatter()._expand_help(action) if action.help else ""  # %(default)s as --help shows it
        lines.append(f"| {_flags(action)} | {_cell(help_text)} | {'' if plain else f'`{default}`'} |")
    return lines + [""]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def commands() -> dict[str, dict[str, Any]]:
    import yaml

    return yaml.safe_load((ROOT / "docs" / "_gen" / "commands.yml").read_text(encoding="utf-8"))


def cli_page() -> str:
    from judgegraph.cli import parser

    lines = ["# Command-line reference", "",
             "Generated from the command's own parser: every subcommand and flag `judgegraph --help` shows. "
             "Each command's page says what it reads, what it writes, its exit statuses and examples.", ""]
    for name, sub in _subparsers(parser()).items():
        lines += [f"## judgegraph {name}", "", f"{_cell(sub.description or '')} ([page](../commands/{name}.md))", "",
                  *_options(sub)]
    return "\n".join(lines)


def command_pages() -> dict[str, str]:
    from judgegraph.cli import parser

    subs, docs = _subparsers(parser()), commands()
    pages = {"commands/index.md": "\n".join(
        ["# Commands", "", "One page per command: what it reads, what it writes, its exit statuses, examples "
         "and its options.", "", "| command | what it does |", "| --- | --- |",
         *(f"| [`judgegraph {n}`]({n}.md) | {_cell(s.description or '')} |" for n, s in subs.items())])}
    for name, sub in subs.items():
        doc = docs[name]  # every subcommand has an entry (tests/integration/test_docs_examples.py)
        exits = [f"| {code} | {_cell(why)} |" for code, why in doc["exits"].items()]
        examples = ["```bash", *doc["examples"], "```"] if doc["examples"] else ["(Examples: see the guides.)"]
        pages[f"commands/{name}.md"] = "\n".join([
            f"# judgegraph {name}", "", _cell(sub.description or ""), "", "## What it reads", "", _sentence(doc["reads"]), "",
            "## What it writes", "", _sentence(doc["writes"]), "", "## Exit statuses", "", "| status | when |", "| --- | --- |",
            *exits, "", "## Examples", "", *examples, "", "## Options", "", *_options(sub)])
    return pages


def metrics_page() -> str:
    from judgegraph.metrics import registry

    lines = ["# Metrics catalogue", "", "Generated from the metric registry (`judgegraph metrics` prints the same "
             "list). A metric's options are given on the command line, in a config file's `metrics:` entries or as "
             "keyword arguments of its factory.", ""]
    for name, spec in sorted(registry().items()):
        lines += [f"## {name.replace('_', '-')}", "", _cell(spec.summary), "",
                  f"- **scope**: {spec.scope}",
                  f"- **needs**: {', '.join(sorted(spec.needs)) or 'nothing'}",
                  f"- **factory**: `{spec.factory.__module__}.{spec.factory.__name__}`",
                  f"- **options**:{'' if spec.options else ' none'}", "",
                  *(f"    - `{o}` ({d}){': ' + _cell(h) if h else ''}" for o, d, h in spec.option_table()), ""]
        prompts = sorted((ROOT / "prompts" / name).glob("*.md")) if (ROOT / "prompts" / name).is_dir() else []
        if prompts:
            lines += [f"- **prompt files**: {', '.join(f'`prompts/{name}/{p.name}`' for p in prompts)}", ""]
    return "\n".join(lines)


#: The packages whose ``__all__`` is the public API (the command line's is its own reference).
API_PACKAGES = ("judgegraph", "judgegraph.metric", "judgegraph.apps", "judgegraph.apps.simulate", "judgegraph.judges", "judgegraph.loaders",
                "judgegraph.embeddings", "judgegraph.compare", "judgegraph.trust", "judgegraph.batch",
                "judgegraph.scale", "judgegraph.integrations.mlflow")


def _where(package: str, name: str) -> str:
    """The dotted path mkdocstrings documents ``package.name`` at: where it is defined, when it says so."""
    import importlib
    import inspect
    import re
    import sys

    obj = getattr(importlib.import_module(package), name)
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and module.startswith("judgegraph"):
        source = inspect.getsource(importlib.import_module(module))
        if re.search(rf"^((async )?(def|class) {name}\b|{name} = )", source, re.M):  # written or assigned there
            return f"{module}.{name}"
        # Made by a factory (a session metric's): the module that assigns it (the top-level package exports the
        # metrics' factories from the registry, not by an import a reader of the source could follow).
        for other in sorted(m for m in sys.modules if m.startswith("judgegraph.") and m != module):
            try:
                text = inspect.getsource(sys.modules[other])
            except (OSError, TypeError):
                continue
            if re.search(rf"^{name} = ", text, re.M):
                return f"{other}.{name}"
    return f"{package}.{name}"


def api_page() -> str:
    import importlib

    lines = ["# Python API reference", "", "Every public name — what each package lists in its `__all__` — from its "
             "docstring.", ""]
    for package in API_PACKAGES:
        names = sorted(importlib.import_module(package).__all__, key=str.lower)
        lines += [f"## {package}", ""]
        for name in names:
            lines += [f"::: {_where(package, name)}", "    options:", "      heading_level: 3",
                      f"      heading: {package}.{name}", ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    return {"reference/cli.md": cli_page(), "reference/metrics.md": metrics_page(), "reference/api.md": api_page(),
            **command_pages()}


def on_files(files: Files, config: Any) -> Files:
    for uri, content in pages().items():
        files.append(File.generated(config, uri, content=content))
    return files
