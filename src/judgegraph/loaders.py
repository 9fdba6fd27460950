"""Read conversation files of several formats into :class:`Conversation` objects.

Supported files (by extension, case-insensitive):

* ``.jsonl`` - one record per line; blank lines and lines starting with ``//``
  are skipped. Read line by line, so memory stays bounded.
* ``.json`` / ``.yaml`` / ``.yml`` - one record, a list of records,
  ``{"conversations": [...]}``, or a promptfoo document (top-level ``tests:``).

Each record's format is detected on its own (see :func:`detect_format`):
judgegraph's own format, deepeval ``ConversationalTestCase`` dicts, promptfoo
tests, OpenAI ``{"messages": [...]}`` records, or ragas samples
(``{user_input, response, retrieved_contexts}``).

Problems never raise while reading: every bad file or record becomes an
:class:`InputError` naming the file, the line (or record index) and the field,
and reading continues with the next record.
"""

from __future__ import annotations

import bisect
import difflib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from judgegraph.conversation import Conversation

__all__ = [
    "FORMATS",
    "InputError",
    "InputFormatError",
    "LoadResult",
    "LoadedConversation",
    "detect_format",
    "iter_records",
    "load_conversations",
    "load_file",
    "load_files",
]

FORMATS: tuple[str, ...] = ("judgegraph", "deepeval", "promptfoo", "openai", "ragas")
EXTENSIONS: dict[str, str] = {".jsonl": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
MAX_ERRORS_PER_RECORD = 5

Path_ = tuple[Any, ...]  # a path of keys / indexes inside a parsed document


# --------------------------------------------------------------------------- public types


@dataclass(frozen=True)
class InputError:
    """One problem with an input file or one of its records.

    ``line`` is 1-based; ``record`` is the 0-based index of the record in its
    file (the list index for ``.json``/``.yaml``, the count of non-skipped
    lines for ``.jsonl``). ``field`` is a dotted path inside the record, e.g.
    ``turns.2.role`` (indexes are 0-based, like the JSON arrays they index).
    """

    file: str
    line: int | None
    record: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        parts = [f"{self.file}:{self.line}" if self.line is not None else self.file]
        if self.line is None and self.record is not None:
            parts.append(f"record {self.record}")
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return ": ".join(parts)


@dataclass(frozen=True)
class LoadedConversation:
    """A conversation plus where it came from and the options found with it."""

    conversation: Conversation
    source: str
    format: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoadResult:
    conversations: list[LoadedConversation] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InputFormatError(self.errors)


class InputFormatError(ValueError):
    """Raised by :func:`load_conversations` when any input problem was found."""

    def __init__(self, errors: list[InputError]):
        self.errors = list(errors)
        shown = "\n".join(f"  {e}" for e in self.errors[:20])
        more = f"\n  ... and {len(self.errors) - 20} more" if len(self.errors) > 20 else ""
        n = len(self.errors)
        super().__init__(f"{n} input error{'s' if n != 1 else ''}:\n{shown}{more}")


# --------------------------------------------------------------------------- public functions


def iter_records(path: str | Path) -> Iterator[LoadedConversation | InputError]:
    """Yield every conversation of one file, or an :class:`InputError` per problem.

    Duplicate conversation ids inside the file are reported (the later ones).
    """
    yield from _iter_file(path, {})


def load_file(path: str | Path) -> LoadResult:
    return load_files([path])


def load_files(paths: Iterable[str | Path]) -> LoadResult:
    """Load several files; a conversation id seen before (in any file) is an error."""
    result = LoadResult()
    seen: dict[str, str] = {}
    for path in paths:
        for item in _iter_file(path, seen):
            if isinstance(item, InputError):
                result.errors.append(item)
            else:
                result.conversations.append(item)
    return result


def load_conversations(path: str | Path | Iterable[str | Path]) -> list[Conversation]:
    """Just the conversations; raises :class:`InputFormatError` on any problem."""
    paths = [path] if isinstance(path, (str, Path)) else list(path)
    result = load_files(paths)
    result.raise_for_errors()
    return [c.conversation for c in result.conversations]


# --------------------------------------------------------------------------- format detection

JUDGEGRAPH_KEYS = ("id", "turns", "expected_outcome", "chatbot_role", "metadata")
JUDGEGRAPH_TURN_KEYS = ("role", "content", "retrieval_context", "tool_calls", "metadata")

# deepeval ConversationalTestCase keys that judgegraph's own format does not have,
# mapped to the snake_case name used in metadata (None: handled specially).
DEEPEVAL_CASE_KEYS: dict[str, str | None] = {
    "name": None,
    "scenario": "scenario",
    "expectedOutcome": None,
    "chatbotRole": None,
    "user_description": "user_description",
    "userDescription": "user_description",
    "context": "context",
    "additional_metadata": None,
    "additionalMetadata": None,
    "comments": "comments",
    "tags": "tags",
    "mcp_servers": "mcp_servers",
    "mcpServers": "mcp_servers",
    "_dataset_rank": "dataset_rank",
    "_dataset_alias": "dataset_alias",
    "_dataset_id": "dataset_id",
}
DEEPEVAL_TURN_KEYS: dict[str, str | None] = {
    "retrievalContext": None,
    "tools_called": None,
    "toolsCalled": None,
    "user_id": "user_id",
    "userId": "user_id",
    "additional_metadata": None,
    "additionalMetadata": None,
    "mcp_tools_called": "mcp_tools_called",
    "mcpToolsCalled": "mcp_tools_called",
    "mcp_resources_called": "mcp_resources_called",
    "mcpResourcesCalled": "mcp_resources_called",
    "mcp_prompts_called": "mcp_prompts_called",
    "mcpPromptsCalled": "mcp_prompts_called",
}
PROMPTFOO_TEST_KEYS = ("vars", "assert", "description", "output", "options", "provider", "threshold")
OPENAI_KEYS = ("messages", "id", "metadata", "tools", "functions", "parallel_tool_calls")
OPENAI_MESSAGE_KEYS = (
    "role", "content", "name", "tool_calls", "tool_call_id", "function_call",
    "refusal", "weight", "audio", "annotations", "reasoning_content",
)
OPENAI_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool",
                "developer": "system", "function": "tool"}

