"""Every capability of tests/unit/test_capabilities.py, run again over the metrics that have a dense
mode (judgegraph.core._dense) with ``dense=2``: verdicts with transcripts, review, re-judging (one verdict: one
call for its window alone), the latest scope, the dry run."""

from __future__ import annotations

import pytest
import test_capabilities as caps
from metric_cases import CONVERSATION, Case, model

from judgegraph.data.conversation import as_conversation
from judgegraph.metrics import get_metric
from judgegraph.outputs.transcripts import transcript_of
from judgegraph.steering import rejudge_result


def dense_case(name: str) -> Case:
    return Case(name, lambda model, **kw: get_metric(name).factory(model=model, dense=2, **kw), {"dense": 2},
                windowed=True)


DENSE = [dense_case("turn_relevancy"), dense_case("conversation_relevance")]
CAPABILITIES = [caps.test_review_pauses_with_every_verdict_then_scores_the_person_s_decision,
                caps.test_rejudging_one_verdict_pays_only_for_it,
                caps.test_rejudging_a_checkpointed_thread,
                caps.test_the_latest_scope_judges_only_the_latest_exchange_where_the_metric_is_per_exchange,
                caps.test_the_dry_run_estimates_the_calls_the_run_makes,
                caps.test_a_turn_has_one_number_in_the_review_payload_ids_show_and_reasons]


@pytest.mark.parametrize("capability", CAPABILITIES, ids=[c.__name__ for c in CAPABILITIES])
@pytest.mark.parametrize("case", DENSE, ids=[c.name for c in DENSE])
def test_every_capability_in_dense_mode(case, capability):
    capability(case)


@pytest.mark.parametrize("case", DENSE, ids=[c.name for c in DENSE])
def test_dense_mode_makes_fewer_calls_and_rejudges_one_window_alone(case):
    m, _, res = caps.run(case)
    assert m.call_count == 2 and len(res.verdicts) == 3  # 3 windows, 2 per call
    assert all(a.shared for v in res.verdicts for a in v.transcript)
    assert res.details["dense"] == 2  # the mode is recorded: a re-judge from the results file keeps it
    again = model("no")
    chosen = res.verdicts[0]
    new = rejudge_result(res.model_dump(mode="json"), as_conversation(CONVERSATION), model=again,
                         verdict_ids=[chosen.id])
    assert again.call_count == 1 and new.details["rejudged"]["verdicts"] == [chosen.id]
    assert "<items>" in again.prompts[0] and '"item": 2' not in again.prompts[0]  # its window alone, densely
    assert {v.id: v.verdict for v in new.verdicts} == {v.id: ("no" if v.id == chosen.id else v.verdict)
                                                      for v in res.verdicts}


@pytest.mark.parametrize("case", DENSE, ids=[c.name for c in DENSE])
def test_every_dense_request_is_kept_on_each_of_its_verdicts_and_shown_once(case):
    """The capability of test_capabilities.test_every_request_behind_a_result_is_kept_and_shown, for dense mode:
    a request shared by several verdicts is on each (marked shared), and printed in full once."""
    m, _, res = caps.run(case)
    kept = caps.attempts(res)
    assert m.call_count == len({a.request for a in kept}) == 2 and all(a.shared and a.request for a in kept)
    for prompt in m.prompts:
        assert any(all(msg["content"] in prompt for msg in a.messages) for a in kept)
    shown = transcript_of(res.model_dump(mode="json"))
    assert shown.count("[reply]") == 2 and shown.count("shared: one request for several verdicts") == 2
    assert "shared with other verdicts, shown above" in shown
    for v in res.verdicts:
        assert f"reason: {v.reason}" in shown


def test_a_jury_votes_on_each_window_of_a_dense_call():
    from judgegraph.judges import resolve_judge
    from judgegraph.metrics.relevancy import create_turn_relevancy_metric

    jurors = [model("yes"), model("no"), model("yes")]
    res = create_turn_relevancy_metric(model=resolve_judge(jurors), dense=2).invoke(
        {"conversation": CONVERSATION})["results"]["turn_relevancy"]
    assert [j.call_count for j in jurors] == [2, 2, 2] and res.usage.calls == 6
    assert [v.verdict for v in res.verdicts] == ["yes"] * 3
    assert all([x.verdict for x in v.votes] == ["yes", "no", "yes"] for v in res.verdicts)
