"""The offline judge's batching encoder: micro-batching across concurrent callers
(sync threads and asyncio tasks alike), each distinct text embedded once, a
bounded LRU, BLAS threads limited during encoding, errors confined to the
request at fault; and the batched path gives the same vectors and verdicts as
the unbatched one on the labelled set."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from judgegraph.embeddings.batching import BatchingEncoder, adrive, drive
from judgegraph.judges.base import JudgeRequest
from judgegraph.judges.offline import EmbeddingJudge
from judgegraph.judges.offline_scoring import DEFAULT_THRESHOLD, relevance_score
from judgegraph.metrics.relevancy import TurnVerdict

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "relevance_labelled.jsonl"


def vector(text: str, dim: int = 8) -> np.ndarray:
    rng = np.random.default_rng(abs(hash(text)) % (2**32))
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


class RecordingEncode:
    """A fake ``encode``: deterministic vectors per text, records every call, can
    hold the first call until released (so later requests queue up behind it),
    and raises for texts in ``fail_on``."""

    def __init__(self, *, hold_first: bool = False, fail_on: tuple[str, ...] = ()) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = set(fail_on)
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self.blas_threads_seen: list[int] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> np.ndarray:
        from threadpoolctl import threadpool_info

        with self._lock:
            self.calls.append(list(texts))
            self.threads.add(threading.get_ident())
            self.blas_threads_seen += [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        self.started.set()
        assert self.release.wait(10)
        if self.fail_on & set(texts):
            raise RuntimeError(f"cannot embed {sorted(self.fail_on & set(texts))}")
        return np.stack([vector(t) for t in texts])


def make(encode: RecordingEncode, **kw) -> BatchingEncoder:
    kw.setdefault("encode_threads", 1)
    return BatchingEncoder(encode, **kw)


# -- micro-batching ------------------------------------------------------------------------


def test_concurrent_sync_callers_share_one_encode_call_and_get_their_own_vectors():
    fake = RecordingEncode(hold_first=True)
    enc = make(fake, max_wait_s=0.0)
    requests = [[f"q{i}", f"a{i}", "shared"] for i in range(20)]
    with ThreadPoolExecutor(21) as pool:
        first = pool.submit(enc.encode, ["warm-up"])
        assert fake.started.wait(5)  # the worker is busy: everything below queues up
        futures = [pool.submit(enc.encode, texts) for texts in requests]
        while enc._queue.qsize() < len(requests):
            time.sleep(0.001)
        fake.release.set()
        first.result(5)
        results = [f.result(5) for f in futures]
    assert len(fake.calls) == 2  # the warm-up, then ONE call for all 20 queued requests
    assert sorted(fake.calls[1]) == sorted({t for r in requests for t in r})  # "shared" embedded once
    for texts, got in zip(requests, results):
        assert np.array_equal(got, np.stack([vector(t) for t in texts]))
    assert enc.stats.batches == 2 and enc.stats.encoded == 1 + 41


def test_async_callers_are_batched_without_blocking_the_event_loop():
    fake = RecordingEncode()
    enc = make(fake, max_wait_s=0.05)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        t = asyncio.ensure_future(ticker())
        out = await asyncio.gather(*(enc.aencode([f"text {i}", f"other {i}"]) for i in range(30)))
        t.cancel()
        return out, ticks

    results, ticks = asyncio.run(main())
    assert len(fake.calls) == 1 and len(fake.calls[0]) == 60
    assert ticks > 1  # the loop kept running while the batch was encoded
    for i, got in enumerate(results):
        assert np.array_equal(got, np.stack([vector(f"text {i}"), vector(f"other {i}")]))


def test_max_batch_bounds_the_texts_per_encode_call():
    fake = RecordingEncode(hold_first=True)
    enc = make(fake, max_batch=10, max_wait_s=0.0)
    with ThreadPoolExecutor(12) as pool:
        first = pool.submit(enc.encode, ["x"])
        assert fake.started.wait(5)
        futures = [pool.submit(enc.encode, [f"t{i}a", f"t{i}b"]) for i in range(10)]
        while enc._queue.qsize() < 10:
            time.sleep(0.001)
        fake.release.set()
        first.result(5)
        [f.result(5) for f in futures]
    assert [len(c) for c in fake.calls] == [1, 10, 10]


def test_sync_and_async_go_through_the_same_scoring_generator():
    def steps():
        a = yield ["one", "two"]
        b = yield ["three"]
        return float(a[0] @ a[1]) + float(b[0] @ b[0])

    fake = RecordingEncode()
    enc = make(fake)
    sync = drive(steps(), enc.encode)
    asyn = asyncio.run(adrive(steps(), enc.aencode))
    assert sync == pytest.approx(asyn) == pytest.approx(float(vector("one") @ vector("two")) + 1.0)
    assert len(fake.calls) == 2  # the async run found all three texts in the LRU


# -- the LRU ---------------------------------------------------------------------------------


def test_each_distinct_text_is_embedded_once_and_the_lru_is_bounded():
    fake = RecordingEncode()
    enc = make(fake, cache_size=3)
    enc.encode(["a", "b", "a"])
    enc.encode(["a", "b"])  # all cached: no call
    assert fake.calls == [["a", "b"]]
    enc.encode(["c", "d"])  # evicts the least recently used: "a" (b was used after a)
    assert len(enc) == 3
    enc.encode(["b"])
    assert len(fake.calls) == 2
    enc.encode(["a"])
    assert fake.calls[-1] == ["a"]
    assert enc.stats.cache_hits == 2 + 1  # "a", "b" on the second call, "b" later


def test_cached_vectors_are_read_only_copies():
    enc = make(RecordingEncode())
    out = enc.encode(["a"])
    out[0, 0] = 42.0  # the caller's array is its own
    assert np.array_equal(enc.encode(["a"])[0], vector("a"))


# -- errors ----------------------------------------------------------------------------------


def test_a_failing_text_fails_only_its_own_request():
    fake = RecordingEncode(hold_first=True, fail_on=("poison",))
    enc = make(fake, max_wait_s=0.0)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(enc.encode, ["warm"])
        assert fake.started.wait(5)
        good = pool.submit(enc.encode, ["fine", "also fine"])
        bad = pool.submit(enc.encode, ["poison", "x"])
        while enc._queue.qsize() < 2:
            time.sleep(0.001)
        fake.release.set()
        first.result(5)
        assert np.array_equal(good.result(5)[1], vector("also fine"))
        with pytest.raises(RuntimeError, match="poison"):
            bad.result(5)
    assert enc.stats.errors == 1
    assert np.array_equal(enc.encode(["x"])[0], vector("x"))  # the encoder keeps working


def test_wrong_shapes_from_the_encoder_are_errors_not_hangs():
    enc = BatchingEncoder(lambda texts: np.zeros((len(texts) + 1, 4), dtype=np.float32), encode_threads=1)
    with pytest.raises(ValueError, match="shape"):
        enc.encode(["a"])


def test_judge_errors_from_the_encoder_are_reported_sync_and_async():
    judge = EmbeddingJudge(encoder=make(RecordingEncode(fail_on=("broken reply",))))
    request = JudgeRequest(
        task="turn_relevance", step="turn_relevancy/judge_turn", schema=TurnVerdict, values={},
        inputs={"reply": "broken reply", "latest_user": "a question about the weather", "context": []},
    )
    for outcome in (judge.judge(request), asyncio.run(judge.ajudge(request))):
        assert not outcome.ok and outcome.attempts == 1 and "RuntimeError: cannot embed" in outcome.error


# -- threads ---------------------------------------------------------------------------------


def test_blas_threads_are_limited_while_encoding_and_restored_after():
    from threadpoolctl import threadpool_info

    # (no threadpool_limits() here: OpenBLAS then ignores set_num_threads from other threads)
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    if not before or max(before) < 2:
        pytest.skip("BLAS runs single-threaded here already")
    fake = RecordingEncode()
    make(fake, blas_threads=1).encode(["a"])
    assert set(fake.blas_threads_seen) == {1}
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
    untouched = RecordingEncode()
    make(untouched, blas_threads=None).encode(["a"])
    assert untouched.blas_threads_seen == before


def test_a_large_batch_is_split_over_encode_threads_in_input_order():
    fake = RecordingEncode()
    enc = BatchingEncoder(fake, encode_threads=2)
    texts = [("word " * (i % 7)) + str(i) for i in range(64)]
    got = enc.encode(texts)
    assert len(fake.calls) == 2 and len(fake.threads) == 2
    assert sorted(len(c) for c in fake.calls) == [32, 32]
    assert np.array_equal(got, np.stack([vector(t) for t in texts]))


def test_nothing_runs_before_the_first_request_and_the_worker_stops_when_idle():
    before = {t.name for t in threading.enumerate()}
    enc = make(RecordingEncode(), idle_s=0.05, name="idle-test")
    assert not any("idle-test" in t.name for t in threading.enumerate())
    enc.encode(["a"])
    assert any("idle-test" in t.name for t in threading.enumerate())
    deadline = time.monotonic() + 5
    while any("idle-test" in t.name for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any("idle-test" in t.name for t in threading.enumerate())
    assert np.array_equal(enc.encode(["b"])[0], vector("b"))  # restarts on demand
    assert {t.name for t in threading.enumerate()} - before <= {"judgegraph-idle-test-batcher"}


def _child_encode(enc: BatchingEncoder, out) -> None:
    out.put(enc.encode(["after fork"])[0].tolist())


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_gets_its_own_worker():
    enc = make(RecordingEncode())
    enc.encode(["before fork"])  # the parent's worker is running
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_encode, args=(enc, out))
    child.start()
    got = out.get(timeout=20)
    child.join(20)
    assert child.exitcode == 0
    assert np.allclose(got, vector("after fork"))


# -- the real model: batched == unbatched ------------------------------------------------------


def _labelled_requests() -> list[JudgeRequest]:
    from judgegraph.data.conversation import Conversation
    from judgegraph.data.windows import sliding_windows
    from judgegraph.metrics.relevancy import turn_request

    requests = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        if line.strip():
            conversation = Conversation.model_validate(json.loads(line))
            requests += [turn_request(w, rubric="") for w in sliding_windows(conversation, 10)]
    return requests


@pytest.mark.slow
def test_batched_path_gives_the_same_vectors_and_verdicts_on_the_labelled_set():
    from judgegraph.embeddings.minilm import get_default_embeddings

    model = get_default_embeddings().load()
    requests = _labelled_requests()
    assert len(requests) >= 300

    def single_blas_thread(fn):  # in a thread of its own, as the encoder limits its own (fast on a busy machine)
        from threadpoolctl import ThreadpoolController

        def run():
            with ThreadpoolController().limit(limits=1, user_api="blas"):
                return fn()

        with ThreadPoolExecutor(1) as pool:
            return pool.submit(run).result()

    # unbatched: each window's texts in their own encode call, as before
    unbatched = single_blas_thread(lambda: [
        relevance_score(model.encode, r.inputs["reply"], r.inputs["latest_user"], r.inputs["context"])
        for r in requests
    ])

    encoder = BatchingEncoder.for_embeddings(model, max_wait_s=0.01)
    judge = EmbeddingJudge(model, encoder=encoder)

    async def all_windows():
        return await asyncio.gather(*(judge.ajudge(r) for r in requests))

    outcomes = asyncio.run(all_windows())
    assert all(o.ok for o in outcomes)
    assert encoder.stats.batches < len(requests) / 10  # really batched across windows
    assert encoder.stats.max_batch >= 64
    batched = [o.score for o in outcomes]
    assert np.abs(np.asarray(batched) - np.asarray(unbatched)).max() < 1e-5
    assert [o.value.verdict for o in outcomes] == ["yes" if s >= DEFAULT_THRESHOLD else "no" for s in unbatched]

    # the vectors themselves: every text embedded alone vs from the encoder's batches
    texts = list(encoder._cache)[:100]
    alone = single_blas_thread(lambda: np.concatenate([model.encode([t]) for t in texts]))
    assert np.abs(encoder.encode(texts) - alone).max() < 1e-5
