"""The run header and summary of a results file (issue 18, part 1): written once, first and last; a resume with
other settings refused naming each difference; conversation lines carry their input position; readers give input
order; no key reaches the file."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from judgegraph.data.prompts import load_prompt
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.loaders import LoadedConversation
from judgegraph.outputs.export import load_results
from judgegraph.runs import read_run
from judgegraph.runs.header import RunSettingsChanged, differences, metric_prompts, run_header
from judgegraph.runs.resultsfile import ResultsFileError
from judgegraph.runs.runner import MetricPlan, judge_conversation
from judgegraph.runs.runner import evaluate_to_file as run_to_file
from tests.unit.test_runner import NO, YES, item


def plan(metrics=("turn_relevancy",), model=None, **overrides) -> MetricPlan:
    model = model or ScriptedChatModel(rules=[("OFF", [NO])], default=YES, section="reply_to_judge")
    return MetricPlan(list(metrics), resolve_judge(model=model), overrides)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_inputs(path: Path, n: int, off: tuple[int, ...] = ()) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"c{i}", "turns": [
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": f"{'OFF' if i in off else 'answer'} {i}"}]}) + "\n")
    return path


def reversed_finish(n: int, the_plan: MetricPlan):
    """(judge_one, on_outcome) that finish the conversations in the reverse of their input order: each waits
    until the one after it is written."""
    written = [asyncio.Event() for _ in range(n + 1)]
    written[n].set()

    async def judge_one(loaded: LoadedConversation):
        i = int(loaded.conversation.id[1:])
        await written[i + 1].wait()
        return await judge_conversation(loaded, the_plan)

    def on_outcome(outcome) -> None:
        written[int(outcome.conversation_id[1:])].set()

    return {"judge_one": judge_one, "on_outcome": on_outcome}


def test_the_header_is_the_first_line_the_summary_the_last_and_lines_carry_their_input_position(tmp_path):
    inputs = write_inputs(tmp_path / "chats.jsonl", 6, off=(2,))
    out = tmp_path / "r.jsonl"
    p = plan(threshold=0.7)
    summary = asyncio.run(run_to_file([inputs], p, out, max_conversations=6, **reversed_finish(6, p)))
    lines = records(out)
    head, *convs, tail = lines
    assert head["type"] == "header" and head["format"] == 1 and head["judgegraph"]
    assert head["metrics"] == [{"name": "turn_relevancy", "options": {"threshold": 0.7}}]
    assert head["inputs"] == [{"path": str(inputs), "sha256": hashlib.sha256(inputs.read_bytes()).hexdigest()}]
    assert head["judges"][0]["name"] == "llm:scripted"
    step = "turn_relevancy/judge_turn"
    assert head["judges"][0]["prompts"][step] == hashlib.sha256(load_prompt(step).path.read_bytes()).hexdigest()[:12]
    assert tail["type"] == "summary" and tail["conversations"] == 6 and tail["duration_s"] >= 0
    assert tail["pass_rate"] == {"turn_relevancy": pytest.approx(5 / 6, abs=1e-6)}
    assert tail["usage"]["calls"] == 6 and tail["cost_usd"] is None  # no price for this model: unknown, not 0
    # the file stays in completion order (nothing waits to be written); each line knows its place in the input
    assert [c["conversation_id"] for c in convs] == [f"c{i}" for i in reversed(range(6))]
    assert all(c["position"] == int(c["conversation_id"][1:]) for c in convs)
    # readers give input order
    assert [c.conversation_id for c in load_results(out).conversations] == [f"c{i}" for i in range(6)]
    parsed = read_run(out)
    assert parsed.header is not None and parsed.summary is not None
    assert not parsed.problems and parsed.header.data() == head and parsed.summary.data() == tail  # the report's reader
    assert [o.conversation_id for o in summary.rows] == [f"c{i}" for i in range(6)]  # the CLI table's rows


def test_positions_count_every_conversation_of_the_inputs_even_those_a_resume_skips(tmp_path):
    out = tmp_path / "r.jsonl"
    asyncio.run(run_to_file([item(i) for i in (0, 1)], plan(), out))
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:2]) + "\n")  # the header and one conversation: as if killed
    summary = asyncio.run(run_to_file([item(i) for i in range(4)], plan(), out, resume=True))
    convs = [r for r in records(out) if r["type"] == "conversation"]
    assert sorted((r["conversation_id"], r["position"]) for r in convs) == [(f"c{i}", i) for i in range(4)]
    assert [o.conversation_id for o in summary.rows] == [f"c{i}" for i in range(4)]  # resumed rows in their place


@pytest.mark.parametrize("change, expected", [
    (dict(overrides={"threshold": 0.9}), "metric turn_relevancy option threshold changed: 0.7 → 0.9"),
    (dict(metrics=("turn_relevancy", "conversation_relevance")), "metric conversation_relevance added"),
    (dict(metrics=("conversation_relevance",)), "metric turn_relevancy removed"),
    (dict(model="other"), "judge llm:scripted changed: llm:scripted → llm:other"),
    (dict(settings={"model": "x", "base_url": "http://127.0.0.1:2/v1"}),
     'setting base_url changed: "http://127.0.0.1:1/v1" → "http://127.0.0.1:2/v1"'),
    (dict(inputs="changed"), "chats.jsonl changed (sha256"),
])
def test_a_resume_with_other_settings_is_refused_naming_the_difference(tmp_path, change, expected):
    inputs = write_inputs(tmp_path / "chats.jsonl", 3)
    out = tmp_path / "r.jsonl"
    settings = {"model": "x", "base_url": "http://127.0.0.1:1/v1"}
    first = plan(threshold=0.7)
    asyncio.run(run_to_file([inputs], first, out, header=run_header(first, inputs=[inputs], judge_settings=settings)))
    before = out.read_bytes()
    model = ScriptedChatModel(default=YES)
    if change.get("model"):
        model.model_name = change["model"]
    second = plan(change.get("metrics", ("turn_relevancy",)), model=model,
                  **change.get("overrides", {"threshold": 0.7}))
    if change.get("inputs"):
        write_inputs(inputs, 4)
    header = run_header(second, inputs=[inputs], judge_settings=change.get("settings", settings))
    with pytest.raises(RunSettingsChanged) as raised:
        asyncio.run(run_to_file([inputs], second, out, resume=True, header=header))
    assert any(expected in d for d in raised.value.differences), raised.value.differences
    assert isinstance(raised.value, ResultsFileError) and expected in str(raised.value)
    assert model.call_count == 0 and out.read_bytes() == before  # refused before any call or write


def test_an_unchanged_rerun_resumes_even_with_other_speed_settings(tmp_path):
    inputs = write_inputs(tmp_path / "chats.jsonl", 3)
    out = tmp_path / "r.jsonl"
    first = plan(threshold=0.7)
    fast = {"model": "x", "max_concurrency": 16, "timeout": 30}
    asyncio.run(run_to_file([inputs], first, out, header=run_header(first, inputs=[inputs], judge_settings=fast)))
    slow = {"model": "x", "max_concurrency": 2, "timeout": 300, "cache": False}  # how fast it asks, not what
    second = plan(threshold=0.7)
    summary = asyncio.run(run_to_file([inputs], second, out, resume=True,
                                      header=run_header(second, inputs=[inputs], judge_settings=slow)))
    assert summary.resumed == 3 and summary.exit_code == 0
    kinds = [r["type"] for r in records(out)]
    assert kinds == ["header", "conversation", "conversation", "conversation", "summary", "summary"]
    assert load_results(out).summary.conversations == 3  # readers take the last summary


def test_a_file_without_a_header_still_resumes(tmp_path):
    out = tmp_path / "old.jsonl"
    asyncio.run(run_to_file([item(i) for i in range(2)], plan(), out))
    old = [line for line in out.read_text().splitlines() if '"type": "conversation"' in line]
    out.write_text("".join(line.replace('"position": ', '"old_position": ') + "\n" for line in old))  # an older file
    seen = []
    summary = asyncio.run(run_to_file([item(i) for i in range(3)], plan(threshold=0.9), out, resume=True,
                                      on_resumed=seen.append))
    assert summary.resumed == 2 and summary.conversations == 3 and seen[0].header is None
    assert records(out)[0]["type"] == "conversation"  # no header put in the middle of an older file
    in_file = [json.loads(line)["conversation_id"] for line in old]
    assert [c.conversation_id for c in load_results(out).conversations] == ["c2", *in_file]  # placed ones first


def test_no_key_or_password_reaches_the_header(tmp_path, monkeypatch):
    key = "sk-live-abcdefghijklmnop1234"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    p = plan(role=f"support agent; api_key={key}")
    header = run_header(p, argv=["eval", "--base-url", "http://user:hunter2secret@127.0.0.1:1/v1", "--rubric", key],
                        config={"judge": {"base_url": "http://user:hunter2secret@127.0.0.1:1/v1"},
                                "note": f"Authorization: Bearer {key}"},
                        judge_settings={"model": "x", "base_url": "http://user:hunter2secret@h/v1", "api_key": key})
    text = json.dumps(header)
    assert key not in text and "hunter2secret" not in text and "[REDACTED]" in text


def test_prompt_hashes_follow_the_prompt_files(tmp_path, monkeypatch):
    before = metric_prompts(["turn_relevancy", "conversation_completeness"])
    assert set(before) == {"turn_relevancy/judge_turn", "turn_relevancy/judge_dense", "turn_relevancy/rubric",
                           "turn_relevancy/write_reason",
                           "conversation_completeness/extract_goals", "conversation_completeness/judge_goal"}
    copy = tmp_path / "prompts"
    shutil.copytree(load_prompt("turn_relevancy/judge_turn").path.parents[1], copy)
    edited = copy / "turn_relevancy" / "judge_turn.md"
    edited.write_text(edited.read_text() + "\nBe strict.\n")
    monkeypatch.setenv("JUDGEGRAPH_PROMPTS_DIR", str(copy))
    after = metric_prompts(["turn_relevancy", "conversation_completeness"])
    assert {k for k in before if before[k] != after[k]} == {"turn_relevancy/judge_turn"}
    old = {"metrics": [], "judges": [{"name": "llm:m", "settings": {}, "prompts": before}], "inputs": []}
    new = {**old, "judges": [{"name": "llm:m", "settings": {}, "prompts": after}]}
    assert differences(old, new) == [f"judge llm:m prompt turn_relevancy/judge_turn changed: "
                                     f"{before['turn_relevancy/judge_turn']} → {after['turn_relevancy/judge_turn']}"]
    assert differences(old, old) == []


@pytest.mark.parametrize("old, new, refused", [
    ({"temperature": 0, "timeout": 30}, {"temperature": 0.7, "timeout": 30}, "setting temperature changed: 0 → 0.7"),
    ({"temperature": 0, "timeout": 30, "max_retries": 3}, {"temperature": 0, "timeout": 300, "max_retries": 5}, None),
    ({"rule": "a.json", "rule_sha256": "aaa"}, {"rule": "a.json", "rule_sha256": "bbb"}, "setting rule_sha256 changed"),
    ({"aggregate": "majority", "jurors": [{"name": "llm:a", "repeat": 1, "settings": {"temperature": 0, "timeout": 1}}]},
     {"aggregate": "majority", "jurors": [{"name": "llm:a", "repeat": 1, "settings": {"temperature": 0, "timeout": 9}}]},
     None),
    ({"aggregate": "majority", "jurors": [{"name": "llm:a", "repeat": 1, "settings": {}}]},
     {"aggregate": "majority", "jurors": [{"name": "llm:a", "repeat": 3, "settings": {}}]}, "setting jurors changed"),
])
def test_only_settings_that_decide_verdicts_refuse_a_resume(old, new, refused):
    def header(settings):
        return {"metrics": [], "judges": [{"name": "llm:m", "settings": settings, "prompts": {}}], "inputs": []}

    found = differences(header(old), header(new))
    assert (found == []) if refused is None else any(refused in d for d in found), found


def test_the_header_records_the_settings_the_judge_itself_uses(tmp_path):
    rule = tmp_path / "rule.json"
    rule.write_text("{}")
    header = run_header(plan(), judge_settings={"model": "x", "rule": str(rule)})
    settings = header["judges"][0]["settings"]
    assert settings["max_retries"] == 0  # LLMJudge.settings: a model object keeps its own client's retries
    assert settings["rule_sha256"] == hashlib.sha256(b"{}").hexdigest()[:12]
