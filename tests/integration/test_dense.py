"""Dense mode (judgegraph.core._dense) through the real client path and the loopback server: one call
judges several windows, with the verdicts of the per-window mode; only failed items are asked again."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from langchain_openai import ChatOpenAI

from judgegraph.metrics.relevancy import create_conversation_relevance_metric, create_turn_relevancy_metric
from tests.kit import cli
from tests.kit.dense_answerer import MARK, RelevanceAnswerer
from tests.kit.openai_server import FakeOpenAIServer, error

EXCHANGES = 9


def conversation(c: int, exchanges: int = EXCHANGES) -> dict:
    turns = [{"role": "system", "content": "You are the support assistant of a phone shop."}]
    for e in range(exchanges):
        turns.append({"role": "user", "content": f"Chat {c}, question {e}: how long does delivery {e} take?"})
        reply = f"{MARK}: our garden has tulips." if (c * 5 + e) % 4 == 1 else f"Delivery {e} takes {e + 1} days."
        turns.append({"role": "assistant", "content": reply})
    return {"id": f"c{c}", "turns": turns}


def run(server: FakeOpenAIServer, conv: dict, *, dense: int | None, window_size: int = 4, factory=create_turn_relevancy_metric):
    llm = ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="test-key", max_retries=0)
    graph = factory(model=llm, window_size=window_size, dense=dense)
    (result,) = graph.invoke({"conversation": conv})["results"].values()
    return result


def verdicts(result) -> dict[str, str | None]:
    return {v.id: v.verdict for v in result.verdicts}


@pytest.mark.parametrize("factory", [create_turn_relevancy_metric, create_conversation_relevance_metric])
def test_dense_mode_gives_the_per_window_verdicts_in_fewer_calls(factory):
    for c in range(3):
        with FakeOpenAIServer(RelevanceAnswerer()) as server:
            per_window = run(server, conversation(c), dense=None, factory=factory)
            window_calls = server.calls["/v1/chat/completions"]
        answerer = RelevanceAnswerer()
        with FakeOpenAIServer(answerer) as server:
            dense = run(server, conversation(c), dense=4, factory=factory)
            dense_calls = server.calls["/v1/chat/completions"]
        assert verdicts(dense) == verdicts(per_window) and len(dense.verdicts) == EXCHANGES
        assert "no" in verdicts(dense).values() and "yes" in verdicts(dense).values()
        assert dense.score == per_window.score
        assert (window_calls, dense_calls) == (EXCHANGES, 3)  # blocks of 4, 4 and 1 windows
        assert sorted(answerer.dense_calls) == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]
        assert dense.usage.calls == dense_calls  # the shared request is counted once
        for v in dense.verdicts:  # its own id and reason, the shared request as its transcript
            assert v.reason and [a.shared for a in v.transcript] == [True]
            assert '"item"' in v.transcript[0].reply


def test_each_item_names_its_own_window_context():
    answerer = RelevanceAnswerer()
    with FakeOpenAIServer(answerer) as server:
        run(server, conversation(0), dense=4, window_size=3)
        prompts = [b["messages"][0]["content"] for b in server.requests if "messages" in b]
    first = next(p for p in prompts if '"exchange": 1,' in p)
    items = [json.loads(line) for line in re.search(r"<items>\n(.*?)\n</items>", first, re.S).group(1).splitlines()]
    assert [(i["exchange"], i["context_exchanges"]) for i in items] == [
        (1, "none"), (2, "1 to 1"), (3, "1 to 2"), (4, "2 to 3")]
    second = next(p for p in prompts if '"exchange": 5, "reply_turns"' in p)
    assert '"exchange": 2, "turn"' not in second and '"exchange": 3, "turn"' in second  # the span, each exchange once
    assert second.count('"exchange": 4, "turn"') == 2  # its user turn and its reply, once


def test_a_malformed_item_is_asked_again_alone():
    with FakeOpenAIServer(RelevanceAnswerer()) as server:
        expected = verdicts(run(server, conversation(1), dense=None))
    answerer = RelevanceAnswerer(break_exchanges={2})
    with FakeOpenAIServer(answerer) as server:
        dense = run(server, conversation(1), dense=4)
        calls = server.calls["/v1/chat/completions"]
    assert verdicts(dense) == expected and not dense.errors
    assert calls == 4 and [2] in answerer.dense_calls  # the three blocks, then item 2 alone
    again = next(v for v in dense.verdicts if v.id == "1")
    assert len(again.transcript) == 2 and all(a.shared for a in again.transcript)
    assert dense.usage.calls == calls


def test_missing_items_are_asked_again_together():
    with FakeOpenAIServer(RelevanceAnswerer()) as server:
        expected = verdicts(run(server, conversation(2), dense=None))
    answerer = RelevanceAnswerer(drop_exchanges={3, 4, 6})
    with FakeOpenAIServer(answerer) as server:
        dense = run(server, conversation(2), dense=4)
    assert verdicts(dense) == expected and not dense.errors
    assert sorted(answerer.dense_calls) == [[1, 2, 3, 4], [3, 4], [5, 6, 7, 8], [6], [9]]


def test_an_item_still_failing_is_a_judge_error_never_a_verdict():
    answerer = RelevanceAnswerer(break_exchanges={2}, drop_exchanges={6}, always=True)
    with FakeOpenAIServer(answerer) as server:
        dense = run(server, conversation(0), dense=4)
    failed = {v.id: v.error for v in dense.verdicts if v.verdict is None}
    assert set(failed) == {"1", "5"}
    assert "item 1 invalid: verdict" in failed["1"] and "exchange 2" in failed["1"]  # item 1 of the re-ask
    assert "item 1 missing" in failed["5"]  # in the re-ask, exchange 6 is item 1
    assert len(dense.errors) == 2 and dense.details["judged"] == EXCHANGES - 2
    judged = [v for v in dense.verdicts if v.verdict is not None]
    assert dense.score == pytest.approx(sum(v.verdict == "yes" for v in judged) / len(judged))


def test_a_failed_dense_call_is_a_judge_error_for_each_of_its_windows():
    with FakeOpenAIServer(lambda request: error(400, "bad request")) as server:
        dense = run(server, conversation(0, exchanges=5), dense=3)
    assert [v.verdict for v in dense.verdicts] == [None] * 5 and all(v.error for v in dense.verdicts)
    assert dense.score is None and len(dense.errors) == 5


def test_dense_is_refused_where_it_cannot_be():
    from judgegraph.cli import main

    with pytest.raises(ValueError, match="dense=N needs an LLM judge"):
        create_turn_relevancy_metric(dense=3)
    with pytest.raises(ValueError, match="dense must be a whole number"):
        create_turn_relevancy_metric(dense=0)
    assert main(["eval", "x.jsonl", "--dense", "3", "-m", "role-adherence", "--model", "openai:gpt-4.1-mini",
                 "--dry-run"]) == 2


def test_dry_run_counts_the_dense_calls_the_run_then_makes(tmp_path: Path, bare_env):
    chats = tmp_path / "chats.jsonl"
    chats.write_text("".join(json.dumps(conversation(c)) + "\n" for c in range(4)), encoding="utf-8")
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer(RelevanceAnswerer()) as server:
        args = ["eval", str(chats), "--model", "openai:gpt-4.1-mini",
                "--base-url", server.base_url, "--no-progress", "--window-size", "4", "--dense", "4", "--out", str(out)]
        dry = cli.run([*args, "--dry-run"], env=bare_env, timeout=120)
        assert dry.returncode == 0, dry.stderr
        assert server.calls["/v1/chat/completions"] == 0
        real = cli.run([*args, "-q"], env=bare_env, timeout=120)
        calls = server.calls["/v1/chat/completions"]
    assert real.returncode in (0, 1), real.stderr
    total = re.search(r"total\W+(\d+)\W+(\d+)\W+~(\d+)", dry.stdout)
    assert total, dry.stdout
    usage = [json.loads(line)["results"]["turn_relevancy"]["usage"] for line in out.read_text().splitlines()
             if '"results"' in line]
    assert int(total.group(1)) == calls == sum(u["calls"] for u in usage) == 4 * 3
    assert int(total.group(2)) == sum(u["input_tokens"] for u in usage)  # the same requests, counted alike
    assert int(total.group(3)) == 4 * EXCHANGES * 100  # output assumed per verdict, not per call


def test_a_custom_metric_taking_dense_gets_the_flag(tmp_path: Path, monkeypatch):
    from judgegraph.cli import main

    (tmp_path / "dense_judges.py").write_text(
        "from judgegraph.metrics.relevancy import create_turn_relevancy_metric\n\n"
        "def mine(model=None, window_size=4, dense=None):\n"
        "    return create_turn_relevancy_metric(model=model, window_size=window_size, dense=dense, name='mine')\n\n"
        "def plain(model=None):\n"
        "    return create_turn_relevancy_metric(model=model, name='plain')\n", encoding="utf-8")
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps(conversation(0)) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    answerer = RelevanceAnswerer()
    with FakeOpenAIServer(answerer) as server:
        common = [str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "--no-progress", "-q",
                  "--dense", "5", "--no-cache"]
        assert main(["eval", *common, "-m", "dense_judges:mine", "--out", str(tmp_path / "a.jsonl")]) in (0, 1)
        assert sorted(answerer.dense_calls) == [[1, 2, 3, 4, 5], [6, 7, 8, 9]]
        assert main(["eval", *common, "-m", "dense_judges:plain", "--out", str(tmp_path / "b.jsonl")]) == 2


def test_the_kit_server_answers_a_dense_run_per_item(tmp_path: Path):
    """The loopback server's default responder (``python -m tests.kit.openai_server``) answers each item, so
    ``eval --dense 3`` can be tried locally: every window judged, three windows a call."""
    from judgegraph.cli import main

    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps(conversation(0)) + "\n", encoding="utf-8")
    out = tmp_path / "r.jsonl"
    with FakeOpenAIServer() as server:
        code = main(["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "-q",
                     "--no-progress", "-m", "turn-relevancy", "--dense", "3", "--out", str(out)])
        calls = server.calls["/v1/chat/completions"]
    (line,) = [json.loads(x) for x in out.read_text().splitlines() if '"results"' in x]
    result = line["results"]["turn_relevancy"]
    assert code in (0, 1) and calls == 3  # 9 windows, 3 a call
    assert not result["errors"] and [v["verdict"] is not None for v in result["verdicts"]] == [True] * EXCHANGES


def test_an_answer_that_left_items_out_is_never_replayed_from_the_cache(tmp_path: Path):
    """A dense answer missing an item makes a judge error: it is not kept, so asking again (a new run or
    ``--resume --retry-errors``) asks that block again; the complete answers of the other blocks are replayed."""
    from judgegraph.cli import main

    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps(conversation(0)) + "\n", encoding="utf-8")
    answerer = RelevanceAnswerer(drop_exchanges={2}, always=True)
    with FakeOpenAIServer(answerer) as server:
        def run(*extra: str, out: str = "r.jsonl") -> tuple[int, int]:
            before = server.calls["/v1/chat/completions"]
            code = main(["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url, "-q",
                         "--no-progress", "-m", "turn-relevancy", "--dense", "3", "--cache", str(tmp_path / "c.sqlite"),
                         "--out", str(tmp_path / out), *extra])
            return code, server.calls["/v1/chat/completions"] - before

        assert run() == (3, 4)  # three blocks, one re-ask of the missing item: still missing, a judge error
        assert run(out="again.jsonl") == (3, 2)  # the first block and its re-ask asked again; the others replayed
        assert run("--resume", "--retry-errors") == (3, 2)
    assert sorted(answerer.dense_calls) == [[1, 2, 3]] * 3 + [[2]] * 3 + [[4, 5, 6]] + [[7, 8, 9]]


def test_min_judged_turns_a_score_from_too_few_windows_into_an_error(tmp_path: Path, capsys):
    """8 of 9 windows judged: the table and the reason say so; --min-judged 0.95 (or the config file's
    min_judged) makes the result an error (exit 3), 0.5 leaves it scored."""
    from judgegraph.cli import main

    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps(conversation(0)) + "\n", encoding="utf-8")
    with FakeOpenAIServer(RelevanceAnswerer(drop_exchanges={2}, always=True)) as server:
        def run(out: str, *extra: str) -> tuple[int, dict]:
            code = main(["eval", str(chats), "--model", "openai:gpt-4.1-mini", "--base-url", server.base_url,
                         "--no-progress", "-m", "turn-relevancy", "--dense", "3", "--out", str(tmp_path / out), *extra])
            (line,) = [json.loads(x) for x in (tmp_path / out).read_text().splitlines() if '"results"' in x]
            return code, line["results"]["turn_relevancy"]

        code, scored = run("a.jsonl", "--min-judged", "0.5")
        assert scored["status"] in ("passed", "failed") and scored["score"] is not None
        assert "Judged 8 of 9 verdicts; 1 judge errors." in scored["reason"]
        assert "judged 8 of 9; 1 judge errors" in " ".join(capsys.readouterr().out.split())
        code, refused = run("b.jsonl", "--min-judged", "0.95")
        assert (code, refused["status"], refused["score"]) == (3, "error", None)
        assert "Below min_judged 0.95" in refused["reason"]
        config = tmp_path / "judgegraph.yaml"
        config.write_text("options:\n  min_judged: 0.95\n", encoding="utf-8")
        code, refused = run("c.jsonl", "--config", str(config))
        assert (code, refused["status"]) == (3, "error")
    assert main(["eval", str(chats), "--min-judged", "2", "--dry-run"]) == 2
    assert "--min-judged must be between 0 and 1, got 2.0" in capsys.readouterr().err
