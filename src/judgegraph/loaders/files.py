"""Reading files: ``.jsonl`` line by line, ``.json``/``.yaml`` documents (one
record, a list, ``{"conversations": [...]}`` or a promptfoo document), with the
line of every record and field for error messages."""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from judgegraph.data.conversation import Conversation

from . import yaml_safe
from .base import Ctx, InputError, LoadedConversation, LoadResult, Path_, RecordErrors
from .detect import convert
from .formats.langchain import is_langchain_message
from .formats.promptfoo import test_assertions
from .jsonstream import WHITESPACE, JsonArray, JsonSyntaxError, NotUtf8
from .limits import CHUNK_BYTES, Limits, Refused, TooLong, check_record, read_lines

EXTENSIONS: dict[str, str] = {".jsonl": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}


@dataclass(frozen=True)
class _Options:
    limits: Limits
    allow_outside_files: bool
    problem: str | None = None  # a bad setting (environment variable): every file reports it, none is read
    stem: str | None = None  # what a record without an id is named after (default: the file's stem)


@dataclass(frozen=True)
class _File:
    """One input file as it is read: ``name`` as given (what errors name), its path, its kind, the options."""

    name: str
    path: Path
    kind: str
    opts: _Options

    def ctx(self, record: int, line: int | None, base: Path_ = (), **kw: Any) -> Ctx:
        return Ctx(self.name, self.opts.stem or self.path.stem, self.kind, record, line, base, limits=self.opts.limits,
                   folder=self.path.parent, allow_outside_files=self.opts.allow_outside_files, **kw)

    def error(self, message: str, line: int | None = None, record: int | None = None,
              field: str | None = None) -> InputError:
        return InputError(self.name, line, record, field, message)


def id_stems(paths: Iterable[str | Path]) -> dict[str, str]:
    """What the generated ids (``STEM:LINE``, ``STEM#RECORD``) of each of files read together start with: the file's
    stem, unless another input has the same: then its path from those files' common folder, without the extension
    (``a/chats``, ``b/chats``) or with it when that still collides. Stable across runs (``--resume`` finds them)."""
    files = {str(path): os.path.abspath(path) for path in paths}  # the path as given -> its absolute path
    by_stem: dict[str, set[str]] = {}
    for full in files.values():
        by_stem.setdefault(Path(full).stem, set()).add(full)
    named: dict[str, str] = {}
    for stem, fulls in by_stem.items():
        if len(fulls) == 1:
            named.update((f, stem) for f in fulls)
            continue
        base = os.path.commonpath([os.path.dirname(f) for f in fulls])
        relative = {f: Path(os.path.relpath(f, base)).as_posix() for f in fulls}
        short = {f: r.rsplit(".", 1)[0] if "." in Path(r).name else r for f, r in relative.items()}
        unique = len(set(short.values())) == len(short)
        named.update((f, short[f] if unique else relative[f]) for f in fulls)
    return {given: named[full] for given, full in files.items()}


def _options(limits: Limits | None, allow_outside_files: bool | None) -> _Options:
    if allow_outside_files is None:
        allow_outside_files = os.environ.get("JUDGEGRAPH_ALLOW_OUTSIDE_FILES", "").strip().lower() in ("1", "true", "yes")
    if limits is None:
        try:
            limits = Limits.from_env()
        except ValueError as exc:
            return _Options(Limits(), allow_outside_files, str(exc))
    return _Options(limits, allow_outside_files)


def iter_records(path: str | Path, *, limits: Limits | None = None, allow_outside_files: bool | None = None,
                 id_stem: str | None = None) -> Iterator[LoadedConversation | InputError]:
    """Every conversation of one file, read lazily, or an :class:`InputError` per problem (a repeated id included).
    ``limits`` default to :meth:`Limits.from_env`; ``allow_outside_files`` (default ``JUDGEGRAPH_ALLOW_OUTSIDE_FILES``)
    lets a promptfoo ``file://`` leave the file's folder; ``id_stem`` names records without an id (:func:`id_stems`)."""
    yield from _iter_file(path, {}, replace(_options(limits, allow_outside_files), stem=id_stem))


