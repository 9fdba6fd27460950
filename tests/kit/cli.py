"""``python -m judgegraph.cli ARGS`` for the tests, without paying its imports on every start.

Most integration tests run the CLI as a separate process (its exit status, its output, its files, a signal or a
kill -9 in the middle of a run). A fresh interpreter spends 1.5–3 s of CPU importing langgraph, langchain, openai
and the package before it reads its first argument; a test file starting forty of them spends minutes on imports.

Here one *zygote* per environment (a plain ``python`` started once per test process, with the ``PYTHON*``,
locale and library start-up variables of the environment asked for) imports the CLI and its heavy modules, then
stays single-threaded and forks a child per run. The child becomes what ``python -m judgegraph.cli ARGS`` would
be: its own pid, ``os.environ`` replaced by ``env``, ``cwd`` (also ``sys.path[0]``), stdin/stdout/stderr on files
(fds 0/1/2 and new ``sys`` streams), ``sys.argv``; it runs the package's ``__main__`` with :mod:`runpy` as ``-m``
does, then shuts down as the interpreter does (non-daemon threads joined, ``atexit`` handlers run, streams
flushed) and exits with the CLI's status (``sys.exit``'s code; an uncaught exception: its traceback on stderr and
status 1; an uncaught KeyboardInterrupt: killed by SIGINT). Signals reach the child itself, so SIGTERM, SIGINT
and SIGKILL behave as for a real process.

``run(args, env=, cwd=, input=, timeout=)`` returns a :class:`subprocess.CompletedProcess` (text by default);
with ``code=``, the child runs ``python -c CODE ARGS`` instead (a documented Python block, say), in a new ``__main__``;
``start(...)`` returns a :class:`Started`, Popen-like (``pid``, ``poll``, ``wait``, ``communicate``,
``send_signal``, ``terminate``, ``kill``, ``returncode``, ``stdout``/``stderr`` as text so far).

``python=`` runs them with another interpreter (a virtual environment's ``bin/python``: plugins installed into it),
from a zygote of its own.

Keep a real ``subprocess`` start where the start itself is under test: the console script, what a fresh
interpreter imports (tests/unit/test_cli_startup.py, tests/unit/test_imports.py), an interpreter without this
package's dependencies (pip, packaging).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ARGV0", "Started", "run", "start"]

# What ``CompletedProcess.args`` shows: the command a real start would be.
ARGV0 = [sys.executable, "-m", "judgegraph.cli"]

# Imported once by each zygote: what `judgegraph eval/watch/...` imports on a typical run (measured with
# sys.modules at exit). A module the CLI would not import on some command is harmless here: a fresh process
# would import it later in the run, with the same result.
PRELOAD = (
    "judgegraph.cli", "judgegraph.cli.common", "judgegraph.cli.eval", "judgegraph.cli.watch", "judgegraph.cli.show",
    "judgegraph.cli.pairwise", "judgegraph.cli.diff", "judgegraph.cli.agree", "judgegraph.cli.rejudge",
    "judgegraph.cli.report", "judgegraph.cli.cache", "judgegraph.runs.runner", "judgegraph.runs.read",
    "judgegraph.metrics", "judgegraph.judges.llm", "judgegraph.judges.cache", "judgegraph.judges.jury",
    "judgegraph.providers.openai", "judgegraph.providers.anthropic", "judgegraph.loaders",
    "judgegraph.loaders.langgraph_threads", "judgegraph.report", "judgegraph.scale.run", "judgegraph.embeddings",
    "langchain_openai", "openai", "langgraph.graph", "langgraph.checkpoint.sqlite", "langgraph_sdk", "rich.console",
    "yaml", "numpy",
)

# Read by the interpreter or by a library at import time: a zygote serves only environments that agree with its
# own on these (anything else is read by the CLI when it runs, from the child's os.environ).
_STARTUP_PREFIXES = ("PYTHON", "LC_", "HF_", "OMP_", "OPENBLAS_", "MKL_", "TOKENIZERS_")
_STARTUP_NAMES = ("LANG", "LANGUAGE")


def _startup(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(_STARTUP_PREFIXES) or k in _STARTUP_NAMES))


class _Zygote:
    def __init__(self, python: str, startup: tuple[tuple[str, str], ...]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen([python, __file__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                         env=dict(startup), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.control = ours
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, request: dict[str, Any], fds: Sequence[int]) -> tuple[int, socket.socket]:
        """Ask for a child running ``request`` with ``fds`` as its stdin, stdout, stderr: its pid and the socket
        its exit status arrives on."""
        reply, theirs = socket.socketpair()
        with theirs, self.lock:
            socket.send_fds(self.control, [json.dumps(request).encode()], [theirs.fileno(), *fds])
        pid = struct.unpack("!q", _recv_exactly(reply, 8))[0]
        return pid, reply

    def close(self) -> None:
        self.control.close()  # the zygote kills what it still runs and exits
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_zygotes: dict[tuple[str, tuple[tuple[str, str], ...]], _Zygote] = {}
_zygotes_lock = threading.Lock()


@atexit.register
def _close_zygotes() -> None:
    for zygote in _zygotes.values():
        zygote.close()


def _zygote_for(python: str, env: Mapping[str, str]) -> _Zygote:
    key = (python, _startup(env))
    with _zygotes_lock:
        zygote = _zygotes.get(key)
        if zygote is None or not zygote.alive():
            zygote = _zygotes[key] = _Zygote(*key)
        return zygote


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise RuntimeError("the CLI zygote exited (its traceback, if any, is on this process's stderr)")
        data += chunk
    return data


class Started:
    """A running ``judgegraph`` CLI (see :func:`start`): the parts of :class:`subprocess.Popen` the tests use."""

    def __init__(self, args: list[str], pid: int, reply: socket.socket, out: Any, err: Any, text: bool) -> None:
        self.args, self.pid, self._reply, self._out, self._err, self._text = args, pid, reply, out, err, text
        self.returncode: int | None = None
        self._status = b""

    def _read_status(self, timeout: float | None) -> int | None:
        self._reply.settimeout(timeout)
        try:
            while len(self._status) < 4:
                chunk = self._reply.recv(4 - len(self._status))
                if not chunk:
                    raise RuntimeError("the CLI zygote exited before reporting the child's status")
                self._status += chunk
        except (BlockingIOError, TimeoutError):
            return None
        self.returncode = struct.unpack("!i", self._status)[0]
        self._reply.close()
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode if self.returncode is not None else self._read_status(0)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self._read_status(timeout) is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        import signal

        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)

    def _output(self, f: Any) -> Any:
        f.seek(0)
        data = f.read()
        return data.decode("utf-8", "replace").replace("\r\n", "\n") if self._text else data

    @property
    def stdout(self) -> Any:
        """What the CLI wrote to stdout so far (all of it once it exited)."""
        return self._output(self._out)

    @property
    def stderr(self) -> Any:
        return self._output(self._err)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        self.wait(timeout)
        return self.stdout, self.stderr

    def __enter__(self) -> Started:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.poll() is None:
            self.kill()
            self.wait()


def start(args: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None,
          cwd: str | os.PathLike[str] | None = None, input: str | bytes | None = None, text: bool = True,
          code: str | None = None, python: str | os.PathLike[str] | None = None) -> Started:
    """Start ``python -m judgegraph.cli *args`` (forked from a zygote) and return at once; with ``code``,
    ``python -c CODE *args`` instead; ``python``: that interpreter's (this one's by default)."""
    argv = [os.fspath(a) for a in args]
    executable = sys.executable if python is None else os.fspath(python)
    env = dict(os.environ if env is None else env)
    stdin, out, err = (tempfile.TemporaryFile() for _ in range(3))
    with stdin:
        if input is not None:
            stdin.write(input.encode() if isinstance(input, str) else input)
            stdin.seek(0)
        request = {"argv": argv, "env": env, "cwd": os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
                   "code": code}
        pid, reply = _zygote_for(executable, env).fork(request, [stdin.fileno(), out.fileno(), err.fileno()])
    return Started([executable, *(ARGV0[1:] if code is None else ["-c", code]), *argv], pid, reply, out, err, text)


def run(args: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None, input: str | bytes | None = None, timeout: float | None = None,
        text: bool = True, code: str | None = None,
        python: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run([python, "-m", "judgegraph.cli", *args], capture_output=True, check=False, ...)``
    (with ``code``: ``[python, "-c", code, *args]``; ``python``: this interpreter by default): on a timeout the child
    is killed and :class:`subprocess.TimeoutExpired` raised, as ``subprocess.run`` does."""
    with start(args, env=env, cwd=cwd, input=input, text=text, code=code, python=python) as proc:
        try:
            stdout, stderr = proc.communicate(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    return subprocess.CompletedProcess(proc.args, proc.wait(), stdout, stderr)


# --- the zygote (this file run as a script: `python tests/kit/cli.py CONTROL_FD`) ---------------------------------


def _zygote(control_fd: int) -> None:
    import gc
    import importlib
    import select
    import signal

    control = socket.socket(fileno=control_fd)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional extra not installed: the child imports (and fails) as a real start would
            pass
    if threading.active_count() != 1:  # a fork copies only the forking thread
        print(f"tests/kit/cli.py: the zygote has threads after its imports: {threading.enumerate()}", file=sys.stderr)
    gc.collect()
    gc.freeze()  # the children's collections leave the shared pages alone
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C for the test run reaches the children, not the zygote
    running: dict[int, socket.socket] = {}
    try:
        while True:
            ready, _, _ = select.select([control.fileno(), wake_r], [], [])
            if wake_r in ready:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
            while running:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                reply = running.pop(pid)
                try:
                    reply.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
                except OSError:  # the test process went away
                    pass
                reply.close()
            if control.fileno() in ready:
                msg, fds, _, _ = socket.recv_fds(control, 1 << 22, 4)
                if not msg:
                    break  # the test process closed its end: it is done with us
                pid = os.fork()
                if pid == 0:
                    _child(json.loads(msg), fds, (control.fileno(), wake_r, wake_w,
                                                  *(r.fileno() for r in running.values())))  # not the others' sockets
                reply = socket.socket(fileno=fds[0])
                for fd in fds[1:]:
                    os.close(fd)
                reply.sendall(struct.pack("!q", pid))
                running[pid] = reply
    finally:
        for pid in running:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass


def _child(request: dict[str, Any], fds: list[int], close: tuple[int, ...]) -> None:
    """In the forked child: become ``python -m judgegraph.cli ARGV`` and exit with its status (never returns)."""
    status = 1
    try:
        import importlib
        import io
        import signal

        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in (*close, fds[0]):
            os.close(fd)
        for target, fd in enumerate(fds[1:]):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])

        def stream(fd: int, old: Any) -> io.TextIOWrapper:  # as the interpreter makes sys.std* at start-up
            raw = open(fd, "rb" if fd == 0 else "wb", closefd=False)
            return io.TextIOWrapper(raw, encoding=old.encoding, errors=old.errors, line_buffering=old.line_buffering,
                                    write_through=old.write_through)

        for fd, name in enumerate(("stdin", "stdout", "stderr")):  # sys.__stdout__ too: the process's own streams
            new = stream(fd, getattr(sys, f"__{name}__"))
            setattr(sys, name, new)
            setattr(sys, f"__{name}__", new)
        if request["code"] is None:
            sys.argv = ["-m", *request["argv"]]  # runpy sets argv[0] to the module's file, as -m does
            sys.orig_argv = [*ARGV0, *request["argv"]]
            sys.path[0] = request["cwd"]  # -m puts the working directory first
        else:
            sys.argv = ["-c", *request["argv"]]
            sys.orig_argv = [sys.executable, "-c", request["code"], *request["argv"]]
            sys.path[0] = ""  # -c: the working directory, as it is when imported from
        importlib.invalidate_caches()
        status = _run(request["code"])
    finally:
        os._exit(status)


def _run(code: str | None) -> int:
    import runpy
    import signal
    import types

    status, interrupted = 0, False
    try:
        if code is None:
            runpy.run_module("judgegraph.cli", run_name="__main__", alter_sys=True)
        else:  # as -c runs it: in a new __main__
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = __builtins__
            exec(compile(code, "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except KeyboardInterrupt as exc:
        _print_uncaught(exc)
        interrupted = True
    except BaseException as exc:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        _print_uncaught(exc)
        status = 1
    # The interpreter's shutdown: non-daemon threads (and executors) joined, then the atexit handlers, then flush.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            status = status or 120
    if interrupted:  # as Python does: die of the SIGINT, so the parent sees it
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status & 0xFF


def _print_uncaught(exc: BaseException) -> None:
    """The traceback the interpreter prints, from the code run on (this module's frame left out)."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


if __name__ == "__main__":
    _zygote(int(sys.argv[1]))
