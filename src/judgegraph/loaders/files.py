"""Reading files: ``.jsonl`` line by line, ``.json``/``.yaml`` documents (one
record, a list, ``{"conversations": [...]}`` or a promptfoo document), with the
line of every record and field for error messages."""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from judgegraph.conversation import Conversation

from . import yaml_safe
from .base import Ctx, InputError, LoadedConversation, LoadResult, Path_, RecordErrors
from .detect import convert
from .formats.langchain import is_langchain_message
from .formats.promptfoo import level_assertions
from .jsonstream import JsonArray, JsonSyntaxError, NotUtf8
from .limits import CHUNK_BYTES, Limits, Refused, TooLong, check_record, read_lines

EXTENSIONS: dict[str, str] = {".jsonl": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}


@dataclass(frozen=True)
class _Options:
    limits: Limits
    allow_outside_files: bool
    problem: str | None = None  # a bad setting (environment variable): every file reports it, none is read
    stem: str | None = None  # what a record without an id is named after (default: the file's stem)


def _stem(p: Path, opts: _Options) -> str:
    return opts.stem or p.stem


def id_stems(paths: Iterable[str | Path]) -> dict[str, str]:
    """What the generated ids of each input file start with (``STEM:LINE`` or
    ``STEM#RECORD`` for a record without an id), for files read together.

    A file's stem (its name without the extension), unless another input of the
    same run has the same stem: then the path relative to the common folder of
    those files, without the extension (``a/chats`` and ``b/chats``), or with it
    when that still collides (``chats.json`` and ``chats.jsonl``). The same
    inputs give the same ids on every run (``--resume`` finds them); the same
    file given twice keeps one stem (its records are duplicates)."""
    files: dict[str, str] = {}  # the path as given -> its absolute path
    for path in paths:
        files.setdefault(str(path), os.path.abspath(path))
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
        allow_outside_files = os.environ.get("JUDGEGRAPH_ALLOW_OUTSIDE_FILES", "").strip().lower() in (
            "1", "true", "yes")
    if limits is None:
        try:
            limits = Limits.from_env()
        except ValueError as exc:
            return _Options(Limits(), allow_outside_files, str(exc))
    return _Options(limits, allow_outside_files)


def iter_records(path: str | Path, *, limits: Limits | None = None, allow_outside_files: bool | None = None,
                 id_stem: str | None = None) -> Iterator[LoadedConversation | InputError]:
    """Yield every conversation of one file, or an :class:`InputError` per problem.

    Lazy: a ``.jsonl`` file is read one line at a time. Duplicate conversation ids
    inside the file are reported (the later ones). ``limits`` caps record size and
    nesting (default :meth:`Limits.from_env`); ``allow_outside_files`` lets a
    promptfoo ``file://`` reference leave the config file's folder (default: the
    ``JUDGEGRAPH_ALLOW_OUTSIDE_FILES`` environment variable, else no).
    ``id_stem`` names the records without an id (default the file's stem; files
    read together take theirs from :func:`id_stems`).
    """
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


# --------------------------------------------------------------------------- format detection


def _iter_file(path: str | Path, seen: dict[str, str], opts: _Options) -> Iterator[LoadedConversation | InputError]:
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
    if opts.problem:
        yield InputError(name, None, None, None, opts.problem)
        return
    reader = _iter_jsonl if kind == "jsonl" else _iter_document
    found = 0
    try:
        for item in reader(p, name, kind, opts):
            found += 1
            if isinstance(item, LoadedConversation):
                cid = item.conversation.id
                if cid in seen:
                    yield _duplicate(item, cid, seen[cid], name)
                    continue
                seen[cid] = item.source
            yield item
    except OSError as exc:
        found += 1
        yield InputError(name, None, None, None, f"cannot read file: {exc.strerror or exc}")
    if not found:  # an empty file must never pass a gate as "nothing failed"
        yield InputError(name, None, None, None, "file is empty: no records")


def _duplicate(item: LoadedConversation, cid: str, first: str, name: str) -> InputError:
    src = item.source[len(name):]
    line = int(src[1:]) if src.startswith(":") and src[1:].isdigit() else None
    record = int(src[1:]) if src.startswith("#") and src[1:].isdigit() else None
    return InputError(name, line, record, "id", f"duplicate conversation id {cid!r} (first seen at {first})")


