"""Worker processes against the loopback OpenAI server: the same results as
one process, one global bound on calls in flight, a lost worker costs only
its own conversations, and the CLI's --workers writes one results file."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from judgegraph.cli import main
from judgegraph.data.conversation import Conversation
from judgegraph.loaders import LoadedConversation
from judgegraph.runs.runner import evaluate_async, evaluate_to_file
from judgegraph.scale import PlanSpec, WorkerPool, evaluate
from tests.kit.openai_server import FakeOpenAIServer, structured

pytestmark = pytest.mark.integration


def conversations(n: int, exchanges: int = 3) -> list[LoadedConversation]:
    out = []
    for c in range(n):
        turns = []
        for e in range(exchanges):
            turns.append({"role": "user", "content": f"Chat {c}: how do I track parcel {c}-{e}?"})
            off = (c + e) % 4 == 1
            turns.append({"role": "assistant", "content": "OFFTOPIC tulips are nice." if off
                          else f"Parcel {c}-{e} can be tracked on the orders page."})
        out.append(LoadedConversation(Conversation(id=f"c{c}", turns=turns), f"test#{c}", "judgegraph", {}))
    return out


class Responder:
    """Verdicts keyed by content; counts calls in flight at the server (the
    responder holds each request for ``hold`` seconds). With ``meet`` set, each
    request is also held until more than ``meet`` are in flight at once (at most
    ``MEET_WAIT`` seconds; once met, no request waits): two workers' shares are then
    seen together whatever their start-up times, as the bound they share is."""

    MEET_WAIT = 20.0

    def __init__(self, hold: float = 0.0) -> None:
        self.hold = hold
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.meet: int | None = None
        self.met = threading.Event()

    def __call__(self, request):
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.meet is not None and self.in_flight > self.meet:
                self.met.set()
        try:
            if self.meet is not None:
                self.met.wait(self.MEET_WAIT)
            if self.hold:
                time.sleep(self.hold)
            target = request.text.split("<reply_to_judge>")[-1]
            verdict = "no" if "OFFTOPIC" in target else "yes"
            return structured({"reason": f"verdict {verdict}", "verdict": verdict})
        finally:
            with self.lock:
                self.in_flight -= 1


def untimed(obj):
    """Without the transcripts' latencies (they differ from run to run; nothing else may)."""
    if isinstance(obj, dict):
        return {k: untimed(v) for k, v in obj.items() if k != "latency_s"}
    if isinstance(obj, list):
        return [untimed(v) for v in obj]
    return obj


def comparable(summary) -> dict:
    return {o.conversation_id: untimed(o.to_json()) for o in summary.outcomes}


def test_two_workers_give_the_results_of_one_process_under_one_global_bound():
    responder = Responder(hold=0.03)
    items = conversations(24)
    with FakeOpenAIServer(responder) as server:
        spec = PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": server.base_url,
                                             "max_concurrency": 6, "cache": False})  # every call made, both runs
        local = evaluate(items, spec)
        local_peak, responder.peak = responder.peak, 0
        calls = server.calls["/v1/chat/completions"]
        responder.meet = 3  # a worker's calls wait for the other's: one started seconds later still overlaps
        scaled = evaluate(items, spec, workers=2)
        assert server.calls["/v1/chat/completions"] == 2 * calls
    assert comparable(scaled) == comparable(local)
    assert len(scaled.outcomes) == 24 and not any(o.error for o in scaled.outcomes)
    assert scaled.count("failed") + scaled.count("passed") == 24
    # The total holds across both processes (each has a share of 3), and both shares were used at once.
    assert local_peak <= 6 and 3 < responder.peak <= 6


def test_workers_share_the_persistent_judge_cache(tmp_path):
    items = conversations(12)
    with FakeOpenAIServer(Responder()) as server:
        spec = PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": server.base_url,
                                             "max_concurrency": 4, "cache": str(tmp_path / "judge-cache.sqlite")})
        first = evaluate(items, spec, workers=2)
        calls = server.calls["/v1/chat/completions"]
        again = evaluate(items, spec, workers=2)  # other processes, the same cache file
        assert calls == 12 * 3 and server.calls["/v1/chat/completions"] == calls  # nothing asked twice

    def verdicts(summary):
        return {o.conversation_id: [(k, r.score, [v.verdict for v in r.verdicts]) for k, r in o.results.items()]
                for o in summary.outcomes}

    assert verdicts(again) == verdicts(first) and again.usage.calls == 0


def test_each_worker_gets_its_share_and_work_goes_to_both():
    responder = Responder(hold=0.02)
    items = conversations(16)
    with FakeOpenAIServer(responder) as server:
        spec = PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": server.base_url,
                                             "max_concurrency": 5})

        async def run():
            async with WorkerPool(spec, workers=2) as pool:
                assert [s.judge["max_concurrency"] for s in pool.shares] == [3, 2]
                assert len(set(pool.pids)) == 2 and os.getpid() not in pool.pids
                return pool.pids, await evaluate_async(items, spec.build(), judge_one=pool.judge, max_conversations=8)

        pids, summary = asyncio.run(run())
    assert len(summary.outcomes) == 16 and not any(o.error for o in summary.outcomes)
    for pid in pids:  # the pool shut its workers down
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


