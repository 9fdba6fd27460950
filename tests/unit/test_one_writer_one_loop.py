"""Issue 25, items 1 and 2: one writer of results files (``resultsfile.ResultsWriter``) and one run loop
(``runner.OpenRun.execute``) that local runs, worker processes, Ray, the Batch API and ``watch`` all go through."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import judgegraph
from judgegraph.data.conversation import Conversation
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.loaders import LoadedConversation
from judgegraph.runs.runner import (
    ConversationOutcome,
    MetricPlan,
    OpenRun,
    RunSummary,
    evaluate_async,
    evaluate_to_file,
)

SRC = Path(judgegraph.__file__).parent
#: files opened for writing that are not results files: a CSV/Parquet export, a downloaded model wheel
NOT_RESULTS = {"outputs/export.py", "embeddings/minilm.py"}
YES = {"reason": "on topic", "verdict": "yes"}


def _write_opens(tree: ast.AST) -> list[int]:
    """Lines of ``open(path, "w"|"a"...)`` and ``path.open("w"|"a"...)`` calls (the mode a string literal)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            modes = node.args[1:2]
        elif isinstance(func, ast.Attribute) and func.attr == "open":
            modes = node.args[:1]
        else:
            continue
        modes = [*modes, *(k.value for k in node.keywords if k.arg == "mode")]
        if any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax")
               for m in modes):
            found.append(node.lineno)
    return found


def test_no_module_but_resultsfile_opens_a_file_for_writing():
    """Every results file (eval, workers, Ray, batch, watch, rejudge, pairwise, simulate) is written by
    ResultsWriter: rejudge copied its lines with its own open(), eval created --out with another."""
    offenders = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel in NOT_RESULTS or rel == "runs/resultsfile.py":
            continue
        if lines := _write_opens(ast.parse(path.read_text(encoding="utf-8"))):
            offenders[rel] = lines
    assert offenders == {}


def test_the_scan_finds_a_write_open():  # the test above can fail
    assert _write_opens(ast.parse("open(p, 'w')\nPath(p).open('a', encoding='utf-8')\nopen(p)\np.open(mode='wb')")) \
        == [1, 2, 4]


def _item(i: int) -> LoadedConversation:
    conv = Conversation.model_validate({"id": f"c{i}", "turns": [
        {"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]})
    return LoadedConversation(conversation=conv, source=f"test:{i}", format="judgegraph")


def _plan() -> MetricPlan:
    return MetricPlan(["turn_relevancy"], resolve_judge(model=ScriptedChatModel(default=YES), cache=False))


def test_a_conversation_not_finished_in_a_pass_is_neither_counted_nor_passed_on():
    """judge_one's None (a Batch API request still waiting) leaves the conversation for a later pass."""
    seen: list[str] = []

    async def judge_one(item: LoadedConversation) -> ConversationOutcome | None:
        return None if item.conversation.id == "c1" else ConversationOutcome(item.conversation.id, item.source)

    summary = asyncio.run(evaluate_async([_item(i) for i in range(3)], _plan(), judge_one=judge_one,
                                         on_outcome=lambda o: seen.append(o.conversation_id)))
    assert sorted(seen) == ["c0", "c2"] and summary.conversations == 2
    assert [o.position for o in summary.rows] == [0, 2]  # input places, the unfinished one's kept free


def test_a_run_that_could_not_finish_says_why_exits_3_and_writes_no_summary(tmp_path):
    """The summary's ``problem`` is typed on every run (cli/eval read a batch's through getattr)."""
    assert RunSummary(conversations=1, problem="batch b1 failed").exit_code == 3
    assert not RunSummary(unfinished=2).complete and RunSummary().complete

    async def passes(run: OpenRun, stop: asyncio.Event):
        yield None
        run.summary.problem = "batch b1 expired"

    out = tmp_path / "out.jsonl"
    summary = asyncio.run(evaluate_to_file([_item(0)], _plan(), out, answering=passes))
    assert summary.exit_code == 3 and summary.conversations == 1
    assert '"type": "summary"' not in out.read_text()  # finished by its --resume


def test_passes_read_the_inputs_again_and_skip_what_an_earlier_pass_wrote(tmp_path):
    """Answering over several passes (as the Batch API does): each pass reads the inputs again, input errors are
    said once, and a conversation written is not judged again."""
    (tmp_path / "in.jsonl").write_text('{"id": "a", "turns": [{"role": "user", "content": "hi"}, '
                                       '{"role": "assistant", "content": "hello"}]}\nnot json\n', encoding="utf-8")
    judged: list[str] = []

    async def judge_one(item: LoadedConversation) -> ConversationOutcome | None:
        judged.append(item.conversation.id)
        return ConversationOutcome(item.conversation.id, item.source)

    async def passes(run: OpenRun, stop: asyncio.Event):
        for _ in range(3):
            yield judge_one

    errors: list[object] = []
    summary = asyncio.run(evaluate_to_file([tmp_path / "in.jsonl"], _plan(), tmp_path / "out.jsonl",
                                           answering=passes, on_input_error=errors.append))
    assert judged == ["a"] and len(errors) == 1 and summary.input_error_count == 1 and summary.conversations == 1


def test_watch_runs_in_the_runners_loop_a_pass_per_poll(tmp_path, loop_passes):
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from judgegraph.runs.watch import CheckpointerThreads, Remembered, Watch
    from tests.kit.agent import build_agent

    saver = InMemorySaver()
    build_agent(saver).invoke({"messages": [HumanMessage("Weather in Paris?")]}, {"configurable": {"thread_id": "t"}})
    watch = Watch(CheckpointerThreads(saver, "memory"), _plan(), tmp_path / "w.jsonl", Remembered(tmp_path / "s.db"),
                  idle=0, interval=0.01, max_polls=3)
    summary = asyncio.run(watch.run(asyncio.Event()))
    watch.remembered.close()
    assert loop_passes == [3] and summary.conversations == 1


@pytest.mark.parametrize("mode", ["w", "a"])
def test_the_writer_copies_a_line_byte_for_byte_with_surrogateescape(tmp_path, mode):
    from judgegraph.runs.resultsfile import ResultsWriter

    raw = b'{"type": "note", "text": "caf\xe9"}\n'
    writer = ResultsWriter(tmp_path / "r.jsonl", mode=mode, errors="surrogateescape")
    writer.write({"type": "header"})
    writer.copy(raw.decode("utf-8", errors="surrogateescape").rstrip("\n"))
    writer.close()
    assert (tmp_path / "r.jsonl").read_bytes() == b'{"type": "header"}\n' + raw