def load_file(path: str | Path, *, limits: Limits | None = None,
              allow_outside_files: bool | None = None) -> LoadResult:
    return load_files([path], limits=limits, allow_outside_files=allow_outside_files)


def load_files(paths: Iterable[str | Path], *, limits: Limits | None = None,
               allow_outside_files: bool | None = None) -> LoadResult:
    """Load several files; a conversation id seen before (in any file) is an error.
    Records without an id are named after their file (:func:`id_stems`)."""
    result = LoadResult()
    seen: dict[str, str] = {}
    opts = _options(limits, allow_outside_files)
    paths = list(paths)
    stems = id_stems(paths)
    for path in paths:
        for item in _iter_file(path, seen, replace(opts, stem=stems[str(path)])):
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


def _iter_file(path: str | Path, seen: dict[str, str], opts: _Options) -> Iterator[LoadedConversation | InputError]:
    p = Path(path)
    f = _File(str(path), p, EXTENSIONS.get(p.suffix.lower(), ""), opts)
    problem = (f"unsupported file extension {p.suffix or '(none)'!r}; expected .jsonl, .json, .yaml or .yml"
               if not f.kind else "file not found" if not p.exists()
               else "is a directory, not a file" if p.is_dir() else opts.problem)
    if problem:
        yield f.error(problem)
        return
    found = 0
    try:
        for item in (_iter_jsonl if f.kind == "jsonl" else _iter_document)(f):
            found += 1
            if isinstance(item, LoadedConversation):
                cid = item.conversation.id
                if cid in seen:
                    yield _duplicate(item, cid, seen[cid], f.name)
                    continue
                seen[cid] = item.source
            yield item
    except OSError as exc:
        found += 1
        yield f.error(f"cannot read file: {exc.strerror or exc}")
    if not found:  # an empty file must never pass a gate as "nothing failed"
        yield f.error("file is empty: no records")


def _duplicate(item: LoadedConversation, cid: str, first: str, name: str) -> InputError:
    src = item.source[len(name):]
    line = int(src[1:]) if src.startswith(":") and src[1:].isdigit() else None
    record = int(src[1:]) if src.startswith("#") and src[1:].isdigit() else None
    return InputError(name, line, record, "id", f"duplicate conversation id {cid!r} (first seen at {first})")


def _iter_jsonl(f: _File) -> Iterator[LoadedConversation | InputError]:
    record = 0
    limits = f.opts.limits
    with f.path.open("rb") as fh:
        for lineno, raw in read_lines(fh, limits.max_record_chars):  # a line over the limit is never held
            if isinstance(raw, TooLong):
                yield f.error(_too_big(limits, "line"), lineno, record)
                record += 1
                continue
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield f.error(f"not valid UTF-8 (byte {exc.start + 1} of the line)", lineno, record)
                record += 1
                continue
            stripped = text.strip()
            if not stripped or stripped.startswith("//"):
                continue
            record += 1
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError as exc:
                col = exc.colno + (len(text) - len(text.lstrip()))
                yield f.error(f"invalid JSON: {exc.msg} (column {col})", lineno, record - 1)
                continue
            except RecursionError:
                yield f.error(_too_deep(limits), lineno, record - 1)
                continue
            yield from convert(value, f.ctx(record - 1, lineno))


def _head(fh: BinaryIO) -> bytes:
    """The first bytes of a file, up to its first character that is not white space (or a byte-order mark)."""
    head = b""
    while not head.lstrip(b" \t\r\n\xef\xbb\xbf") and (data := getattr(fh, "read1", fh.read)(CHUNK_BYTES)):
        head += data
    return head


def _too_big(limits: Limits, what: str) -> str:
    return (f"the {what} holds more than the limit of {limits.max_record_chars:,} characters: refused unread; "
            "raise JUDGEGRAPH_MAX_RECORD_CHARS if it is genuine")


def _too_deep(limits: Limits) -> str:
    return f"nested too deeply (the limit is {limits.max_depth} levels): refused"