class Poison:
    """Unpickling it ends the process at once: an input that kills whichever worker receives it."""

    def __reduce__(self):
        return (os._exit, (17,))


def run_with(spec, items, action, out, *, max_conversations=12, limit=120.0):
    """``items`` through a 2-worker pool into the results file ``out``; ``action(pool)`` runs as a task beside
    the run (bounded in time). (The summary, the workers replaced, the lines written by conversation id.)"""

    async def run():
        async with WorkerPool(spec, workers=2) as pool:
            first = list(pool.pids)
            try:
                side = asyncio.create_task(action(pool))
                summary = await asyncio.wait_for(evaluate_to_file(
                    items, spec.build(), out, judge_one=pool.judge, max_conversations=max_conversations), limit)
                await side
                return summary, getattr(pool, "replaced", None)  # (the old pool had no count)
            finally:
                for pid in first:  # a stopped worker left behind by a failing test
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass

    summary, replaced = asyncio.run(run())
    lines = [json.loads(line) for line in Path(out).read_text().splitlines()]
    return summary, replaced, {r["conversation_id"]: r for r in lines if r["type"] == "conversation"}


def test_a_worker_killed_mid_run_is_replaced_and_its_conversations_sent_again(tmp_path):
    items = conversations(12)
    with FakeOpenAIServer(Responder(hold=0.2)) as server:
        spec = PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": server.base_url,
                                             "max_concurrency": 8})

        async def kill_soon(pool):
            await asyncio.sleep(0.1)  # conversations are in flight on both workers
            assert pool._workers[0].jobs
            os.kill(pool.pids[0], signal.SIGKILL)

        summary, replaced, lines = run_with(spec, items, kill_soon, tmp_path / "r.jsonl")
    assert sorted(lines) == sorted(i.conversation.id for i in items)  # all written, once each
    assert not any(r["error"] for r in lines.values()) and all(r["results"] for r in lines.values())
    assert replaced == 1 and summary.failed_runs == 0 and summary.exit_code in (0, 1)


def test_a_stopped_worker_is_killed_as_silent_and_the_run_finishes(tmp_path):
    items = conversations(12)
    with FakeOpenAIServer(Responder(hold=0.2)) as server:
        # judge timeout 2 s: the silence limit is max(10 s, 2 x 2 s) = 10 s (workers.silence_limit)
        spec = PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": server.base_url,
                                             "max_concurrency": 8, "timeout": 2})

        async def stop_soon(pool):
            await asyncio.sleep(0.1)
            assert pool._workers[1].jobs and getattr(pool, "silent_after", 10.0) == 10.0
            os.kill(pool.pids[1], signal.SIGSTOP)  # alive, holding its conversations, silent

        summary, replaced, lines = run_with(spec, items, stop_soon, tmp_path / "r.jsonl")  # the old pool hung
    assert sorted(lines) == sorted(i.conversation.id for i in items)
    assert not any(r["error"] for r in lines.values()) and all(r["results"] for r in lines.values())
    assert replaced == 1 and summary.failed_runs == 0


def test_a_conversation_that_kills_its_workers_is_a_failed_run_not_a_loop(tmp_path):
    items = conversations(6)
    items[2].options["poison"] = Poison()  # kills every worker it is sent to
    with FakeOpenAIServer(Responder(hold=0.2)) as server:
        spec = PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": server.base_url,
                                             "max_concurrency": 4})

        async def nothing(pool):
            return None

        # all 6 in flight at once: the first death takes the other conversations on that worker with it; sent
        # again as suspects (one per worker), only the poison is on the second worker that dies
        summary, replaced, lines = run_with(spec, items, nothing, tmp_path / "r.jsonl", max_conversations=6)
    assert sorted(lines) == sorted(i.conversation.id for i in items)
    poisoned = lines.pop("c2")
    assert not poisoned["results"] and "not sent again: 2 worker processes died" in poisoned["error"]
    assert "exited with code 17" in poisoned["error"]  # the cause, in the results file
    assert all(r["results"] and not r["error"] for r in lines.values())
    assert replaced == 2 and summary.failed_runs == 1 and summary.exit_code == 3  # never a pass


