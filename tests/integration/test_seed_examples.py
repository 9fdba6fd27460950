"""The seed docs' worked examples score what the docs imply, with the offline judge (no LLM)
and through the CLI's own path (loader options, report graph)."""

import asyncio
from pathlib import Path

import pytest

from judgegraph.judges import resolve_judge
from judgegraph.loaders import load_file
from judgegraph.runs.runner import MetricPlan, evaluate_async

pytestmark = pytest.mark.integration
SEEDS = Path(__file__).resolve().parents[1] / "data" / "seed_examples.yaml"


def test_seed_examples_with_the_offline_judge():
    loaded = load_file(SEEDS)
    assert not loaded.errors and len(loaded.conversations) == 4
    summary = asyncio.run(evaluate_async(loaded.conversations, MetricPlan(None, resolve_judge())))
    by_id = {o.conversation_id: o.results["conversation_relevance"] for o in summary.outcomes}
    for item in loaded.conversations:
        result = by_id[item.conversation.id]
        assert result.score == pytest.approx(item.conversation.metadata["expected_score"]), (item.conversation.id, result.reason)
        assert result.threshold == item.options["threshold"]
    off = by_id["off-topic-answer"]
    assert off.passed is False and [v.verdict for v in off.verdicts] == ["yes", "no", "yes"]
    assert off.details["window_size"] == 2 and by_id["trip-to-japan"].details["window_size"] == 3
    assert all(r.passed for k, r in by_id.items() if k != "off-topic-answer")
