"""``--batch`` is a capability of every metric: for each capability case (tests/unit/metric_cases.py),
``eval --batch`` through the loopback server's fake Batch API gives the results of a live ``eval``, and
sends no chat request outside a batch."""

from __future__ import annotations

import json

import pytest

from judgegraph.cli import main
from tests.integration.test_capabilities_cli import metric_args, responder
from tests.kit.openai_server import FakeOpenAIServer
from tests.unit.metric_cases import CASES, CONVERSATION, IDS, ROOT

pytestmark = pytest.mark.integration


def judged(path):
    (record,) = [r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())
                 if r["type"] == "conversation"]
    return {name: (r["status"], r["score"], [v["verdict"] for v in r["verdicts"]], r["usage"]["calls"],
                   r["usage"]["input_tokens"], len(r["errors"])) for name, r in record["results"].items()}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_batch_eval_gives_the_results_of_a_live_eval(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT))
    conv = tmp_path / "chats.jsonl"
    conv.write_text(json.dumps(CONVERSATION) + "\n", encoding="utf-8")
    metric = metric_args(case.name, tmp_path)
    runs = {}
    for mode in ("live", "batch"):
        with FakeOpenAIServer(responder("yes"), batch_polls=0) as server:
            flags = ["--batch", "--batch-poll", "0.01"] if mode == "batch" else []
            out = tmp_path / f"{mode}.jsonl"
            code = main(["eval", str(conv), *metric, "--model", "gpt-4.1-mini", "--base-url", server.base_url,
                         "--no-cache", "--out", str(out), "-q", "--no-progress", *flags])
            assert code in (0, 1)
            runs[mode] = judged(out), len(server.chat_requests), server.batches.created
    (live, live_calls, _), (batch, batch_calls, batches) = runs["live"], runs["batch"]
    assert batch == live
    assert batch_calls == 0 and batches >= 1 and live_calls > 0