def _iter_document(f: _File) -> Iterator[LoadedConversation | InputError]:
    with f.path.open("rb") as fh:
        head = _head(fh) if f.kind == "json" else b""
        if head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"["):  # a list: read one record at a time
            yield from _iter_json_array(JsonArray(fh, f.opts.limits.max_record_chars, head=head), f)
            return
        data = head + fh.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        yield f.error(f"not valid UTF-8 (byte offset {exc.start})", data.count(b"\n", 0, exc.start) + 1)
        return
    if not text.strip():
        return  # reported as an empty file
    if f.kind == "json":
        try:
            value = json.loads(text)
        except RecursionError:
            yield f.error(_too_deep(f.opts.limits), 1)
            return
        except json.JSONDecodeError as exc:
            yield f.error(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", exc.lineno)
            return
        line_of = _json_lines(text, value)
    else:
        try:
            node = yaml_safe.compose(text, f.opts.limits)
            value = yaml_safe.construct(node) if node is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = " ".join(str(x) for x in (exc.context, exc.problem) if x)
            yield f.error(f"invalid YAML: {problem}{where}", mark.line + 1 if mark else None)
            return
        except yaml.YAMLError as exc:
            yield f.error(f"invalid YAML: {exc}")
            return
        line_of = _yaml_lines(node)
    yield from _iter_value(value, f, line_of)


def _iter_value(value: object, f: _File, line_of: Callable[[Path_], int | None]
                ) -> Iterator[LoadedConversation | InputError]:
    def ctx(record: int, base: Path_) -> Ctx:
        return f.ctx(record, line_of(base), base, line_of=line_of)

    if value is None or isinstance(value, Refused):
        yield f.error("file is empty") if value is None else f.error(value.message, 1)
    elif isinstance(value, list) and value and all(is_langchain_message(m) for m in value):
        # a file that is one LangChain message list (json.dump(messages_to_dict(messages)))
        yield from convert({"messages": value}, ctx(0, ()), "langchain")
    elif isinstance(value, list):
        for i, rec in enumerate(value):
            yield from convert(rec, ctx(i, (i,)))
    elif not isinstance(value, dict):
        yield f.error(f"expected a record, a list of records or a promptfoo document (got {type(value).__name__})", 1)
    elif "turns" in value or "messages" in value:
        yield from convert(value, ctx(0, ()))
    elif "tests" in value:
        yield from _iter_promptfoo_doc(value, f, line_of)
    elif "conversations" in value:
        extra = [k for k in value if k != "conversations"]
        if extra:
            yield f.error(f"unknown top-level key {extra[0]!r} next to 'conversations'", line_of((extra[0],)),
                          field=extra[0])
        convs = value["conversations"]
        if not isinstance(convs, list):
            yield f.error("must be a list of records", line_of(("conversations",)), field="conversations")
            return
        for i, rec in enumerate(convs):
            yield from convert(rec, ctx(i, ("conversations", i)))
    else:
        yield from convert(value, ctx(0, ()))


def _iter_promptfoo_doc(doc: dict[str, Any], f: _File, line_of: Callable[[Path_], int | None]
                        ) -> Iterator[LoadedConversation | InputError]:
    unsafe = check_record({k: v for k, v in doc.items() if k != "tests"}, f.opts.limits)
    if unsafe:  # prompts / defaultTest are part of every test
        for path, message in unsafe:
            yield f.error(message, line_of(path), field=".".join(map(str, path)) or None)
        return
    tests = doc["tests"]
    if not isinstance(tests, list):
        yield f.error(f"only inline tests are supported (a list of tests); external test files are not read "
                      f"(got {tests!r})", line_of(("tests",)), field="tests")
        return
    default = doc.get("defaultTest")
    if default is not None and not isinstance(default, dict):
        yield f.error("must be an inline object", line_of(("defaultTest",)), field="defaultTest")
    elif isinstance(default, dict):
        try:  # report a bad defaultTest once, not once per test (its rubric's vars come from each test)
            test_assertions({}, default, f.ctx(0, None), _AnyVars())
        except RecordErrors as exc:
            for path, message in exc.problems:
                yield f.error(message, line_of(path), field=".".join(map(str, path)))
            doc = {**doc, "defaultTest": {k: v for k, v in default.items() if k not in ("assert", "options")}}
    for i, test in enumerate(tests):
        base = ("tests", i)
        c = f.ctx(i, line_of(base), base, prefix=base, line_of=line_of, doc=doc)
        if isinstance(test, str):
            yield c.error((), f"external test references are not supported (got {test!r})")
            continue
        yield from convert(test, c, "promptfoo" if isinstance(test, dict) else None)


class _AnyVars(dict[str, Any]):
    """Variables that fill any placeholder: checks a template's other problems."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> str:
        return ""


def _yaml_lines(root: yaml.Node | None) -> Callable[[Path_], int | None]:
    def line_of(path: Path_) -> int | None:
        return None if root is None else yaml_safe.line_at(root, path) or root.start_mark.line + 1

    return line_of


def _iter_json_array(stream: JsonArray, f: _File) -> Iterator[LoadedConversation | InputError]:
    """The records of a ``.json`` list, decoded one by one (:class:`JsonArray`); a list of LangChain messages is one
    conversation (its messages kept until the list shows it is not one)."""
    messages: list[tuple[int, Any]] = []  # (line, value) while every element is a LangChain message
    all_messages = True

    def ctx(i: int, line: int, base: Path_) -> Ctx:
        return f.ctx(i, line, base, line_of=lambda _path: line)

    try:
        for el in stream:
            if el.problem is not None:
                message = {"deep": _too_deep(f.opts.limits), "invalid": "invalid JSON: a number too long to read"}.get(
                    el.problem, _too_big(f.opts.limits, "record's text"))
                yield f.error(message, el.line, el.index)
                all_messages = False
            elif all_messages and is_langchain_message(el.value):
                messages.append((el.line, el.value))
                continue
            else:
                all_messages = False
            for i, (line, value) in enumerate(messages):  # not a message list after all: they were records
                yield from convert(value, ctx(i, line, (i,)))
            messages = []
            if el.problem is None:
                yield from convert(el.value, ctx(el.index, el.line, (el.index,)))
    except JsonSyntaxError as exc:  # the records before it are loaded; the rest cannot be found
        yield f.error(f"invalid JSON: {exc}", exc.line)
        return
    except NotUtf8 as exc:
        yield f.error("not valid UTF-8: the rest of the file is not read", exc.line)
        return
    if messages:  # every element a LangChain message: one conversation
        first = messages[0][0]
        yield from convert({"messages": [v for _, v in messages]}, ctx(0, first, ()), "langchain")


def _json_lines(text: str, value: object) -> Callable[[Path_], int | None]:
    """The line of each top-level key of a parsed .json object and of each record of its ``tests`` or
    ``conversations`` list (records only, not fields: a list is streamed, never parsed whole)."""
    newlines = [m.start() for m in re.finditer("\n", text)]
    dec = json.JSONDecoder()
    starts: dict[Path_, int] = {(): WHITESPACE.match(text).end()}  # type: ignore[union-attr]

    def scan(i: int, prefix: Path_, keyed: bool) -> None:  # where each member of the object or list at i starts
        i, n = WHITESPACE.match(text, i + 1).end(), 0  # type: ignore[union-attr]
        while text[i] not in "]}":
            name: str | int = n
            if keyed:
                name, i = dec.raw_decode(text, i)
                i = WHITESPACE.match(text, WHITESPACE.match(text, i).end() + 1).end()  # type: ignore[union-attr]  # past ':'
            starts[prefix + (name,)] = i
            _, i = dec.raw_decode(text, i)
            i = WHITESPACE.match(text, i).end()  # type: ignore[union-attr]
            if text[i] == ",":
                i = WHITESPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            n += 1

    key = next((k for k in ("tests", "conversations") if isinstance(value.get(k), list)),
               None) if isinstance(value, dict) else None
    if key is not None:
        with suppress(ValueError, IndexError, KeyError):
            scan(starts[()], (), True)
            scan(starts[(key,)], (key,), False)

    def line_of(path: Path_) -> int | None:
        for cut in range(len(path), -1, -1):
            if path[:cut] in starts:
                return bisect.bisect_left(newlines, starts[path[:cut]]) + 1
        return None

    return line_of
