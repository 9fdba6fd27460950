"""The results file's one writer, its resume scan, its ``--out`` checks and its lock (docs/runs.md)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .read import parse_line, read_lines
from .record import HeaderLine, InputErrorLine, elide_duplicates, filter_transcripts, restore_elided

if TYPE_CHECKING:
    from ..data.results import Usage
    from ..loaders import InputError
    from .runner import ConversationOutcome

TRANSCRIPT_MODES: tuple[str, ...] = ("full", "errors", "none")


class ResultsFileError(ValueError):
    """The results file cannot be used as asked (exists without resume, is an input, a directory...)."""


class ResultsWriter:
    """The one writer of results files: one JSON line per record, flushed at once. ``cost``: each conversation
    line's ``cost_usd``; ``errors``: how a lone surrogate is written (by default as the JSON escape ``\\udfff``,
    read back as the same string; ``surrogateescape``: a byte read that way goes back as it was)."""

    def __init__(self, path: str | Path, *, mode: str = "w", transcripts: str = "full",
                 skip_input_errors: set[tuple[object, ...]] | None = None,
                 cost: Callable[[Usage], float | None] | None = None, errors: str = "backslashreplace") -> None:
        if transcripts not in TRANSCRIPT_MODES:
            raise ValueError(f"transcripts must be one of {', '.join(TRANSCRIPT_MODES)}, got {transcripts!r}")
        self.path = Path(path)
        self.transcripts = transcripts
        self.cost = cost
        self._skip = skip_input_errors or set()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = self.path.open(mode, encoding="utf-8", errors=errors)
        self._failed = False

    def write(self, record: Mapping[str, Any]) -> None:
        self.copy(json.dumps(record, ensure_ascii=False))

    def copy(self, line: str) -> None:
        """``line`` (a JSON record's text) as a line of the file."""
        try:
            self._fh.write(line if line.endswith("\n") else line + "\n")
            self._fh.flush()
        except OSError as exc:  # a full disk, /dev/full: the lines written before stay
            self._failed = True
            exc.filename = exc.filename or str(self.path)
            raise

    def outcome(self, outcome: ConversationOutcome) -> None:
        record = {"type": "conversation", **outcome.to_json()}
        if self.cost is not None:
            record["cost_usd"] = self.cost(outcome.usage)
        self.write(elide_duplicates(filter_transcripts(record, self.transcripts)))

    def input_error(self, error: InputError) -> None:
        record = InputErrorLine(type="input_error", file=error.file, line=error.line, record=error.record,
                                field=error.field, message=error.message, error=str(error)).data()
        if input_error_key(record) not in self._skip:  # already in the resumed file
            self.write(record)

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:
            if not self._failed:  # else the write's own error is the one reported
                raise


def input_error_key(record: Mapping[str, object]) -> tuple[object, ...]:
    """What identifies an input error line (a resume writes each once)."""
    return (record.get("file"), record.get("line"), record.get("record"), record.get("field"), record.get("message"))


@dataclass
class ResumeState:
    """What an existing results file already holds (:func:`scan_results`)."""

    done: set[str] = field(default_factory=set)  # conversation ids complete in the file
    input_errors: set[tuple[object, ...]] = field(default_factory=set)
    torn: bool = False  # a partial last line (a kill mid-write) was cut off
    bad_lines: list[int] = field(default_factory=list)  # lines read_run leaves out (left in place, ignored)
    retried: int = 0  # conversation lines with errors taken out to be judged again (retry_errors)
    header: HeaderLine | None = None  # the file's run header (None: an older file, written without one)


def has_errors(record: dict[str, Any]) -> bool:
    """A conversation line whose run failed or that holds judge errors."""
    return bool(record.get("error")) or any(r.get("status") == "error" or r["errors"] for r in record["results"].values())


def scan_results(path: str | Path, on_record: Callable[[dict[str, Any]], None] | None = None,
                 *, repair: bool = True, retry_errors: bool = False) -> ResumeState:
    """Read a results file for a resume with :func:`~judgegraph.runs.read_run`'s line reader, leniently: a bad line
    to ``bad_lines`` (left in place), a torn last line cut off when ``repair``, each conversation to ``on_record``,
    a repeated id counted once; ``retry_errors`` takes errored conversation lines out (an atomic rewrite)."""
    state = ResumeState()
    p = Path(path)
    if not p.exists():
        return state
    good_end = 0
    drop: set[int] = set()  # lines a rewrite leaves out: those with errors, and repeated conversations
    for n, end, raw in read_lines(p):
        if not raw.endswith(b"\n"):
            state.torn = True
            break
        good_end = end
        if not raw.strip():
            continue
        if isinstance(record := parse_line(raw), str):
            state.bad_lines.append(n)
        elif record["type"] == "input_error":
            state.input_errors.add(input_error_key(record))
        elif record["type"] == "conversation":
            if record["conversation_id"] in state.done:
                drop.add(n)  # never counted twice, even in a file written by hand
            elif retry_errors and has_errors(record):
                state.retried += 1
                drop.add(n)
            else:
                state.done.add(record["conversation_id"])
                if on_record is not None:
                    on_record(restore_elided(record))
    if state.retried and repair:  # the file without the lines dropped (and a torn tail), moved into place
        tmp = p.with_name(p.name + ".resume-tmp")
        with tmp.open("wb") as dst:
            dst.writelines(line for i, at, line in read_lines(p) if at <= good_end and i not in drop)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, p)
    elif state.torn and repair:
        with p.open("r+b") as fh:
            fh.truncate(good_end)
    return state


