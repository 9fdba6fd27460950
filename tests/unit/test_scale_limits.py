"""The run's judge budget split across workers: shares add up to the total."""

import subprocess
import sys

import pytest

from judgegraph.scale.limits import split_budget, split_int, usable_workers
from judgegraph.scale.spec import PlanSpec, auto_workers


@pytest.mark.parametrize("total,n", [(16, 1), (16, 2), (17, 2), (64, 3), (5, 5), (7, 4)])
def test_integer_shares_add_up_and_differ_by_at_most_one(total, n):
    shares = split_int(total, n)
    assert len(shares) == n and sum(shares) == total
    assert max(shares) - min(shares) <= 1 and min(shares) >= 1


def test_budget_split_keeps_other_settings_and_divides_rates():
    settings = {"model": "openai:gpt-4.1-mini", "base_url": "http://127.0.0.1:1/v1", "max_concurrency": 17,
                "max_tries": 3, "rpm": 600, "tpm": 90_000}
    shares = split_budget(settings, 2)
    assert [s["max_concurrency"] for s in shares] == [9, 8]
    assert [s["rpm"] for s in shares] == [300, 300] and sum(s["tpm"] for s in shares) == 90_000
    assert all(s["max_tries"] == 3 and s["base_url"] == settings["base_url"] for s in shares)
    assert settings["max_concurrency"] == 17  # the caller's dict is not changed


def test_no_more_workers_than_units_of_concurrency():
    assert usable_workers(8, {"max_concurrency": 3}) == 3
    assert len(PlanSpec(None, {"model": "m", "max_concurrency": 3}).shares(8)) == 3
    with pytest.raises(ValueError, match="cannot be shared by 4"):
        split_budget({"max_concurrency": 3}, 4)
    with pytest.raises(ValueError):
        usable_workers(0, {})


def test_a_worker_rebuilds_the_judge_from_settings_not_objects():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    with pytest.raises(TypeError, match="model as a string"):
        PlanSpec(None, {"model": FakeListChatModel(responses=["x"])})
    with pytest.raises(TypeError, match="not judge="):
        PlanSpec(None, {"judge": object()})
    assert PlanSpec(None, {}).kind == "offline" and PlanSpec(None, {"model": "openai:x"}).kind == "llm"


def test_auto_workers_one_per_core_up_to_4_for_an_llm_judge():
    assert [auto_workers("llm", cpus=c) for c in (1, 2, 3, 32)] == [1, 2, 3, 4]
    assert auto_workers("offline", cpus=8) == 1


def test_ray_is_not_imported_unless_asked_for():
    code = ("import sys, judgegraph.cli, judgegraph.cli.eval, judgegraph.scale, judgegraph.scale.run, "
            "judgegraph.scale.workers, judgegraph.scale.ray_backend; "
            "from judgegraph.scale import RayPool, PlanSpec; RayPool(PlanSpec(None, {}), address='127.0.0.1:1'); "
            "assert 'ray' not in sys.modules, 'ray imported'")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_cli_workers_auto_starts_processes_only_for_big_runs():
    from argparse import Namespace

    from judgegraph.cli.eval import _workers
    from judgegraph.scale.spec import AUTO_MIN_INPUT_BYTES

    auto = Namespace(workers="auto", ray=None)
    assert _workers(auto, AUTO_MIN_INPUT_BYTES - 1) == 1
    assert _workers(auto, AUTO_MIN_INPUT_BYTES) == auto_workers("llm")
    assert _workers(auto, AUTO_MIN_INPUT_BYTES, "offline") == 1
    assert _workers(Namespace(workers="auto", ray="127.0.0.1:6379"), 10_000) is None  # Ray: one actor per CPU
    assert _workers(Namespace(workers=3, ray=None), 5) == 3