# ragas SingleTurnSample / MultiTurnSample keys (and the older 0.1 names), mapped to
# the metadata key they are kept under (None: converted, not kept as metadata).
RAGAS_KEYS: dict[str, str | None] = {
    "user_input": None, "question": None,
    "response": None, "answer": None,
    "retrieved_contexts": None, "contexts": None,
    "id": None, "metadata": None,
    "reference": "reference", "ground_truth": "ground_truth", "ground_truths": "ground_truths",
    "reference_contexts": "reference_contexts", "retrieved_context_ids": "retrieved_context_ids",
    "reference_context_ids": "reference_context_ids", "multi_responses": "multi_responses",
    "rubrics": "rubrics", "persona_name": "persona_name", "query_style": "query_style",
    "query_length": "query_length", "reference_tool_calls": "reference_tool_calls",
    "reference_topics": "reference_topics",
}
#: A record is a ragas sample when it has one of these (and no turns, messages or promptfoo key).
RAGAS_DETECT_KEYS = ("user_input", "response", "retrieved_contexts", "question", "answer", "contexts")
RAGAS_MESSAGE_KEYS = ("type", "content", "metadata", "tool_calls")
RAGAS_TYPES = {"human": "user", "ai": "assistant", "tool": "tool"}


def detect_format(record: Any) -> str:
    """Which format a single record (a parsed dict) is in.

    * has ``turns`` -> ``deepeval`` if the record or any turn has a deepeval-only
      key (``scenario``, ``name``, ``expectedOutcome``, ``tools_called``,
      ``user_id``, ``additional_metadata``, ...), else ``judgegraph``;
    * has ``messages`` -> ``openai``;
    * has a promptfoo test key (``vars``, ``assert``, ``description``,
      ``output``, ...) -> ``promptfoo``;
    * has a ragas sample key (``user_input``, ``response``, ``retrieved_contexts``,
      or the older ``question``, ``answer``, ``contexts``) -> ``ragas``;
    * anything else -> ``judgegraph`` (whose validation then names what is wrong).
    """
    if not isinstance(record, dict):
        return "judgegraph"
    if "turns" in record:
        if any(k in DEEPEVAL_CASE_KEYS for k in record):
            return "deepeval"
        turns = record["turns"]
        if isinstance(turns, list) and any(
            isinstance(t, dict) and any(k in DEEPEVAL_TURN_KEYS for k in t) for t in turns
        ):
            return "deepeval"
        return "judgegraph"
    if "messages" in record:
        return "openai"
    if any(k in PROMPTFOO_TEST_KEYS for k in record):
        return "promptfoo"
    if any(k in RAGAS_DETECT_KEYS for k in record):
        return "ragas"
    return "judgegraph"


# --------------------------------------------------------------------------- internals: errors


class _RecordErrors(Exception):
    """Problems found while converting one record: (path inside record, message)."""

    def __init__(self, problems: list[tuple[Path_, str]]):
        super().__init__(problems)
        self.problems = problems


def _fail(path: Path_, message: str) -> _RecordErrors:
    return _RecordErrors([(path, message)])


def _unknown_key(key: Any, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    msg = f"unknown key {key!r}"
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
    if close:
        msg += f" (did you mean {close[0]!r}?)"
    return msg + "; allowed: " + ", ".join(allowed)


def _check_keys(obj: dict[str, Any], allowed: Iterable[str], path: Path_) -> list[tuple[Path_, str]]:
    allowed = list(allowed)
    return [(path + (k,), _unknown_key(k, allowed)) for k in obj if k not in allowed]


_TYPE_TAG = re.compile(r"[\[\]()]|^(str|int|float|bool|dict|list|none|bytes|function-\w+)$")


def _pydantic_problems(exc: ValidationError) -> list[tuple[Path_, str]]:
    """Turn a pydantic error into (path, message) pairs; union branches are merged."""
    merged: dict[Path_, list[str]] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err.get("loc", ()))
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}" if loc else "unknown key"
        else:
            loc = tuple(s for s in loc if not (isinstance(s, str) and _TYPE_TAG.search(s)))
            msg = err.get("msg", "invalid value")
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            if kind == "literal_error":
                msg += f" (got {err.get('input')!r})"
            elif kind.endswith("_type") and "input" in err:
                msg += f" (got {type(err['input']).__name__})"
            if not loc and "at least one turn" in msg:
                loc = ("turns",)
        msgs = merged.setdefault(loc, [])
        if msg not in msgs:
            msgs.append(msg)
    return [(loc, " or ".join(msgs)) for loc, msgs in merged.items()]