def _iter_jsonl(p: Path, name: str, kind: str, opts: _Options) -> Iterator[LoadedConversation | InputError]:
    record = 0
    with p.open("rb") as fh:
        for lineno, raw in read_lines(fh, opts.limits.max_record_chars):  # a line over the limit is never held
            if isinstance(raw, TooLong):
                yield InputError(name, lineno, record, None, (
                    f"the line holds more than the limit of {raw.max_chars:,} characters: refused unread; "
                    "raise JUDGEGRAPH_MAX_RECORD_CHARS if it is genuine"))
                record += 1
                continue
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
            ctx = Ctx(name, _stem(p, opts), kind, record, lineno, (), limits=opts.limits, folder=p.parent,
                      allow_outside_files=opts.allow_outside_files)
            record += 1
            if len(stripped) > opts.limits.max_record_chars:
                yield InputError(name, lineno, ctx.record, None, _too_big(len(stripped), opts.limits))
                continue
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError as exc:
                col = exc.colno + (len(text) - len(text.lstrip()))
                yield InputError(name, lineno, ctx.record, None, f"invalid JSON: {exc.msg} (column {col})")
                continue
            except RecursionError:
                yield InputError(name, lineno, ctx.record, None, _too_deep(opts.limits))
                continue
            yield from convert(value, ctx)


def _decode(data: bytes, name: str) -> str | InputError:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return InputError(name, line, None, None, f"not valid UTF-8 (byte offset {exc.start})")


def _head(fh: BinaryIO) -> bytes:
    """The first bytes of a file, up to its first character that is not white
    space (or a byte-order mark): enough to tell a list from anything else."""
    head = b""
    while not head.lstrip(b" \t\r\n\xef\xbb\xbf"):
        data = fh.read1(CHUNK_BYTES) if hasattr(fh, "read1") else fh.read(CHUNK_BYTES)
        if not data:
            break
        head += data
    return head


def _too_big(chars: int, limits: Limits) -> str:
    return (f"the record holds {chars:,} characters, more than the limit of {limits.max_record_chars:,}: refused; "
            "raise JUDGEGRAPH_MAX_RECORD_CHARS if it is genuine")


def _too_deep(limits: Limits) -> str:
    return f"nested too deeply (the limit is {limits.max_depth} levels): refused"


