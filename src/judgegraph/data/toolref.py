"""Reference tool calls (``expected_tools``) read from a conversation's or a turn's metadata, in any of the shapes
docs/agents.md lists (a name; deepeval's, LangChain's, OpenAI's or judgegraph's tool call), checked when a
conversation is validated so a bad one is an input error naming its file, line and field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

#: The metadata key holding a reference trajectory (a conversation's or a turn's).
EXPECTED_KEY = "expected_tools"
#: ragas ``MultiTurnSample.reference_tool_calls`` (kept in a conversation's metadata by the ragas loader):
#: the whole conversation's reference when ``expected_tools`` is not given.
RAGAS_KEY = "reference_tool_calls"

_ARG_KEYS = ("arguments", "input_parameters", "inputParameters", "args")
_KNOWN = frozenset({"name", "output", "description", "reasoning", "id", "type", "function", *_ARG_KEYS})


@dataclass(frozen=True)
class ExpectedCall:
    """One call of a reference trajectory: its tool ``name``, ``arguments`` when the reference
    gives them (None: any arguments match), and its ``step`` (calls listed together in a nested
    list are one step: made in one message, in any order among themselves)."""

    name: str
    arguments: Any = None
    step: int = 0


def parse_arguments(value: Any) -> Any:
    """Arguments as compared: a JSON object string decoded, anything else as given."""
    if isinstance(value, str):
        with suppress(ValueError):
            decoded = json.loads(value)
            return decoded if isinstance(decoded, dict) else value
    return value


def _one(raw: object, where: str, step: int = 0) -> ExpectedCall:
    if isinstance(raw, str):
        if not raw.strip():
            raise ValueError(f"{where}: a tool name must not be empty")
        return ExpectedCall(raw.strip(), step=step)
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a tool name or an object with 'name', got {type(raw).__name__}")
    if isinstance(raw.get("function"), Mapping):  # OpenAI: {"type": "function", "function": {...}}
        return _one(raw["function"], where, step)
    unknown = sorted(str(k) for k in raw if k not in _KNOWN)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r} (a tool call has name, arguments"
                         " (or input_parameters / args), output)")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}.name: a tool call needs a non-empty string 'name', got {name!r}")
    given = [k for k in _ARG_KEYS if k in raw]
    if len(given) > 1:
        raise ValueError(f"{where}: give only one of {', '.join(map(repr, given))}")
    args = parse_arguments(raw[given[0]]) if given else None
    if args is not None and not isinstance(args, (dict, str)):
        raise ValueError(f"{where}.{given[0]}: arguments must be an object or a JSON string, got {type(args).__name__}")
    return ExpectedCall(name.strip(), args, step)


def parse_expected(value: object, where: str = EXPECTED_KEY) -> list[ExpectedCall]:
    """``value`` (a list of tool calls; a nested list is one step of calls made together) as
    :class:`ExpectedCall` s; a ``ValueError`` naming the item and key of a bad one
    (``expected_tools[1].name: ...``)."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: expected a list of tool calls, got {type(value).__name__}")
    calls: list[ExpectedCall] = []
    for i, item in enumerate(value):
        if isinstance(item, (list, tuple)):
            if not item:
                raise ValueError(f"{where}[{i}]: a step of calls made together must not be empty")
            calls += [_one(x, f"{where}[{i}][{j}]", i) for j, x in enumerate(item)]
        else:
            calls.append(_one(item, f"{where}[{i}]", i))
    return calls


def check_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata``, or a ``ValueError`` when it holds an ``expected_tools`` of a bad shape."""
    for key in (EXPECTED_KEY, RAGAS_KEY):
        if metadata.get(key) is not None:
            parse_expected(metadata[key], key)
    return metadata


def expected_of(metadata: Mapping[str, Any], *, ragas: bool = False) -> list[ExpectedCall] | None:
    """The reference in ``metadata`` (None when it gives none; ``[]``: no tool should be called);
    with ``ragas``, ``reference_tool_calls`` when there is no ``expected_tools``."""
    for key in (EXPECTED_KEY, RAGAS_KEY) if ragas else (EXPECTED_KEY,):
        if metadata.get(key) is not None:
            return parse_expected(metadata[key], key)
    return None