def _rename(path: Path_, renames: list[tuple[Path_, Path_]]) -> Path_:
    """Map a path of the normalised dict back to the path in the raw record."""
    best: tuple[Path_, Path_] | None = None
    for src, dst in renames:
        if path[: len(src)] == src and (best is None or len(src) > len(best[0])):
            best = (src, dst)
    if best is None:
        return path
    return best[1] + path[len(best[0]):]


# --------------------------------------------------------------------------- internals: conversion


@dataclass
class _Ctx:
    """Where a record sits, for ids, sources and error positions."""

    file: str
    stem: str
    kind: str  # jsonl | json | yaml
    record: int
    line: int | None  # the record's first line
    base: Path_  # path of the record from the document root
    prefix: Path_ = ()  # shown before fields (("tests", 3) for promptfoo documents)
    line_of: Callable[[Path_], int | None] | None = None
    doc: dict[str, Any] | None = None  # promptfoo document (prompts, defaultTest)

    @property
    def fallback_id(self) -> str:
        if self.kind == "jsonl" and self.line is not None:
            return f"{self.stem}:{self.line}"
        return f"{self.stem}#{self.record}"

    @property
    def source(self) -> str:
        # .jsonl and .yaml records are found by line; .json records by index
        if self.kind != "json" and self.line is not None:
            return f"{self.file}:{self.line}"
        return f"{self.file}#{self.record}"

    def error(self, path: Path_, message: str) -> InputError:
        line = self.line
        if self.line_of is not None:
            line = self.line_of(self.base + path) or line
        fld = ".".join(str(p) for p in self.prefix + path) or None
        return InputError(self.file, line, self.record, fld, message)


def _clean_id(value: Any, ctx: _Ctx, path: Path_) -> str:
    if value is None or value == "":
        return ctx.fallback_id
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _fail(path, f"id must be a string (got {type(value).__name__})")
    return str(value)


def _validate(data: dict[str, Any], renames: list[tuple[Path_, Path_]] | None = None) -> Conversation:
    turns = data.get("turns")
    if isinstance(turns, list) and not turns:
        raise _fail(_rename(("turns",), renames or []), "a conversation needs at least one turn")
    try:
        return Conversation.model_validate(data)
    except ValidationError as exc:
        raise _RecordErrors(
            [(_rename(p, renames or []), m) for p, m in _pydantic_problems(exc)]
        ) from None


def _from_judgegraph(rec: dict[str, Any], ctx: _Ctx) -> tuple[Conversation, dict[str, Any]]:
    # unknown keys first, with a "did you mean" hint (pydantic only says "extra")
    problems = _check_keys(rec, [*JUDGEGRAPH_KEYS, "conversation_id"], ())
    turns = rec.get("turns")
    if isinstance(turns, list):
        for i, turn in enumerate(turns):
            if isinstance(turn, dict):
                problems.extend(_check_keys(turn, JUDGEGRAPH_TURN_KEYS, ("turns", i)))
    data = {k: v for k, v in rec.items() if k in JUDGEGRAPH_KEYS}
    id_key, id_value = _pick(rec, (), "id", "conversation_id")
    data["id"] = _clean_id(id_value, ctx, (id_key or "id",))
    if isinstance(turns, list):
        data["turns"] = [
            {k: v for k, v in t.items() if k in JUDGEGRAPH_TURN_KEYS} if isinstance(t, dict) else t
            for t in turns
        ]
    try:
        conv = _validate(data, [(("id",), (id_key or "id",))])
    except _RecordErrors as exc:
        raise _RecordErrors(problems + exc.problems) from None
    if problems:
        raise _RecordErrors(problems)
    return conv, {}


def _merge_meta(target: dict[str, Any], value: Any, path: Path_) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise _fail(path, f"must be an object (got {type(value).__name__})")
    target.update(value)


def _pick(obj: dict[str, Any], path: Path_, *names: str) -> tuple[str | None, Any]:
    present = [n for n in names if n in obj]
    if len(present) > 1:
        raise _fail(path + (present[1],), f"give only one of {', '.join(map(repr, present))}")
    if not present:
        return None, None
    return present[0], obj[present[0]]


def _deepeval_tool(raw: Any, path: Path_) -> Any:
    if not isinstance(raw, dict):
        return raw
    out: dict[str, Any] = {}
    _, args = _pick(raw, path, "input_parameters", "inputParameters", "arguments")
    for key, value in raw.items():
        if key in ("input_parameters", "inputParameters", "arguments"):
            continue
        out[key] = value
    if args is not None:
        out["arguments"] = args
    return out


