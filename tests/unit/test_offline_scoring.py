"""The offline judge's relevance rule (judgegraph.judges.offline_scoring).

Arithmetic is checked with a fake ``encode`` (fixed vectors per text); one test
runs the real all-MiniLM-L6-v2 embedder on the TEST split of the labelled set
and fails if accuracy drops below the measured value minus 0.02.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from judgegraph.data.conversation import Conversation
from judgegraph.judges import offline_scoring as rule
from judgegraph.judges.offline_scoring import (
    CONTEXT_WEIGHT,
    DEFAULT_THRESHOLD,
    FOLLOWUP_MAX_WORDS,
    MAX_CONTEXT_CHARS,
    RULE,
    followup_query,
    previous_assistant,
    relevance_score,
)

ROOT = Path(__file__).resolve().parents[2]
CALIBRATE = ROOT / "benchmarks" / "calibrate_offline_judge.py"
DATA = ROOT / "benchmarks" / "data" / "relevance_labelled.jsonl"

# Measured by benchmarks/calibrate_offline_judge.py (rule "followup" at 0.29):
# test split 133/170 correct, balanced accuracy 0.756.
MEASURED_TEST_ACCURACY = 0.782
MEASURED_TEST_BALANCED_ACCURACY = 0.756


def _load_calibration():
    name = "calibrate_offline_judge"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, CALIBRATE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


class FakeEncode:
    """encode() with fixed vectors per text; records every call."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self.vectors[t] for t in texts])


# -- arithmetic with a fake encoder ------------------------------------------------------


def test_long_message_is_plain_cosine_in_one_call() -> None:
    user = "How do I cancel my streaming add-on subscription?"  # > FOLLOWUP_MAX_WORDS words
    enc = FakeEncode({"R": unit(1, 0, 0), user: unit(0.6, 0.8, 0), "prev": unit(1, 0, 0)})
    score = relevance_score(enc, "R", user, ["user: hi", "assistant: prev"])
    assert score == pytest.approx(0.6, abs=1e-6)
    assert enc.calls == [["R", user]]  # context not used for a self-contained message


def test_short_followup_uses_previous_assistant_message() -> None:
    query = "Shall I order a replacement card?\nyes please"
    enc = FakeEncode({"R": unit(1, 0, 0), "yes please": unit(0.1, 1, 0), query: unit(0.9, 0, 0.1)})
    context = ["user: I lost my card", "assistant: Shall I order a replacement card?"]
    score = relevance_score(enc, "R", "yes please", context)
    cos_user = float(unit(0.1, 1, 0) @ unit(1, 0, 0))
    cos_query = float(unit(0.9, 0, 0.1) @ unit(1, 0, 0))
    assert score == pytest.approx(max(cos_user, CONTEXT_WEIGHT * cos_query), abs=1e-6)
    assert score == pytest.approx(CONTEXT_WEIGHT * cos_query, abs=1e-6)
    assert enc.calls == [["R", "yes please", query]]  # all texts in ONE call


def test_short_followup_keeps_direct_similarity_when_higher() -> None:
    query = "Something unrelated.\nthanks!"
    enc = FakeEncode({"R": unit(1, 0), "thanks!": unit(1, 0.2), query: unit(0, 1)})
    score = relevance_score(enc, "R", "thanks!", ["assistant: Something unrelated."])
    assert score == pytest.approx(float(unit(1, 0.2) @ unit(1, 0)), abs=1e-6)
    assert len(enc.calls) == 1


def test_word_limit_boundary() -> None:
    five = " ".join(["w"] * FOLLOWUP_MAX_WORDS)
    six = " ".join(["w"] * (FOLLOWUP_MAX_WORDS + 1))
    vecs = {"R": unit(1, 0), five: unit(0, 1), six: unit(0, 1), f"P\n{five}": unit(1, 0), f"P\n{six}": unit(1, 0)}
    enc = FakeEncode(vecs)
    assert relevance_score(enc, "R", five, ["assistant: P"]) == pytest.approx(CONTEXT_WEIGHT)
    assert relevance_score(enc, "R", six, ["assistant: P"]) == pytest.approx(0.0, abs=1e-6)
    assert enc.calls == [["R", five, f"P\n{five}"], ["R", six]]


def test_followup_without_assistant_in_context_is_plain_cosine() -> None:
    enc = FakeEncode({"R": unit(1, 1), "why?": unit(1, 0)})
    score = relevance_score(enc, "R", "why?", ["user: an earlier message", "tool: output"])
    assert score == pytest.approx(float(unit(1, 1) @ unit(1, 0)), abs=1e-6)
    assert enc.calls == [["R", "why?"]]


def test_previous_assistant_is_the_last_assistant_entry() -> None:
    context = ["user: a", "assistant: first", "user: b", "assistant: second: with a colon", "tool: t", "user: c"]
    assert previous_assistant(context) == "second: with a colon"
    assert previous_assistant(["user: only"]) == ""
    assert previous_assistant([]) == ""


def test_long_previous_message_is_cut_so_the_followup_survives() -> None:
    previous = "word " * 1000
    query = followup_query(previous.strip(), "the first one")
    assert query.endswith("\nthe first one")
    assert len(query) <= MAX_CONTEXT_CHARS + len("\nthe first one")
    assert not query.startswith(" ")


def test_edge_cases_need_no_encoding() -> None:
    def boom(texts: list[str]) -> np.ndarray:
        raise AssertionError("encode must not be called")

    assert relevance_score(boom, "   ", "hello", []) == 0.0
    assert relevance_score(boom, "Hi, how can I help?", "", []) == 1.0  # assistant spoke first


