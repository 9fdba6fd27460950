"""The rules the worker pool supervises by: the silence limit derived from the
judge timeout, and the workers' import path (the working folder never first)."""

import os

import pytest

from judgegraph.scale.workers import MIN_SILENCE_S, silence_limit, worker_pythonpath


@pytest.mark.parametrize("settings,limit", [
    ({}, 240.0),  # the judge's default request timeout, 120 s, twice
    ({"timeout": 30}, 60.0),
    ({"timeout": 2}, MIN_SILENCE_S),  # never below the floor
    ({"timeout": None}, 240.0),
])
def test_a_worker_is_silent_after_twice_the_judge_timeout_at_least_the_floor(settings, limit):
    assert silence_limit(settings) == limit


def test_the_workers_path_is_the_parents_without_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = ["", str(tmp_path), "/opt/lib", str(tmp_path / "sub"), os.path.join(str(tmp_path), "."), "/site"]
    assert worker_pythonpath(path, "/extra").split(os.pathsep) == ["/opt/lib", str(tmp_path / "sub"), "/site", "/extra"]
