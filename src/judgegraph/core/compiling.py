"""Every metric factory's last step: compile with the caller's LangGraph options (a misspelt one is a ``TypeError``),
registering judgegraph's state types with a checkpointer's default serializer (no "unregistered type" warning).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import All, Checkpointer
from typing_extensions import TypedDict


class CompileOptions(TypedDict, total=False):
    """``StateGraph.compile`` options a factory passes on (see LangGraph's docs)."""

    checkpointer: Checkpointer  # a BaseCheckpointSaver, True/False/None
    store: BaseStore | None
    interrupt_before: Sequence[str] | All | None  # node names, or "*"
    interrupt_after: Sequence[str] | All | None
    debug: bool


COMPILE_KEYS = frozenset(CompileOptions.__annotations__)


def check_options(options: Mapping[str, object], factory: Callable[..., object]) -> None:
    """A ``TypeError`` for a keyword in ``options`` that is not a compile option, naming the closest known one."""
    for key in options:
        if key in COMPILE_KEYS:
            continue
        known = [p for p in inspect.signature(factory).parameters if p != "compile"] + sorted(COMPILE_KEYS)
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"{factory.__name__}() got an unexpected keyword argument {key!r}{hint}")


def compile_graph(
    builder: StateGraph, name: str, options: Mapping[str, Any], factory: Callable[..., object]
) -> CompiledStateGraph:  # options: Any, spread into compile(**)
    """``builder.compile(name=name, **options)``, a non-compile option a ``TypeError`` naming ``factory``."""
    check_options(options, factory)
    options = dict(options)
    if options.get("checkpointer") not in (None, True, False):
        options["checkpointer"] = register_types(options["checkpointer"])
    return builder.compile(name=name, **options)


def checkpoint_types() -> list[tuple[str, str]]:
    """``(module, class)`` of every type judgegraph keeps in a graph's state: its loaded pydantic
    models and dataclasses, and LangChain's message classes (a ``messages`` input)."""
    from langchain_core import messages
    from pydantic import BaseModel

    out: set[tuple[str, str]] = set()
    for name, module in list(sys.modules.items()):
        if not (name == "judgegraph" or name.startswith("judgegraph.")) or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, type) and (issubclass(value, BaseModel) or dataclasses.is_dataclass(value)) \
                    and value.__module__.startswith("judgegraph"):
                out.add((value.__module__, value.__name__))
    for cls in vars(messages).values():
        if isinstance(cls, type) and issubclass(cls, messages.BaseMessage):
            out.add((cls.__module__, cls.__name__))
    return sorted(out)


def register_types(checkpointer: Checkpointer) -> Checkpointer:
    """A copy of ``checkpointer`` (same storage) whose serializer allows judgegraph's state types;
    one with a serializer of its own (encrypted, strict, custom) is returned as it is."""
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.serde.base import maybe_add_typed_methods
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    if not isinstance(checkpointer, BaseCheckpointSaver) or type(checkpointer.serde) is not JsonPlusSerializer:
        return checkpointer
    clone = copy.copy(checkpointer)
    clone.serde = maybe_add_typed_methods(JsonPlusSerializer(allowed_msgpack_modules=checkpoint_types()))
    return clone
