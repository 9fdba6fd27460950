"""A real local Ray cluster on 127.0.0.1 (``ray start --head``, 2 CPUs): an
evaluation through ``judgegraph eval --ray ADDRESS`` against the loopback
OpenAI server writes the results a local run writes. Skipped only when Ray is
not installed (``pip install 'judgegraph[ray]'``)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

from judgegraph.cli import main
from tests.kit.openai_server import FakeOpenAIServer, structured

pytestmark = [pytest.mark.integration, pytest.mark.ray,
              pytest.mark.skipif(find_spec("ray") is None, reason="ray not installed: pip install 'judgegraph[ray]'")]

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """``ray start --head --block`` in its own process group; stopped (the whole
    group: GCS, raylet, workers) in teardown whatever happened. One cluster for
    the file's tests, as a user's cluster serves run after run: starting one is
    most of a test's time, and each run brings its own actors (the CLI's end with
    its process; a RayPool kills its own, and a test its stopped victim)."""
    port = free_port()
    temp = tempfile.mkdtemp(prefix="jgray", dir="/tmp")  # short: Ray's unix sockets live under it
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"
    log = open(Path(temp) / "head.log", "w")  # closed in teardown
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", "--num-cpus", "2", "--node-ip-address", "127.0.0.1",
         "--port", str(port), "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", temp],
        env={**os.environ, **RAY_ENV}, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert head.poll() is None, f"ray start exited: {(Path(temp) / 'head.log').read_text()[-2000:]}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Ray head did not come up in 60 s"
                time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(5)  # past that Ray would drain for 30 s more: nothing is left to drain
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(10)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def responder(request):
    target = request.text.split("<reply_to_judge>")[-1]
    verdict = "no" if "OFFTOPIC" in target else "yes"
    return structured({"reason": f"the reply gets verdict {verdict}", "verdict": verdict})


def chats(n: int) -> str:
    lines = []
    for c in range(n):
        turns = []
        for e in range(3):
            turns += [{"role": "user", "content": f"Chat {c}: where is parcel {c}-{e}?"},
                      {"role": "assistant", "content": "OFFTOPIC tulips." if (c + e) % 3 == 0
                       else f"Parcel {c}-{e} is on its way."}]
        lines.append(json.dumps({"id": f"ray-{c}", "turns": turns}))
    return "\n".join(lines) + "\n"


def untimed(obj):
    """A results record without the transcripts' latencies (they differ from run to run; nothing else may)."""
    if isinstance(obj, dict):
        return {k: untimed(v) for k, v in obj.items() if k != "latency_s"}
    if isinstance(obj, list):
        return [untimed(v) for v in obj]
    return obj


def rows(path: Path) -> dict:
    return {r["conversation_id"]: untimed(r) for r in map(json.loads, path.read_text().splitlines())
            if r["type"] == "conversation"}


def test_ray_cluster_run_writes_the_results_of_a_local_run(tmp_path, ray_cluster):
    data = tmp_path / "chats.jsonl"
    data.write_text(chats(8))
    local, on_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    with FakeOpenAIServer(responder) as server:
        common = ["eval", str(data), "--model", "gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "4",
                  "--no-progress", "-q", "--no-cache"]  # both runs ask every window
        local_code = main([*common, "--workers", "1", "--out", str(local)])
        local_calls = server.calls["/v1/chat/completions"]
        done = subprocess.run(
            [sys.executable, "-m", "judgegraph.cli", *common, "--ray", ray_cluster, "--workers", "2",
             "--out", str(on_ray)],
            env={**os.environ, **RAY_ENV}, capture_output=True, text=True, timeout=240, check=False,
        )
        ray_calls = server.calls["/v1/chat/completions"] - local_calls
    assert done.returncode == local_code, done.stderr[-3000:]
    assert rows(on_ray) == rows(local) and len(rows(local)) == 8
    assert ray_calls == local_calls == 8 * 3  # every window judged once, on the cluster's actors
    assert "8 conversations" in done.stdout
    kinds = [json.loads(line)["type"] for line in on_ray.read_text().splitlines()]
    assert kinds == ["header", *["conversation"] * 8, "summary"]  # the parent writes every line, the header once


