"""MLflow sessions in, assessments out, end to end on this machine.

    pip install -e ".[mlflow]"
    python examples/mlflow_roundtrip.py                 # offline judge: no key, no LLM
    python examples/mlflow_roundtrip.py --keep          # leave the server running to browse the UI

1. starts `mlflow server` on 127.0.0.1 with a SQLite store in a temporary folder
   (telemetry off, no job runner);
2. logs three chat sessions of traces with MLflow's tracing API: a support bot
   traced with @mlflow.trace (one reply is off-topic), an OpenAI-style chat whose
   every request carries the whole message history, and a trace with no session;
3. reads them back as conversations (judgegraph.integrations.mlflow.load_sessions),
   judges turn relevancy, writes the results back as MLflow assessments
   (log_assessments), and prints the assessments as MLflow's own client reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
os.environ.update(QUIET)  # before mlflow is imported: nothing is sent anywhere
SESSION = "mlflow.trace.session"


def start_server(folder: Path, port: int) -> tuple[subprocess.Popen, str, float]:
    uri = f"http://127.0.0.1:{port}"
    env = {**os.environ, **QUIET, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
         "--default-artifact-root", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=(folder / "server.log").open("wb"), stderr=subprocess.STDOUT, env=env, cwd=folder,
        start_new_session=True,
    )
    while True:
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2):
                return proc, uri, time.monotonic() - started
        except OSError:
            if proc.poll() is not None or time.monotonic() - started > 180:
                sys.exit("mlflow server did not start:\n" + (folder / "server.log").read_text()[-3000:])
            time.sleep(0.1)


def stop_server(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def log_sessions(uri: str, experiment: str) -> None:
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment)

    answers = {
        "Can I return my running shoes?": "Yes: unworn shoes can be returned within 30 days for a full refund.",
        "Do you ship to Canada?": "Our running shoes come in sizes 36 to 47.",  # off-topic
        "How long does delivery to Toronto take?": "Delivery to Toronto takes 5 to 7 business days.",
    }

    @mlflow.trace
    def support_bot(question: str, session_id: str) -> str:
        mlflow.update_current_trace(metadata={SESSION: session_id})
        return answers[question]

    for question in answers:
        support_bot(question, "shoe-shop-42")

    # every request carries the whole history; judgegraph adds only what is new
    @mlflow.trace(name="chat")
    def tutor(messages: list[dict]) -> dict:
        mlflow.update_current_trace(metadata={SESSION: "maths-7"})
        replies = {"What is 2+2?": "2+2 equals 4.", "And 3+3?": "3+3 equals 6.",
                   "Why is the sky blue?": "Because of Rayleigh scattering of sunlight."}
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": replies[messages[-1]["content"]]}}]}

    history = [{"role": "system", "content": "You are a friendly tutor."}]
    for question in ("What is 2+2?", "And 3+3?", "Why is the sky blue?"):
        history.append({"role": "user", "content": question})
        reply = tutor(list(history))["choices"][0]["message"]
        history.append({"role": reply["role"], "content": reply["content"]})

    @mlflow.trace
    def one_off(prompt: str) -> str:  # no session: judged as a conversation of its own
        return "Paris is the capital of France."

    one_off("What is the capital of France?")
    mlflow.flush_trace_async_logging()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="LLM judge, e.g. openai:gpt-4.1-mini (default: the offline judge)")
    ap.add_argument("--keep", action="store_true", help="keep the server running (Ctrl-C to stop)")
    args = ap.parse_args()

    from judgegraph.integrations.mlflow import load_sessions, log_assessments
    from judgegraph.judges import resolve_judge
    from judgegraph.runs.runner import MetricPlan, evaluate_async

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = Path(tempfile.mkdtemp(prefix="judgegraph-mlflow-"))
    proc, uri, startup = start_server(folder, port)
    print(f"mlflow server at {uri} (SQLite in {folder}), up in {startup:.1f} s")
    try:
        experiment = "judgegraph-roundtrip"
        log_sessions(uri, experiment)

        started = time.monotonic()
        sessions = load_sessions(uri, experiment)
        for e in sessions.errors:
            print(f"input error: {e}")
        judge = resolve_judge(model=args.model)
        summary = asyncio.run(evaluate_async(sessions, MetricPlan(["turn-relevancy"], judge)))
        log = log_assessments(uri, summary, sessions)
        elapsed = time.monotonic() - started
        print(f"{len(sessions)} sessions from {sessions.traces} traces judged by {judge.name}; {log}; "
              f"read + judge + write: {elapsed:.1f} s\n")

        from mlflow import MlflowClient

        client = MlflowClient(uri)
        for item in sessions:
            conv = item.conversation
            print(f"== {item.source}")
            for i, turn in enumerate(conv.turns):
                print(f"   {i + 1}. {turn.role:9} {turn.content[:70]}")
            for trace_id in conv.metadata["mlflow_trace_ids"]:
                for a in client.get_trace(trace_id).info.assessments:
                    value = (f"error {a.error.error_code}" if a.error else f"{a.value:.2f}" if isinstance(a.value, float)
                             else repr(a.value))
                    print(f"   {trace_id[:14]}…  {a.name:22} {value:8} [{a.source.source_type} {a.source.source_id}]"
                          f"  {(a.rationale or '')[:90]}")
            print()
        if args.keep:
            print(f"browse {uri} (experiment {experiment!r}, Sessions tab); Ctrl-C to stop")
            try:
                proc.wait()
            except KeyboardInterrupt:
                pass
        return summary.exit_code
    finally:
        stop_server(proc)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