def _iter_document(p: Path, name: str, kind: str, opts: _Options) -> Iterator[LoadedConversation | InputError]:
    with p.open("rb") as fh:
        head = _head(fh) if kind == "json" else b""
        if head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"["):  # a list: read one record at a time
            yield from _iter_json_array(JsonArray(fh, opts.limits.max_record_chars, head=head), p, name, opts)
            return
        text = _decode(head + fh.read(), name)
    if isinstance(text, InputError):
        yield text
        return
    if not text.strip():
        return  # reported as an empty file
    if kind == "json":
        try:
            value = json.loads(text)
        except RecursionError:
            yield InputError(name, 1, None, None, _too_deep(opts.limits))
            return
        except json.JSONDecodeError as exc:
            yield InputError(name, exc.lineno, None, None, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")
            return
        line_of = _json_lines(text, value)
    else:
        try:
            node = yaml_safe.compose(text, opts.limits)
            value = yaml_safe.construct(node) if node is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = " ".join(str(x) for x in (exc.context, exc.problem) if x)
            yield InputError(name, mark.line + 1 if mark else None, None, None, f"invalid YAML: {problem}{where}")
            return
        except yaml.YAMLError as exc:
            yield InputError(name, None, None, None, f"invalid YAML: {exc}")
            return
        line_of = _yaml_lines(node)
    yield from _iter_value(value, p, name, kind, line_of, opts)


def _iter_value(value: object, p: Path, name: str, kind: str, line_of: Callable[[Path_], int | None],
                opts: _Options) -> Iterator[LoadedConversation | InputError]:
    def ctx(record: int, base: Path_, **kw: Any) -> Ctx:
        return Ctx(name, _stem(p, opts), kind, record, line_of(base), base, line_of=line_of, limits=opts.limits,
                   folder=p.parent, allow_outside_files=opts.allow_outside_files, **kw)

    if value is None:
        yield InputError(name, None, None, None, "file is empty")
        return
    if isinstance(value, Refused):
        yield InputError(name, 1, None, None, value.message)
        return
    if isinstance(value, list) and value and all(is_langchain_message(m) for m in value):
        # a file that is one LangChain message list (json.dump(messages_to_dict(messages)))
        yield from convert({"messages": value}, ctx(0, ()), "langchain")
        return
    if isinstance(value, list):
        for i, rec in enumerate(value):
            yield from convert(rec, ctx(i, (i,)))
        return
    if not isinstance(value, dict):
        yield InputError(name, 1, None, None, (
            f"expected a record, a list of records or a promptfoo document (got {type(value).__name__})"
        ))
        return
    if "tests" in value and "turns" not in value and "messages" not in value:
        yield from _iter_promptfoo_doc(value, p, name, kind, line_of, opts)
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
            yield from convert(rec, ctx(i, ("conversations", i)))
        return
    yield from convert(value, ctx(0, ()))


def _iter_promptfoo_doc(doc: dict[str, Any], p: Path, name: str, kind: str, line_of: Callable[[Path_], int | None],
                        opts: _Options) -> Iterator[LoadedConversation | InputError]:
    unsafe = check_record({k: v for k, v in doc.items() if k != "tests"}, opts.limits)
    if unsafe:  # prompts / defaultTest are part of every test
        for path, message in unsafe:
            yield InputError(name, line_of(path), None, ".".join(map(str, path)) or None, message)
        return
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
        try:  # report a bad defaultTest once, not once per test (its rubric's vars come from each test)
            check = Ctx(name, _stem(p, opts), kind, 0, None, (), limits=opts.limits, folder=p.parent,
                        allow_outside_files=opts.allow_outside_files)
            level_assertions(default, ("defaultTest",), check, _AnyVars())
        except RecordErrors as exc:
            for path, message in exc.problems:
                yield InputError(name, line_of(path), None, ".".join(map(str, path)), message)
            doc = {**doc, "defaultTest": {k: v for k, v in default.items() if k not in ("assert", "options")}}
    for i, test in enumerate(tests):
        base = ("tests", i)
        c = Ctx(name, _stem(p, opts), kind, i, line_of(base), base, prefix=base, line_of=line_of, doc=doc,
                limits=opts.limits, folder=p.parent, allow_outside_files=opts.allow_outside_files)
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


def _iter_json_array(stream: JsonArray, p: Path, name: str,
                     opts: _Options) -> Iterator[LoadedConversation | InputError]:
    """The records of a ``.json`` list, decoded one by one as the file is read
    (:class:`JsonArray`): memory holds one record, never the file. A file that
    is one LangChain message list is one conversation (its messages are kept
    until the list shows it is not one)."""
    messages: list[tuple[int, Any]] = []  # (line, value) while every element is a LangChain message
    all_messages = True

    def ctx(i: int, line: int, base: Path_) -> Ctx:
        return Ctx(name, _stem(p, opts), "json", i, line, base, line_of=lambda _path: line, limits=opts.limits,
                   folder=p.parent, allow_outside_files=opts.allow_outside_files)

    try:
        for el in stream:
            if el.problem is not None:
                message = {"deep": _too_deep(opts.limits), "invalid": "invalid JSON: a number too long to read"}.get(
                    el.problem, f"the record's text holds more than the limit of {opts.limits.max_record_chars:,} "
                                "characters: refused unread; raise JUDGEGRAPH_MAX_RECORD_CHARS if it is genuine")
                yield InputError(name, el.line, el.index, None, message)
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
        yield InputError(name, exc.line, None, None, f"invalid JSON: {exc}")
        return
    except NotUtf8 as exc:
        yield InputError(name, exc.line, None, None, "not valid UTF-8: the rest of the file is not read")
        return
    if messages:  # every element a LangChain message: one conversation
        first = messages[0][0]
        yield from convert({"messages": [v for _, v in messages]}, ctx(0, first, ()), "langchain")


def _json_lines(text: str, value: object) -> Callable[[Path_], int | None]:
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
