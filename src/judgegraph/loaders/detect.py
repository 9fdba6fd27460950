"""Which format a record is in, and its conversion into a :class:`LoadedConversation`."""

from __future__ import annotations

from collections.abc import Iterator

from .base import MAX_ERRORS_PER_RECORD, Ctx, InputError, LoadedConversation, RecordErrors
from .formats.deepeval import DEEPEVAL_CASE_KEYS, DEEPEVAL_TURN_KEYS, from_deepeval
from .formats.judgegraph import from_judgegraph
from .formats.langchain import from_langchain, is_langchain_message
from .formats.openai import from_openai
from .formats.promptfoo import PROMPTFOO_TEST_KEYS, from_promptfoo
from .formats.ragas import RAGAS_DETECT_KEYS, from_ragas
from .limits import check_record

FORMATS: tuple[str, ...] = ("judgegraph", "deepeval", "promptfoo", "openai", "langchain", "ragas")


def detect_format(record: object) -> str:
    """Which format a single record (a parsed dict) is in, by its keys (the table in docs/input_formats.md); anything
    not recognised is ``judgegraph``, whose validation then names what is wrong."""
    if not isinstance(record, dict):
        return "judgegraph"
    if "turns" in record:
        turns = record["turns"] if isinstance(record["turns"], list) else []
        deepeval = any(k in DEEPEVAL_CASE_KEYS for k in record) or any(
            isinstance(t, dict) and any(k in DEEPEVAL_TURN_KEYS for k in t) for t in turns)
        return "deepeval" if deepeval else "judgegraph"
    if "messages" in record:
        messages = record["messages"]
        first = next((m for m in messages if isinstance(m, dict)), None) if isinstance(messages, list) else None
        return "langchain" if is_langchain_message(first) else "openai"
    if any(k in PROMPTFOO_TEST_KEYS for k in record):
        return "promptfoo"
    if any(k in RAGAS_DETECT_KEYS for k in record):
        return "ragas"
    return "judgegraph"


CONVERTERS = {
    "judgegraph": from_judgegraph,
    "deepeval": from_deepeval,
    "promptfoo": from_promptfoo,
    "openai": from_openai,
    "langchain": from_langchain,
    "ragas": from_ragas,
}


def convert(rec: object, ctx: Ctx, fmt: str | None = None) -> Iterator[LoadedConversation | InputError]:
    if not isinstance(rec, dict):
        yield ctx.error((), f"a record must be an object (got {type(rec).__name__})")
        return
    unsafe = check_record(rec, ctx.limits)
    if unsafe:
        for path, message in unsafe[:MAX_ERRORS_PER_RECORD]:
            yield ctx.error(path, message)
        return
    if isinstance(rec.get("tests"), (list, str)) and "turns" not in rec and "messages" not in rec:
        yield ctx.error(("tests",), "a promptfoo document cannot be nested inside a list or a .jsonl line")
        return
    fmt = fmt or detect_format(rec)
    try:
        conv, options = CONVERTERS[fmt](rec, ctx)
    except RecordErrors as exc:
        problems = exc.problems
        for path, message in problems[:MAX_ERRORS_PER_RECORD]:
            yield ctx.error(path, f"{message} [{fmt} format]" if fmt != "judgegraph" else message)
        if len(problems) > MAX_ERRORS_PER_RECORD:
            yield ctx.error((), f"... and {len(problems) - MAX_ERRORS_PER_RECORD} more errors in this record")
        return
    assertions = tuple(options.pop("assertions", ()))
    yield LoadedConversation(conversation=conv, source=ctx.source, format=fmt, options=options, assertions=assertions)