def check_out_path(out: str | Path, inputs: list[str | Path], *, resume: bool | None = None,
                   overwrite: bool = False) -> None:
    """Refuse an ``--out`` that is a directory or an input and, when ``resume`` is given, a file holding results
    neither resumed nor overwritten."""
    p = Path(out)
    if p.is_dir():
        raise ResultsFileError(f"--out {out} is a directory; give a file path such as {p / 'results.jsonl'}")
    for inp in inputs:
        try:  # samefile: the same file under another name; a new --out: the same path
            same = os.path.samefile(p, inp) if p.exists() else Path(inp).resolve() == p.resolve()
        except OSError:
            same = False
        if same:
            raise ResultsFileError(f"--out {out} is one of the input files; writing results there would destroy it")
    if resume is False and not overwrite and is_nonempty(p):
        raise ResultsFileError(f"{out} already holds results: pass --resume to continue that run, or --overwrite to "
                               "replace it (or choose another --out)")


def check_writable(out: str | Path) -> None:
    """Open ``out`` for appending (creating it and its folder): :class:`ResultsFileError` when it cannot be written."""
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).open("a", encoding="utf-8").close()
    except OSError as exc:
        raise ResultsFileError(f"cannot write --out {out}: {exc.strerror or exc}") from None


def is_nonempty(path: str | Path) -> bool:
    p = Path(path)
    return p.is_file() and p.stat().st_size > 0


def cut_torn_tail(path: str | Path, chunk: int = 1 << 16) -> bool:
    """Cut a last line without its newline off the file at ``path`` (if any), reading only the file's end; True
    when there was one."""
    p = Path(path)
    if not p.exists():
        return False
    with p.open("r+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        pos = end
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            block = fh.read(pos - start)
            if pos == end and block.endswith(b"\n"):
                return False
            if (newline := block.rfind(b"\n")) >= 0:
                fh.truncate(start + newline + 1)
                return True
            pos = start
        if end:
            fh.truncate(0)  # one line, torn
        return end > 0


class ResultsFileLocked(ResultsFileError):
    """Another run holds the results file (see :func:`lock_results`)."""


class ResultsLock:
    """A ``flock`` on the sidecar ``RESULTS.lock`` (holding the pid) for a whole run: a sidecar, as a resume may
    replace the results file (a new inode). None on Windows."""

    def __init__(self, results: str | Path) -> None:
        self.results = Path(results)
        self.path = self.results.with_name(self.results.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> ResultsLock:
        try:
            import fcntl
        except ImportError:  # no advisory locks here
            return self
        for _ in range(10):  # the holder may remove the sidecar between our open and our lock: open it again
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = _read_pid(fd)
                os.close(fd)
                by = f" by process {holder}" if holder else ""
                raise ResultsFileLocked(
                    f"{self.results} is in use{by}: another run writes it (lock {self.path}); wait for it to end, "
                    "or choose another --out") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._fd = fd
                return self
            os.close(fd)
        raise ResultsFileLocked(f"{self.results}: could not take its lock {self.path}")

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # while still held: a run waiting on this inode then sees it is stale
        os.close(self._fd)  # releases the lock
        self._fd = None

    def __enter__(self) -> ResultsLock:
        return self if self._fd is not None else self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_results(path: str | Path) -> ResultsLock:
    """Lock ``path`` for this run, or raise :class:`ResultsFileLocked` naming the holder's pid."""
    return ResultsLock(path).acquire()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