def _from_deepeval(rec: dict[str, Any], ctx: _Ctx) -> tuple[Conversation, dict[str, Any]]:
    problems = _check_keys(rec, [*JUDGEGRAPH_KEYS, "conversation_id", *DEEPEVAL_CASE_KEYS], ())
    if problems:
        raise _RecordErrors(problems)
    meta: dict[str, Any] = {}
    _merge_meta(meta, rec.get("metadata"), ("metadata",))
    _, extra = _pick(rec, (), "additional_metadata", "additionalMetadata")
    _merge_meta(meta, extra, ("additional_metadata",))
    for key, meta_key in DEEPEVAL_CASE_KEYS.items():
        if meta_key and key in rec and rec[key] is not None:
            meta[meta_key] = rec[key]
    id_key, id_value = _pick(rec, (), "id", "conversation_id")
    if id_value in (None, "") and rec.get("name") not in (None, ""):
        id_key, id_value = "name", rec["name"]
    elif rec.get("name") not in (None, ""):
        meta["name"] = rec["name"]
    data: dict[str, Any] = {"id": _clean_id(id_value, ctx, (id_key or "id",))}
    renames: list[tuple[Path_, Path_]] = [(("id",), (id_key or "id",))]
    key, value = _pick(rec, (), "expected_outcome", "expectedOutcome")
    if key:
        data["expected_outcome"] = value
        renames.append((("expected_outcome",), (key,)))
    key, value = _pick(rec, (), "chatbot_role", "chatbotRole")
    if key:
        data["chatbot_role"] = value
        renames.append((("chatbot_role",), (key,)))
    data["metadata"] = meta

    turns = rec.get("turns")
    if isinstance(turns, list):
        allowed = [*JUDGEGRAPH_TURN_KEYS, *DEEPEVAL_TURN_KEYS]
        out_turns: list[Any] = []
        for i, turn in enumerate(turns):
            if not isinstance(turn, dict):
                out_turns.append(turn)
                continue
            path = ("turns", i)
            problems.extend(_check_keys(turn, allowed, path))
            t: dict[str, Any] = {k: turn[k] for k in ("role", "content") if k in turn}
            tmeta: dict[str, Any] = {}
            _merge_meta(tmeta, turn.get("metadata"), path + ("metadata",))
            _, extra = _pick(turn, path, "additional_metadata", "additionalMetadata")
            _merge_meta(tmeta, extra, path + ("additional_metadata",))
            for k, meta_key in DEEPEVAL_TURN_KEYS.items():
                if meta_key and k in turn and turn[k] is not None:
                    tmeta[meta_key] = turn[k]
            t["metadata"] = tmeta
            key, value = _pick(turn, path, "retrieval_context", "retrievalContext")
            if key:
                t["retrieval_context"] = value
                renames.append((path + ("retrieval_context",), path + (key,)))
            key, value = _pick(turn, path, "tool_calls", "tools_called", "toolsCalled")
            if key:
                renames.append((path + ("tool_calls",), path + (key,)))
                if isinstance(value, list):
                    value = [_deepeval_tool(v, path + (key, j)) for j, v in enumerate(value)]
                t["tool_calls"] = value
            out_turns.append(t)
        data["turns"] = out_turns
    elif "turns" in rec:
        data["turns"] = turns
    if problems:
        raise _RecordErrors(problems)
    return _validate(data, renames), {}


def _openai_content(value: Any, path: Path_) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for j, part in enumerate(value):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                if part.get("type", "text") in ("text", "input_text", "output_text"):
                    text = part.get("text")
                    if not isinstance(text, str):
                        raise _fail(path + (j, "text"), "a text part needs a string 'text'")
                    texts.append(text)
                # image_url, input_audio, file, refusal, ... parts are skipped
            else:
                raise _fail(path + (j,), f"content part must be an object (got {type(part).__name__})")
        return "\n".join(texts)
    raise _fail(path, f"content must be a string or a list of parts (got {type(value).__name__})")


def _openai_tool_call(raw: Any, path: Path_) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(path, f"a tool call must be an object (got {type(raw).__name__})")
    fn = raw.get("function")
    if not isinstance(fn, dict):
        raise _fail(path + ("function",), "a tool call needs a 'function' object with 'name' and 'arguments'")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(path + ("function", "name"), "a tool call needs a function name")
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            args = parsed
    elif args is not None and not isinstance(args, dict):
        args = json.dumps(args)
    out: dict[str, Any] = {"name": name, "arguments": args}
    if raw.get("id") is not None:
        out["id"] = str(raw["id"])
    return out


def _from_openai(rec: dict[str, Any], ctx: _Ctx) -> tuple[Conversation, dict[str, Any]]:
    problems = _check_keys(rec, OPENAI_KEYS, ())
    messages = rec.get("messages")
    if not isinstance(messages, list):
        problems.append((("messages",), f"must be a list of messages (got {type(messages).__name__})"))
    if problems:
        raise _RecordErrors(problems)
    if not messages:
        raise _fail(("messages",), "a conversation needs at least one message")
    meta: dict[str, Any] = {}
    _merge_meta(meta, rec.get("metadata"), ("metadata",))
    for key in ("tools", "functions", "parallel_tool_calls"):
        if rec.get(key) is not None:
            meta[key] = rec[key]
    turns: list[Any] = []
    for i, msg in enumerate(messages):
        path = ("messages", i)
        if not isinstance(msg, dict):
            raise _fail(path, f"a message must be an object (got {type(msg).__name__})")
        problems.extend(_check_keys(msg, OPENAI_MESSAGE_KEYS, path))
        role = msg.get("role")
        if not isinstance(role, str) or role not in OPENAI_ROLES:
            problems.append((path + ("role",), (
                "Field required" if "role" not in msg else
                f"unknown role {role!r}; expected one of " + ", ".join(OPENAI_ROLES)
            )))
            continue
        if "content" not in msg and not msg.get("tool_calls") and not msg.get("function_call"):
            problems.append((path + ("content",), "Field required"))
            continue
        try:
            content = _openai_content(msg.get("content"), path + ("content",))
            calls = msg.get("tool_calls") or []
            if not isinstance(calls, list):
                raise _fail(path + ("tool_calls",), "must be a list")
            tool_calls = [_openai_tool_call(c, path + ("tool_calls", j)) for j, c in enumerate(calls)]
            if isinstance(msg.get("function_call"), dict):
                tool_calls.append(
                    _openai_tool_call({"function": msg["function_call"]}, path + ("function_call",))
                )
        except _RecordErrors as exc:
            problems.extend(exc.problems)
            continue
        tmeta = {k: msg[k] for k in ("name", "tool_call_id", "refusal", "weight", "audio", "annotations",
                                     "reasoning_content") if msg.get(k) not in (None, [])}
        if role != OPENAI_ROLES[role]:
            tmeta["openai_role"] = role
        turns.append({"role": OPENAI_ROLES[role], "content": content, "tool_calls": tool_calls,
                      "metadata": tmeta})
    if problems:
        raise _RecordErrors(problems)
    data = {"id": _clean_id(rec.get("id"), ctx, ("id",)), "turns": turns, "metadata": meta}
    return _validate(data, [(("turns",), ("messages",))]), {}