def test_an_unreachable_cluster_is_a_clear_error_at_once(tmp_path, capsys):
    port = free_port()  # nothing listens there
    started = time.monotonic()
    code = main(["eval", str(Path(__file__).parents[2] / "examples" / "support_chats.jsonl"), "--ray",
                 f"127.0.0.1:{port}", "--out", str(tmp_path / "r.jsonl"), "--no-progress"])
    assert code == 3 and f"no Ray cluster answers at 127.0.0.1:{port}" in capsys.readouterr().err
    assert time.monotonic() - started < 60  # not ray.init's minutes of retries


def run_on_two_actors(address: str, monkeypatch, signum: int, **pool_options):
    """40 conversations on 2 actors; ``signum`` is sent to the first actor's
    process once it has conversations in flight. (The summary, the number of actors replaced, the lines written.)"""
    import asyncio
    import threading

    from judgegraph.runs.runner import evaluate_to_file, iter_inputs
    from judgegraph.scale import PlanSpec, RayPool

    for key, value in RAY_ENV.items():
        monkeypatch.setenv(key, value)
    data = Path(tempfile.mkdtemp(prefix="jgraydata")) / "chats.jsonl"
    data.write_text(chats(40))
    out = data.with_name("results.jsonl")
    items = list(iter_inputs([str(data)]))
    started = threading.Event()

    def slow(request):
        started.set()
        time.sleep(0.1)
        return responder(request)

    with FakeOpenAIServer(slow) as server:
        spec = PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": server.base_url,
                                             "max_concurrency": 8, "cache": False})

        async def run():
            async with RayPool(spec, address=address, workers=2, **pool_options) as pool:
                victim = int(pool.where[0].rpartition(":")[2])
                try:
                    async def signal_soon():
                        while not (started.is_set() and pool.in_flight[0]):
                            await asyncio.sleep(0.05)
                        os.kill(victim, signum)  # the actor's process, conversations in flight on it

                    sender = asyncio.create_task(signal_soon())
                    summary = await asyncio.wait_for(evaluate_to_file(
                        items, spec.build(), out, judge_one=pool.judge, max_conversations=8), 240)
                    await sender
                    return summary, getattr(pool, "replaced", None)  # (the old pool had no count)
                finally:
                    try:
                        os.kill(victim, signal.SIGKILL)  # a stopped actor left behind by a failing test
                    except ProcessLookupError:
                        pass

        summary, replaced = asyncio.run(run())
    return summary, replaced, [r for line in out.read_text().splitlines() if (r := json.loads(line))["type"] == "conversation"]


def test_an_actor_killed_mid_run_is_replaced_and_no_conversation_fails(ray_cluster, monkeypatch):
    """The old pool kept the dead actor and picked it first: 28 of 40 conversations failed (ActorDiedError)."""
    summary, replaced, lines = run_on_two_actors(ray_cluster, monkeypatch, signal.SIGKILL)
    assert sorted(r["conversation_id"] for r in lines) == sorted(f"ray-{c}" for c in range(40))  # all written
    assert not [r["error"] for r in lines if r.get("error")] and all(r["results"] for r in lines)  # none failed
    assert summary.failed_runs == 0 and replaced == 1


def test_a_stopped_actor_is_killed_as_silent_and_the_run_finishes(ray_cluster, monkeypatch):
    summary, replaced, lines = run_on_two_actors(ray_cluster, monkeypatch, signal.SIGSTOP, silent_after=5.0)
    assert sorted(r["conversation_id"] for r in lines) == sorted(f"ray-{c}" for c in range(40))
    assert not [r["error"] for r in lines if r.get("error")] and all(r["results"] for r in lines)
    assert summary.failed_runs == 0 and replaced == 1
