"""A real ``langgraph dev`` server on 127.0.0.1 serving given graphs (the Studio test's and the thread
tests'): started in its own process group, waited for (bounded), stopped with SIGTERM then SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT = 120.0  # seconds for the server to come up


class ServerFailed(RuntimeError):
    """The server exited or did not answer in time (the log's tail is in the message)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def langgraph_bin() -> str | None:
    """The ``langgraph`` CLI of this interpreter's environment, or on PATH, or None."""
    return shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which("langgraph")


@contextmanager
def langgraph_dev(graphs: dict[str, str], work: Path, dependencies: list[str]) -> Iterator[tuple[str, Path]]:
    """Serve ``graphs`` (name -> ``/abs/path.py:attr``) from ``work``; yields (URL, log path)."""
    binary = langgraph_bin()
    if binary is None:
        raise ServerFailed("the langgraph CLI is not installed (pip install 'judgegraph[studio]')")
    (work / "langgraph.json").write_text(json.dumps({"dependencies": dependencies, "graphs": graphs}),
                                         encoding="utf-8")
    port = free_port()
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false",
           "LANGCHAIN_TRACING_V2": "false", "LANGSMITH_API_KEY": "", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("JUDGEGRAPH_MODEL", None)
    env.pop("OPENAI_API_KEY", None)
    log_path = work / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [binary, "dev", "--config", str(work / "langgraph.json"), "--host", "127.0.0.1", "--port", str(port),
             "--no-browser", "--no-reload"],
            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                if proc.poll() is not None:
                    raise ServerFailed(f"langgraph dev exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/ok", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerFailed(f"langgraph dev did not start in {START_TIMEOUT}s:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.5)
            yield url, log_path
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