def test_cli_workers_write_one_results_file_like_one_process(tmp_path):
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps({"id": i.conversation.id, "turns": i.conversation.model_dump()["turns"]}) + "\n"
                            for i in conversations(10)))
    with FakeOpenAIServer(Responder()) as server:
        common = ["eval", str(data), "--model", "gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "4",
                  "--no-progress", "-q", "--no-cache"]  # both runs ask every window
        one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
        code_one = main([*common, "--workers", "1", "--out", str(one)])
        code_two = main([*common, "--workers", "2", "--out", str(two)])
    assert code_one == code_two
    def rows(path):
        return {r["conversation_id"]: untimed(r) for r in map(json.loads, path.read_text().splitlines())
                if r["type"] == "conversation"}

    rows_one = rows(one)
    assert rows(two) == rows_one and len(rows_one) == 10
    assert all("transcript" in v for r in rows_one.values() for v in r["results"]["turn_relevancy"]["verdicts"])


@pytest.mark.parametrize("flags,message", [(["--workers", "0"], "--workers must be a whole number >= 1, got 0"),
                                           (["--workers", "8", "--concurrency", "4"], "cannot share --concurrency 4")])
def test_cli_rejects_bad_worker_counts_before_any_work(tmp_path, capsys, flags, message):
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(Path(__file__).parents[2] / "examples" / "support_chats.jsonl"), *flags,
                 "--out", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_cli_resume_with_workers_judges_only_what_the_file_lacks(tmp_path):
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps({"id": i.conversation.id, "turns": i.conversation.model_dump()["turns"]}) + "\n"
                            for i in conversations(10)))
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(Responder()) as server:
        common = ["eval", str(data), "--model", "gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "4",
                  "--no-progress", "-q", "--no-cache", "--workers", "2", "--out", str(out)]
        main(common)
        lines = out.read_text().splitlines()
        out.write_text("\n".join(lines[:5]) + "\n")  # as if the run had died after 4 conversations (and the header)
        calls = server.calls["/v1/chat/completions"]
        main([*common, "--resume"])
        assert server.calls["/v1/chat/completions"] - calls == 6 * 3  # only the 6 missing conversations
    records = [json.loads(line) for line in out.read_text().splitlines()]
    ids = [r["conversation_id"] for r in records if r["type"] == "conversation"]
    assert sorted(ids) == sorted(f"c{i}" for i in range(10))
    # the parent writes the header once (workers write nothing), each run's summary last; positions from the input
    assert [r["type"] for r in records].count("header") == 1 and records[0]["type"] == "header"
    assert records[-1]["type"] == "summary" and records[-1]["conversations"] == 10
    assert sorted(r["position"] for r in records if r["type"] == "conversation") == list(range(10))
    assert all(r["position"] == int(r["conversation_id"][1:]) for r in records if r["type"] == "conversation")


def test_cli_workers_start_in_a_folder_with_a_module_named_like_a_dependency(tmp_path):
    """Workers do not put the working folder first on their import path: its
    ``yaml.py`` does not shadow PyYAML (the old ``python -c`` workers all failed
    to start), and a custom metric from that folder still imports (last on the path)."""
    (tmp_path / "yaml.py").write_text("raise RuntimeError('the folder yaml.py was imported')\n")
    (tmp_path / "cwdmetric.py").write_text(
        "from judgegraph import make_metric\n"
        "from judgegraph import ScriptedChatModel\n"
        "tone = make_metric(name='tone', instructions='Describe the tone of {{ conversation }} in one word.',\n"
        "                  feedback_type=str, model=ScriptedChatModel(default={'reason': 'canned', 'value': 'warm'}))\n")
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps({"id": i.conversation.id, "turns": i.conversation.model_dump()["turns"]}) + "\n"
                            for i in conversations(6)))
    out = tmp_path / "r.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    with FakeOpenAIServer(Responder()) as server:
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("judgegraph")), "eval", str(data), "-m", "turn-relevancy",
             "-m", "cwdmetric:tone", "--model", "gpt-4.1-mini", "--base-url", server.base_url, "--concurrency", "4",
             "--workers", "2", "--no-cache", "--no-progress", "-q", "--out", str(out)],
            capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rows = [r for line in out.read_text().splitlines() if (r := json.loads(line))["type"] == "conversation"]
    assert len(rows) == 6 and not any(r.get("error") for r in rows)
    assert all(r["results"]["tone"]["value"] == "warm" and r["results"]["turn_relevancy"]["score"] is not None
               for r in rows)


def test_a_worker_whose_parent_is_gone_exits_quietly(bare_env):
    """After ``kill -9`` of the parent, its workers find the socket closed (here: before they could say they are
    ready): each exits with no BrokenPipeError traceback on the terminal."""
    import socket
    import subprocess
    import sys
    from multiprocessing.connection import Connection

    from judgegraph.scale.workers import BOOTSTRAP

    ours, theirs = socket.socketpair()
    with theirs:
        proc = subprocess.Popen([sys.executable, "-c", BOOTSTRAP.format(fd=theirs.fileno())], pass_fds=[theirs.fileno()],
                                env=bare_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    conn = Connection(ours.detach())
    conn.send(PlanSpec(["turn-relevancy"], {"model": "gpt-4.1-mini", "base_url": "http://127.0.0.1:9/v1"}))
    conn.close()  # the parent is gone before the worker is ready
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