def test_encode_returning_wrong_row_count_is_an_error() -> None:
    with pytest.raises(ValueError):
        relevance_score(lambda texts: np.ones((1, 3), dtype=np.float32), "R", "a question here please now", [])


def test_results_publish_the_rule_and_threshold_really_used() -> None:
    for options, shown in (({}, "relevant when >= 0.29"), ({"threshold": 0.42}, "relevant when >= 0.42")):
        res = _run({"on topic": 0.9}, **options)
        assert res.details["judge_rule"] == f"{RULE}; {shown}"


def test_threshold_decides_the_verdict() -> None:
    """Scores just above / below DEFAULT_THRESHOLD land on either side of it."""
    t = DEFAULT_THRESHOLD
    user = "a long enough user question to be self contained"
    above = unit(t + 0.01, np.sqrt(1 - (t + 0.01) ** 2))
    below = unit(t - 0.01, np.sqrt(1 - (t - 0.01) ** 2))
    enc = FakeEncode({user: unit(1, 0), "A": above, "B": below})
    assert relevance_score(enc, "A", user, []) >= t
    assert relevance_score(enc, "B", user, []) < t


class _Encoder:
    """Embeddings with an ``encode`` for the offline judge: fixed vectors per text."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.encode = FakeEncode(vectors)


def _run(replies: dict[str, float], **judge_options: float):
    """Turn relevancy with the offline judge, each reply at the given similarity to one long user question."""
    from judgegraph.judges.offline import EmbeddingJudge
    from judgegraph.metrics.relevancy import create_turn_relevancy_metric

    user = "a long enough user question to be self contained"
    vectors = {user: unit(1, 0), **{r: unit(s, np.sqrt(1 - s * s)) for r, s in replies.items()}}
    turns = [t for r in replies for t in ({"role": "user", "content": user}, {"role": "assistant", "content": r})]
    graph = create_turn_relevancy_metric(model=EmbeddingJudge(_Encoder(vectors), **judge_options))
    (res,) = graph.invoke({"conversation": {"id": "c", "turns": turns}})["results"].values()
    return res


def _verdicts(replies: dict[str, float], **judge_options: float) -> dict[str, str]:
    """Each reply's offline verdict when its similarity to one long user question is the given value."""
    res = _run(replies, **judge_options)
    replies_in_order = list(replies)
    return {replies_in_order[v.turns[-1] // 2]: v.verdict for v in res.verdicts}


def test_offline_judge_decides_at_the_calibrated_threshold() -> None:
    """The judge's verdicts flip at DEFAULT_THRESHOLD (the calibrated 0.29) unless another threshold is given."""
    assert DEFAULT_THRESHOLD == 0.29  # benchmarks/calibrate_offline_judge.py, dev split; change both together
    t = DEFAULT_THRESHOLD
    assert _verdicts({"above": t + 0.01, "below": t - 0.01}) == {"above": "yes", "below": "no"}
    assert _verdicts({"above": t + 0.01, "high": 0.51}, threshold=0.5) == {"above": "no", "high": "yes"}


# -- the labelled set and the calibration program's windows ----------------------------------


def test_labelled_set_shape() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    replies = [t for r in rows for t in r["turns"] if t["role"] == "assistant"]
    irrelevant = sum(t["metadata"]["label"] == "irrelevant" for t in replies)
    assert len(rows) >= 60 and len(replies) >= 240
    assert 0.30 <= irrelevant / len(replies) <= 0.40
    assert len({r["metadata"]["domain"] for r in rows}) >= 8
    assert {r["metadata"]["split"] for r in rows} == {"dev", "test"}
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        Conversation.model_validate(r)  # judgegraph's own format
        for t in r["turns"]:
            if t["role"] == "assistant":
                assert t["metadata"]["label"] in ("relevant", "irrelevant")
                assert t["metadata"]["case"]


def test_calibration_windows_mirror_the_library() -> None:
    from judgegraph.data.windows import sliding_windows

    cal = _load_calibration()
    for row in cal.load_conversations(DATA):
        mine = cal.windows(row, cal.WINDOW_SIZE)
        theirs = sliding_windows(Conversation.model_validate(row), cal.WINDOW_SIZE)
        assert len(mine) == len(theirs)
        for item, window in zip(mine, theirs):
            assert item.reply == window.target.reply_text
            assert item.latest_user == window.target.user_text
            assert list(item.context) == [f"{r}: {c}" for r, c in window.transcript()[: len(item.context)]]
            assert len(window.transcript()) == len(item.context) + len(window.target.user) + len(
                window.target.assistant
            )


# -- the real embedder ---------------------------------------------------------------------


@pytest.mark.slow
def test_accuracy_on_the_test_split_with_the_real_embedder() -> None:
    from judgegraph.embeddings.minilm import get_default_embeddings

    cal = _load_calibration()
    items = [it for it in cal.load_items(DATA) if it.split == "test"]
    assert len(items) >= 120
    encode = cal.CachedEncode(get_default_embeddings().encode)  # must load: no skip
    encode.prefetch([rule.relevance_score], items)
    m = cal.evaluate_chosen(encode, items, DEFAULT_THRESHOLD)
    assert m["acc"] >= MEASURED_TEST_ACCURACY - 0.02, m
    assert m["bal"] >= MEASURED_TEST_BALANCED_ACCURACY - 0.02, m
