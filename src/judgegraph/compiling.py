"""What every metric factory does last: compile its builder with the caller's
LangGraph compile options, refusing a keyword it does not know.

Every ``create_*`` factory takes ``**compile: Unpack[CompileOptions]`` after its
own options, so a checkpointer or interrupts can be added to any metric::

    judge = create_turn_relevancy_judge(checkpointer=InMemorySaver(), interrupt_before=["reduce_score"])

and a misspelt option is a ``TypeError`` naming it (with a suggestion), never
silently ignored.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict


class CompileOptions(TypedDict, total=False):
    """``StateGraph.compile`` options a factory passes on (see LangGraph's docs)."""

    checkpointer: Any  # a BaseCheckpointSaver, True/False/None
    store: Any  # a BaseStore
    interrupt_before: Sequence[str] | Any  # node names, or "*"
    interrupt_after: Sequence[str] | Any
    debug: bool


COMPILE_KEYS = frozenset(CompileOptions.__annotations__)


def unexpected_keyword(factory: Callable[..., Any] | str, key: str, known: Sequence[str] = ()) -> TypeError:
    """``TypeError`` for an unknown keyword, naming the closest known one."""
    name = factory if isinstance(factory, str) else factory.__name__
    if not known and not isinstance(factory, str):
        known = [p for p in inspect.signature(factory).parameters if p != "compile"] + sorted(COMPILE_KEYS)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(f"{name}() got an unexpected keyword argument {key!r}{hint}")


def compile_graph(
    builder: StateGraph, name: str, options: Mapping[str, Any], factory: Callable[..., Any]
) -> CompiledStateGraph:
    """``builder.compile(name=name, **options)`` after checking ``options`` are
    compile options; ``factory`` names the caller in the error."""
    for key in options:
        if key not in COMPILE_KEYS:
            raise unexpected_keyword(factory, key)
    return builder.compile(name=name, **options)