# ---- ragas


def _ragas_messages(messages: list[Any], path: Path_) -> tuple[list[dict[str, Any]], list[tuple[Path_, Path_]]]:
    """A MultiTurnSample's ``user_input``: ragas messages ``{type: human|ai|tool, content, ...}``."""
    problems: list[tuple[Path_, str]] = []
    turns: list[dict[str, Any]] = []
    renames: list[tuple[Path_, Path_]] = []
    for i, msg in enumerate(messages):
        mpath = path + (i,)
        if not isinstance(msg, dict):
            problems.append((mpath, f"a message must be an object (got {type(msg).__name__})"))
            continue
        problems.extend(_check_keys(msg, RAGAS_MESSAGE_KEYS, mpath))
        kind = msg.get("type")
        if kind not in RAGAS_TYPES:
            problems.append((mpath + ("type",), "Field required" if "type" not in msg else
                             f"unknown message type {kind!r}; expected one of " + ", ".join(RAGAS_TYPES)))
            continue
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
            problems.append((mpath + ("tool_calls",), "must be a list of {name, args}"))
            continue
        tool_calls = [{"name": c["name"], "arguments": c.get("args", c.get("arguments"))} for c in calls]
        renames.append((("turns", len(turns)), mpath))
        turns.append({"role": RAGAS_TYPES[kind], "content": msg.get("content"), "tool_calls": tool_calls,
                      "metadata": msg.get("metadata") or {}})
    if problems:
        raise _RecordErrors(problems)
    return turns, renames


def _from_ragas(rec: dict[str, Any], ctx: _Ctx) -> tuple[Conversation, dict[str, Any]]:
    """A ragas sample. Single-turn (``user_input`` a string): one user turn and
    one assistant turn holding ``retrieved_contexts``. Multi-turn (``user_input``
    a list of ragas messages): one turn per message. Other ragas fields
    (``reference``, ``ground_truth``, ...) are kept in the metadata."""
    problems = _check_keys(rec, RAGAS_KEYS, ())
    if problems:
        raise _RecordErrors(problems)
    meta: dict[str, Any] = {}
    _merge_meta(meta, rec.get("metadata"), ("metadata",))
    for key, meta_key in RAGAS_KEYS.items():
        if meta_key and rec.get(key) is not None:
            meta[meta_key] = rec[key]
    ukey, user = _pick(rec, (), "user_input", "question")
    rkey, response = _pick(rec, (), "response", "answer")
    ckey, contexts = _pick(rec, (), "retrieved_contexts", "contexts")
    if ukey is None:
        raise _fail(("user_input",), "Field required (the user's message; 'question' in older ragas)")
    if isinstance(user, list):
        for key in (rkey, ckey):
            if key is not None:
                problems.append(((key,), "not used with a multi-turn user_input (a list of messages): the replies"
                                          " are its 'ai' messages"))
        if problems:
            raise _RecordErrors(problems)
        if not user:
            raise _fail((ukey,), "a conversation needs at least one message")
        turns, renames = _ragas_messages(user, (ukey,))
    else:
        if not isinstance(user, str):
            problems.append(((ukey,), f"Input should be a valid string or a list of messages (got {type(user).__name__})"))
        if rkey is None:
            problems.append((("response",), "Field required (the assistant's reply; 'answer' in older ragas)"))
        elif not isinstance(response, str):
            problems.append(((rkey,), f"Input should be a valid string (got {type(response).__name__})"))
        if contexts is not None:
            if not isinstance(contexts, list):
                problems.append(((ckey,), f"must be a list of strings (got {type(contexts).__name__})"))
            else:
                problems.extend(((ckey, j), f"must be a non-empty string (got {type(c).__name__ if not isinstance(c, str) else 'an empty string'})")
                                for j, c in enumerate(contexts) if not isinstance(c, str) or not c.strip())
        if problems:
            raise _RecordErrors(problems)
        turns = [{"role": "user", "content": user},
                 {"role": "assistant", "content": response, "retrieval_context": list(contexts or [])}]
        renames = [(("turns", 0, "content"), (ukey,)), (("turns", 1, "content"), (rkey,))]
        if ckey:
            renames.append((("turns", 1, "retrieval_context"), (ckey,)))
    data = {"id": _clean_id(rec.get("id"), ctx, ("id",)), "turns": turns, "metadata": meta}
    return _validate(data, renames), {}


# ---- promptfoo

