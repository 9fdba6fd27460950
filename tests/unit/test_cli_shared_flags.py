"""A flag that means the same in several commands is declared once (``cli.common.SHARED``): every command that has
it parses it alike, and no two parsed command lines share a default list."""

from __future__ import annotations

import argparse

import pytest

from judgegraph.cli import parser
from judgegraph.cli.common import SHARED


def commands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def parsing(action: argparse.Action) -> tuple[object, ...]:
    """What decides how a flag is parsed (not its help or metavar)."""
    return type(action), action.dest, action.type, action.choices, action.nargs, action.const


#: Commands where a shared flag's name means another thing, parsed otherwise (kept apart on purpose).
OTHER_MEANING = {
    "--labels": {"align", "view"},  # align: the one labels file a rule is fitted to; view: the file labels go to
    "--metric": {"rejudge", "show", "pairwise", "align"},  # one metric, or pairwise's criteria
}


@pytest.mark.parametrize("flag", sorted(SHARED))
def test_a_shared_flag_is_in_several_commands_and_parsed_alike_in_each(flag: str) -> None:
    declared = parsing(argparse.ArgumentParser().add_argument(flag, **SHARED[flag]))
    having = {name: parsing(action) for name, sub in commands().items() for action in sub._actions
              if flag in action.option_strings}
    alike = {name for name, how in having.items() if how == declared}
    assert len(alike) >= 2, f"{flag} is parsed as declared in {sorted(alike)} only: not shared"
    assert set(having) - alike == OTHER_MEANING.get(flag, set())


def test_two_parsed_command_lines_do_not_share_a_default_list() -> None:
    first = parser(["agree"]).parse_args(["agree", "results.jsonl"])
    second = parser(["agree"]).parse_args(["agree", "results.jsonl"])
    assert first.labels == second.labels == []
    first.labels.append("people.jsonl")
    assert second.labels == []
