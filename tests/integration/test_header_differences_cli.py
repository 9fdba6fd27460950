"""One header comparison (judgegraph.runs.header.compare_headers) behind `eval --resume` and `judgegraph diff`: a
results file whose header differs from this run's in one key of each class is refused by `--resume` (exit 2, the
difference named) unless the key is a speed setting or the judgegraph version, and `diff` names every one of them
(a speed setting marked as such)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from judgegraph import __version__
from judgegraph.cli import main

pytestmark = pytest.mark.integration

QUESTIONS = ["What is 2+2?", "What is the capital of France?", "How do I reset my password?"]
REPLIES = ["2+2 is 4.", "Paris is the capital of France.", "The weather in Lisbon is sunny today."]
JUDGE = "offline:all-MiniLM-L6-v2"
SPEED = " (a speed setting: how fast the judge is asked, not what it answers)"
Edit = Callable[[dict[str, Any], Path], None]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished offline run: (inputs, results file, the eval arguments that made it)."""
    root = tmp_path_factory.mktemp("headers")
    chats = root / "chats.jsonl"
    chats.write_text("".join(json.dumps({"id": f"c{i}", "turns": [{"role": "user", "content": q},
                                                                  {"role": "assistant", "content": r}]}) + "\n"
                             for i, (q, r) in enumerate(zip(QUESTIONS, REPLIES))), encoding="utf-8")
    out = root / "r.jsonl"
    flags = ["-q", "--no-progress", "--threshold", "0.5"]
    assert main(["eval", str(chats), "--out", str(out), *flags]) in (0, 1)
    return chats, out, flags


def metric_option(h: dict[str, Any], _: Path) -> None:
    h["metrics"][0]["options"]["threshold"] = 0.9


def metric(h: dict[str, Any], _: Path) -> None:
    h["metrics"].append({"name": "conversation_relevance", "options": {}})


def option(h: dict[str, Any], _: Path) -> None:
    h["options"]["window_size"] = 3


def judge(h: dict[str, Any], _: Path) -> None:
    h["judges"][0]["name"] = "offline:other-model"


def judge_setting(h: dict[str, Any], _: Path) -> None:
    h["judges"][0]["settings"]["temperature"] = 0.3


def prompt(h: dict[str, Any], _: Path) -> None:
    h["judges"][0]["prompts"]["turn_relevancy/judge_turn"] = "abcdef123456"


def input_file(h: dict[str, Any], _: Path) -> None:
    h["inputs"][0]["sha256"] = "0" * 64


def speed(h: dict[str, Any], _: Path) -> None:
    h["judges"][0]["settings"]["max_concurrency"] = 99


def version(h: dict[str, Any], _: Path) -> None:
    h["judgegraph"] = "0.0.1"


@pytest.mark.parametrize("edit, refused, shown", [
    (metric_option, "metric turn_relevancy option threshold changed: 0.9 → 0.5",
     "metric option turn_relevancy.threshold: 0.9 → 0.5"),
    (metric, "metric conversation_relevance removed", "metric conversation_relevance: judged → (none)"),
    (option, "option window_size changed: 3 → not set", "option window_size: 3 → (none)"),
    (judge, f"judge offline:other-model changed: offline:other-model → {JUDGE}", f"judge: offline:other-model → {JUDGE}"),
    (judge_setting, f"judge {JUDGE} setting temperature changed: 0.3 → null", "judge setting temperature: 0.3 → (none)"),
    (prompt, f"judge {JUDGE} prompt turn_relevancy/judge_turn changed: abcdef123456 → None",
     "prompt turn_relevancy/judge_turn: abcdef123456 → (none)"),
    (input_file, "input {chats} changed (sha256 000000000000 → ", None),  # diff: a note, the inputs differ
    (speed, None, f"judge setting max_concurrency: 99 → (none){SPEED}"),
    (version, None, f"judgegraph version: 0.0.1 → {__version__}"),
], ids=lambda x: getattr(x, "__name__", None))
def test_each_class_of_header_difference_through_resume_and_diff(run, tmp_path, capsys, edit: Edit, refused, shown):
    chats, out, flags = run
    lines = out.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    edit(header, chats)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    before = edited.read_bytes()
    capsys.readouterr()
    code = main(["eval", str(chats), "--out", str(edited), "--resume", *flags])
    err = capsys.readouterr().err
    if refused is None:  # a speed setting, the version: the resume continues (nothing left to judge)
        assert code in (0, 1) and "--resume refused" not in err, err
        assert edited.read_bytes().startswith(before)  # only a summary appended
    else:
        assert code == 2 and "--resume refused" in err and refused.format(chats=chats) in err, err
        assert edited.read_bytes() == before
    edited.write_bytes(before)
    assert main(["diff", str(edited), str(out), "--json"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    texts = [d["text"] for d in settings["differences"]]
    if shown is None:
        assert texts == [] and settings["notes"] == [
            "the input files differ (as expected when NEW judged the new version's conversations)"]
    else:
        assert texts == [shown]
        assert settings["same_judging"] is (edit not in (judge, judge_setting, prompt))