ASSERTION_TYPE = "conversation-relevance"
_TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def _render_prompt(template: str, variables: dict[str, Any]) -> str:
    """Replace ``{{name}}`` / ``{{ name }}`` with the variable's value, in one pass.

    Substituted values are never rendered again, so ``{{ env.SECRET }}`` inside a
    value stays literal; placeholders naming unknown variables are left as-is.
    """

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return _as_text(variables[name]) if name in variables else match.group(0)

    return _TEMPLATE_VAR.sub(sub, template)


def _provider_id(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("id"), str):
            return value["id"]
        if "text" in value:
            return _provider_id(value["text"])
    return None


def _assertion_options(asserts: Any, path: Path_) -> dict[str, Any] | None:
    """Options of the first conversation-relevance assertion in a list (None: no such assertion)."""
    if not isinstance(asserts, list):
        return None
    for j, a in enumerate(asserts):
        if not (isinstance(a, dict) and a.get("type") == ASSERTION_TYPE):
            continue
        p = path + (j,)
        opts: dict[str, Any] = {"metric": "conversation_relevance"}
        if "threshold" in a and a["threshold"] is not None:
            t = a["threshold"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 1:
                raise _fail(p + ("threshold",), f"threshold must be a number between 0 and 1 (got {t!r})")
            opts["threshold"] = float(t)
        config = a.get("config")
        if config is not None and not isinstance(config, dict):
            raise _fail(p + ("config",), "must be an object")
        window = (config or {}).get("windowSize")
        if window is not None:
            if isinstance(window, bool) or not isinstance(window, int) or window < 1:
                raise _fail(p + ("config", "windowSize"), f"windowSize must be a positive integer (got {window!r})")
            opts["window_size"] = window
        if a.get("rubricPrompt") is not None:
            opts["rubric"] = _as_text(a["rubricPrompt"])
        model = _provider_id(a.get("provider"))
        if model:
            opts["model"] = model
        return opts
    return None


def _level_options(level: dict[str, Any], path: Path_) -> dict[str, Any]:
    """Options a test (or defaultTest) gives: its assertion plus options.provider/rubricPrompt."""
    opts = _assertion_options(level.get("assert"), path + ("assert",)) or {}
    extra = level.get("options")
    if isinstance(extra, dict):
        model = _provider_id(extra.get("provider"))
        if model:
            opts.setdefault("model", model)
        if extra.get("rubricPrompt") is not None:
            opts.setdefault("rubric", _as_text(extra["rubricPrompt"]))
    return opts


def _first_prompt(doc: dict[str, Any] | None) -> str | None:
    if not doc:
        return None
    prompts = doc.get("prompts")
    if isinstance(prompts, (str, dict)):
        prompts = [prompts]
    if not isinstance(prompts, list) or not prompts:
        return None
    first = prompts[0]
    if isinstance(first, dict):
        first = first.get("raw")
    if not isinstance(first, str) or first.startswith("file://"):
        return None
    return first


def _from_promptfoo(rec: dict[str, Any], ctx: _Ctx) -> tuple[Conversation, dict[str, Any]]:
    doc = ctx.doc or {}
    default = doc.get("defaultTest") if isinstance(doc.get("defaultTest"), dict) else {}
    test_vars = rec.get("vars", {})
    if test_vars is None:
        test_vars = {}
    if not isinstance(test_vars, dict):
        raise _fail(("vars",), f"vars must be an object (got {type(test_vars).__name__})")
    dvars = default.get("vars") if isinstance(default.get("vars"), dict) else {}
    variables = {**dvars, **test_vars}
    index = ctx.prefix[-1] if ctx.prefix else ctx.record

    turns: list[dict[str, Any]] = []
    renames: list[tuple[Path_, Path_]] = []
    if "_conversation" in variables:
        conv = variables["_conversation"]
        cpath: Path_ = ("vars", "_conversation")
        if not isinstance(conv, list):
            raise _fail(cpath, f"_conversation must be a list of {{input, output}} (got {type(conv).__name__})")
        if not conv:
            raise _fail(cpath, "a conversation needs at least one exchange")
        problems: list[tuple[Path_, str]] = []
        for k, ex in enumerate(conv):
            if not isinstance(ex, dict):
                problems.append((cpath + (k,), f"an exchange must be an object with input and output (got {type(ex).__name__})"))
                continue
            for side, role in (("input", "user"), ("output", "assistant")):
                if side not in ex:
                    problems.append((cpath + (k, side), "Field required"))
                elif not isinstance(ex[side], str):
                    problems.append((cpath + (k, side), f"Input should be a valid string (got {type(ex[side]).__name__})"))
                else:
                    renames.append((("turns", len(turns)), cpath + (k, side)))
                    turns.append({"role": role, "content": ex[side]})
            problems.extend(_check_keys(ex, ("input", "output", "metadata"), cpath + (k,)))
        if problems:
            raise _RecordErrors(problems)
    else:
        if "output" in test_vars:
            out_path, output = ("vars", "output"), test_vars["output"]
        elif "output" in rec:
            out_path, output = ("output",), rec["output"]
        else:
            raise _fail(("vars", "output"), (
                f"test {index} has no conversation and no output: give vars._conversation "
                "(a list of {input, output}) or an output (vars.output) with a prompt"
            ))
        if not isinstance(output, str):
            raise _fail(out_path, f"output must be a string (got {type(output).__name__})")
        prompt_key = next((k for k in ("prompt", "input", "query") if k in variables), None)
        if prompt_key is not None:
            prompt, prompt_path = variables[prompt_key], ("vars", prompt_key)
            if not isinstance(prompt, str):
                raise _fail(prompt_path, f"{prompt_key} must be a string (got {type(prompt).__name__})")
        else:
            template = _first_prompt(ctx.doc)
            if template is None:
                raise _fail(("vars", "prompt"), (
                    f"test {index} has an output but no prompt: give vars.prompt "
                    "(or vars.input / vars.query) or a prompts entry in the file"
                ))
            prompt, prompt_path = _render_prompt(template, variables), ("vars",)
        turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": output}]
        renames = [(("turns", 0), prompt_path), (("turns", 1), out_path)]

    # options: test assertion > defaultTest assertion, field by field
    options = _level_options(default, ("defaultTest",)) if default else {}
    for key, value in _level_options(rec, ()).items():
        options[key] = value

    meta: dict[str, Any] = {}
    _merge_meta(meta, rec.get("metadata"), ("metadata",))
    description = rec.get("description")
    if description is not None:
        meta["description"] = description
    other_vars = {k: v for k, v in variables.items() if k not in ("_conversation", "output")}
    if other_vars:
        meta["vars"] = other_vars
    conv_id = ctx.fallback_id
    if isinstance(description, str) and _slug(description):
        conv_id = _slug(description)
    data = {"id": conv_id, "turns": turns, "metadata": meta}
    return _validate(data, renames), options


_CONVERTERS = {
    "judgegraph": _from_judgegraph,
    "deepeval": _from_deepeval,
    "promptfoo": _from_promptfoo,
    "openai": _from_openai,
    "ragas": _from_ragas,
}


def _convert(rec: Any, ctx: _Ctx, fmt: str | None = None) -> Iterator[LoadedConversation | InputError]:
    if not isinstance(rec, dict):
        yield ctx.error((), f"a record must be an object (got {type(rec).__name__})")
        return
    if isinstance(rec.get("tests"), (list, str)) and "turns" not in rec and "messages" not in rec:
        yield ctx.error(("tests",), "a promptfoo document cannot be nested inside a list or a .jsonl line")
        return
    fmt = fmt or detect_format(rec)
    try:
        conv, options = _CONVERTERS[fmt](rec, ctx)
    except _RecordErrors as exc:
        problems = exc.problems
        for path, message in problems[:MAX_ERRORS_PER_RECORD]:
            yield ctx.error(path, f"{message} [{fmt} format]" if fmt != "judgegraph" else message)
        if len(problems) > MAX_ERRORS_PER_RECORD:
            yield ctx.error((), f"... and {len(problems) - MAX_ERRORS_PER_RECORD} more errors in this record")
        return
    yield LoadedConversation(conversation=conv, source=ctx.source, format=fmt, options=options)


# --------------------------------------------------------------------------- internals: files


def _iter_file(path: str | Path, seen: dict[str, str]) -> Iterator[LoadedConversation | InputError]:
    name = str(path)
    p = Path(path)
    kind = EXTENSIONS.get(p.suffix.lower())
    if kind is None:
        yield InputError(name, None, None, None, (
            f"unsupported file extension {p.suffix or '(none)'!r}; expected .jsonl, .json, .yaml or .yml"
        ))
        return
    if not p.exists():
        yield InputError(name, None, None, None, "file not found")
        return
    if p.is_dir():
        yield InputError(name, None, None, None, "is a directory, not a file")
        return
    reader = _iter_jsonl if kind == "jsonl" else _iter_document
    try:
        for item in reader(p, name, kind):
            if isinstance(item, LoadedConversation):
                cid = item.conversation.id
                if cid in seen:
                    yield _duplicate(item, cid, seen[cid], name)
                    continue
                seen[cid] = item.source
            yield item
    except OSError as exc:
        yield InputError(name, None, None, None, f"cannot read file: {exc.strerror or exc}")


def _duplicate(item: LoadedConversation, cid: str, first: str, name: str) -> InputError:
    src = item.source[len(name):]
    line = int(src[1:]) if src.startswith(":") and src[1:].isdigit() else None
    record = int(src[1:]) if src.startswith("#") and src[1:].isdigit() else None
    return InputError(name, line, record, "id", f"duplicate conversation id {cid!r} (first seen at {first})")


def _iter_jsonl(p: Path, name: str, kind: str) -> Iterator[LoadedConversation | InputError]:
    record = 0
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield InputError(name, lineno, record, None, f"not valid UTF-8 (byte {exc.start + 1} of the line)")
                record += 1
                continue
            stripped = text.strip()
            if not stripped or stripped.startswith("//"):
                continue
            ctx = _Ctx(name, p.stem, kind, record, lineno, ())
            record += 1
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError as exc:
                col = exc.colno + (len(text) - len(text.lstrip()))
                yield InputError(name, lineno, ctx.record, None, f"invalid JSON: {exc.msg} (column {col})")
                continue
            yield from _convert(value, ctx)


def _read_text(p: Path, name: str) -> str | InputError:
    data = p.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return InputError(name, line, None, None, f"not valid UTF-8 (byte offset {exc.start})")


def _iter_document(p: Path, name: str, kind: str) -> Iterator[LoadedConversation | InputError]:
    text = _read_text(p, name)
    if isinstance(text, InputError):
        yield text
        return
    if kind == "json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            yield InputError(name, exc.lineno, None, None, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
            return
        line_of = _json_lines(text, value)
    else:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            value = loader.construct_document(node) if node is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = " ".join(str(x) for x in (exc.context, exc.problem) if x)
            yield InputError(name, mark.line + 1 if mark else None, None, None, f"invalid YAML: {problem}{where}")
            return
        except yaml.YAMLError as exc:
            yield InputError(name, None, None, None, f"invalid YAML: {exc}")
            return
        finally:
            loader.dispose()
        line_of = _yaml_lines(node)
    yield from _iter_value(value, p, name, kind, line_of)


def _iter_value(value: Any, p: Path, name: str, kind: str,
                line_of: Callable[[Path_], int | None]) -> Iterator[LoadedConversation | InputError]:
    def ctx(record: int, base: Path_, **kw: Any) -> _Ctx:
        return _Ctx(name, p.stem, kind, record, line_of(base), base, line_of=line_of, **kw)

    if value is None:
        yield InputError(name, None, None, None, "file is empty")
        return
    if isinstance(value, list):
        for i, rec in enumerate(value):
            yield from _convert(rec, ctx(i, (i,)))
        return
    if not isinstance(value, dict):
        yield InputError(name, 1, None, None, (
            f"expected a record, a list of records or a promptfoo document (got {type(value).__name__})"
        ))
        return
    if "tests" in value and "turns" not in value and "messages" not in value:
        yield from _iter_promptfoo_doc(value, p, name, kind, line_of)
        return
    if "conversations" in value and "turns" not in value and "messages" not in value:
        extra = [k for k in value if k != "conversations"]
        if extra:
            yield InputError(name, line_of((extra[0],)), None, extra[0],
                             f"unknown top-level key {extra[0]!r} next to 'conversations'")
        convs = value["conversations"]
        if not isinstance(convs, list):
            yield InputError(name, line_of(("conversations",)), None, "conversations", "must be a list of records")
            return
        for i, rec in enumerate(convs):
            yield from _convert(rec, ctx(i, ("conversations", i)))
        return
    yield from _convert(value, ctx(0, ()))


def _iter_promptfoo_doc(doc: dict[str, Any], p: Path, name: str, kind: str,
                        line_of: Callable[[Path_], int | None]) -> Iterator[LoadedConversation | InputError]:
    tests = doc["tests"]
    if not isinstance(tests, list):
        yield InputError(name, line_of(("tests",)), None, "tests", (
            "only inline tests are supported (a list of tests); external test files "
            f"are not read (got {tests!r})"
        ))
        return
    default = doc.get("defaultTest")
    if default is not None and not isinstance(default, dict):
        yield InputError(name, line_of(("defaultTest",)), None, "defaultTest", "must be an inline object")
    elif isinstance(default, dict):
        try:  # report a bad defaultTest once, not once per test
            _level_options(default, ("defaultTest",))
        except _RecordErrors as exc:
            for path, message in exc.problems:
                yield InputError(name, line_of(path), None, ".".join(map(str, path)), message)
            doc = {**doc, "defaultTest": {k: v for k, v in default.items() if k not in ("assert", "options")}}
    for i, test in enumerate(tests):
        base = ("tests", i)
        c = _Ctx(name, p.stem, kind, i, line_of(base), base, prefix=base, line_of=line_of, doc=doc)
        if isinstance(test, str):
            yield c.error((), f"external test references are not supported (got {test!r})")
            continue
        yield from _convert(test, c, "promptfoo" if isinstance(test, dict) else None)


def _yaml_lines(root: yaml.Node | None) -> Callable[[Path_], int | None]:
    def line_of(path: Path_) -> int | None:
        node = root
        if node is None:
            return None
        line = node.start_mark.line + 1
        for seg in path:
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == str(seg):
                        line, node = k.start_mark.line + 1, v
                        break
                else:
                    break
            elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
                node = node.value[seg]
                line = node.start_mark.line + 1
            else:
                break
        return line

    return line_of


_WS = re.compile(r"[ \t\n\r]*")


def _json_lines(text: str, value: Any) -> Callable[[Path_], int | None]:
    """Line of each record of a parsed .json document (records only, not fields)."""
    newlines = [m.start() for m in re.finditer("\n", text)]
    starts: dict[Path_, int] = {}
    try:
        dec = json.JSONDecoder()
        i = _WS.match(text, 0).end()  # type: ignore[union-attr]
        starts[()] = i
        key = None
        if isinstance(value, dict):
            key = next((k for k in ("tests", "conversations") if isinstance(value.get(k), list)), None)
        if key is not None:
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            found = None
            while text[i] != "}":
                k, i = dec.raw_decode(text, i)
                i = _WS.match(text, i).end()  # type: ignore[union-attr]
                i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]  # skip ':'
                if k == key:
                    found = i
                starts[(k,)] = i
                _, i = dec.raw_decode(text, i)
                i = _WS.match(text, i).end()  # type: ignore[union-attr]
                if text[i] == ",":
                    i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            if found is None:
                raise ValueError("key not found")
            i = found
        if key is not None or isinstance(value, list):
            prefix: Path_ = (key,) if key is not None else ()
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            n = 0
            while text[i] != "]":
                starts[prefix + (n,)] = i
                _, i = dec.raw_decode(text, i)
                i = _WS.match(text, i).end()  # type: ignore[union-attr]
                if text[i] == ",":
                    i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
                n += 1
    except (ValueError, IndexError):
        pass

    def line_of(path: Path_) -> int | None:
        for cut in range(len(path), -1, -1):
            if path[:cut] in starts:
                return bisect.bisect_left(newlines, starts[path[:cut]]) + 1
        return None

    return line_of
