import os

import pytest

from tests.kit.postgres import postgres_dsn, postgres_server  # noqa: F401  (fixtures: a real PostgreSQL)

# Tests never reach a hub or a provider; no key exists.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("OPENAI_API_KEY", None)

# What a bare subprocess environment keeps: the code under test (PYTHONPATH, e.g. a worktree's src/), the
# per-test judge cache below, the model cache CI points at, and the offline switch.
PASSED_TO_SUBPROCESSES = ("PYTHONPATH", "JUDGEGRAPH_JUDGE_CACHE", "JUDGEGRAPH_CACHE_DIR", "HF_HUB_OFFLINE")


# pytest-xdist runs a file on one worker (--dist=loadfile) and, with --no-loadscope-reorder, hands files out in
# the order collected: the files that take longest (their own servers, worker processes, a cluster, a browser, the
# docs' every example) start first, so none of them starts last and holds the run while the other workers idle.
LONGEST_FIRST = (
    "test_docs_examples.py", "test_workers.py", "test_mlflow.py", "test_benchmarks_run.py", "test_batching_encoder.py",
    "test_ray.py", "test_plugins.py", "test_threads_server.py", "test_runs_cli.py",
    "test_batch_cli.py", "test_threads_postgres.py", "test_html_browser.py", "test_view_browser.py",
)
# ... and last: mypy over the documented app code, from a copy of the mypy cache that .ci/run's own mypy (beside the
# suite) puts in place once it has checked the tree; by the end of the suite it is there, and the check is seconds.
LAST = ("test_apps_typing.py",)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    rank.update({name: len(LONGEST_FIRST) + 1 + i for i, name in enumerate(LAST)})
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _judge_cache_per_test(tmp_path_factory, monkeypatch):
    """The persistent judge cache (on by default for LLM judges at temperature 0)
    goes to a fresh file per test, never to the user's cache folder: a second
    run of the suite must not be answered from the first."""
    monkeypatch.setenv("JUDGEGRAPH_JUDGE_CACHE", str(tmp_path_factory.mktemp("judge-cache") / "judge-cache.sqlite"))


@pytest.fixture
def bare_env():
    """A minimal environment for a subprocess: PATH (no keys, no proxies, no user
    settings) plus PASSED_TO_SUBPROCESSES when set, so the subprocess runs the
    judgegraph under test, not whichever one is installed, with this test's cache."""
    return {"PATH": "/usr/bin:/bin", **{k: os.environ[k] for k in PASSED_TO_SUBPROCESSES if os.environ.get(k)}}


@pytest.fixture
def loop_passes(monkeypatch) -> list[int]:
    """The passes of each run through the runner's one loop (``OpenRun.execute``), an entry per run: the loop
    counted as it runs, whatever answers its judge requests (here, workers, Ray, the Batch API, a watch's polls)."""
    from judgegraph.runs.runner import OpenRun

    loops: list[int] = []
    execute = OpenRun.execute

    async def counted(self, plan, read, answering, stop, **kw):
        async def passes(run, stop):
            async for judge in answering(run, stop):
                loops[-1] += 1
                yield judge

        loops.append(0)
        return await execute(self, plan, read, passes, stop, **kw)

    monkeypatch.setattr(OpenRun, "execute", counted)
    return loops
