"""The one options model and the one scoring engine (judgegraph.core.scoring)."""

from __future__ import annotations

import pytest
from metric_cases import CASES, CONVERSATION, IDS, answer, model

from judgegraph.core.scoring import ScoringPolicy, check_threshold, share_reason
from judgegraph.data.results import JudgeErrorInfo, Usage, Verdict

BUILT_IN = [c for c in CASES if c.name not in ("resolves_issue", "reply_language")]
BUILT_IN_IDS = [c.name for c in BUILT_IN]
WINDOWED = [c for c in BUILT_IN if c.name in ("turn_relevancy", "conversation_relevance", "turn_contextual_relevancy")]


# -- one options model: every metric checks its shared options the same way, when it is made ----------------------


@pytest.mark.parametrize("case", BUILT_IN, ids=BUILT_IN_IDS)
@pytest.mark.parametrize("option,value,message", [
    ("threshold", True, "threshold must be a number between 0 and 1, got True"),
    ("threshold", "0.5", "threshold must be a number between 0 and 1, got '0.5'"),
    ("threshold", 1.5, "threshold must be between 0 and 1, got 1.5"),
    ("threshold", float("nan"), "threshold must be between 0 and 1, got nan"),
    ("strict_mode", "yes", "strict_mode must be True or False, got 'yes'"),
    ("review", 1, "review must be True or False, got 1"),
    ("min_judged", 1.5, "min_judged must be between 0 and 1, got 1.5"),
    ("name", " ", "name must be a non-empty string, got ' '"),
])
def test_every_metric_rejects_a_bad_shared_option_with_the_same_clear_error(case, option, value, message):
    with pytest.raises(ValueError) as caught:
        case.build(model(), **{option: value})
    assert str(caught.value) == message


@pytest.mark.parametrize("case", WINDOWED, ids=[c.name for c in WINDOWED])
@pytest.mark.parametrize("value", [0, 2.5, True])
def test_every_windowed_metric_rejects_a_bad_window_size(case, value):
    with pytest.raises(ValueError, match=f"window_size must be a whole number >= 1, got {value!r}"):
        case.build(model(), window_size=value)


def test_check_threshold_names_the_option_it_checks():
    assert check_threshold(1) == 1.0 and isinstance(check_threshold(1), float)
    with pytest.raises(ValueError, match="--threshold must be between 0 and 1, got -0.1"):
        check_threshold(-0.1, "--threshold")


# -- one scoring engine --------------------------------------------------------------------------------------------


def V(verdict, turn=0, **kw):
    return Verdict(verdict=verdict, turns=[turn], reason=kw.pop("reason", f"r{turn}."), usage=Usage(calls=1), **kw)


def test_counted_labels_leave_other_answers_out_of_the_score_and_the_errors():
    policy = ScoringPolicy("m", "j", 0.5, counted=frozenset({"yes", "no"}), step="m/step",
                           reason=share_reason("things fine", bad="Not fine", unit="thing(s) "),
                           value=lambda t: "yes" if not t.bad else "no")
    res = policy.result("c", [V("yes", 1), V("not_applicable", 2), V("no", 3), V(None, 4, error="boom")])
    assert (res.score, res.status, res.value, res.usage.calls) == (0.5, "passed", "no", 4)
    assert [(e.where, e.step, e.message) for e in res.errors] == [("turn 5", "m/step", "boom")]
    assert res.reason == ("1 of 2 things fine (score 0.50 >= threshold 0.50). Not fine: turn 4: r3. "
                          "Judged 2 of 3 verdicts; 1 judge errors.")


def test_an_error_before_any_verdict_is_an_error_result_with_its_own_reason():
    policy = ScoringPolicy("m", "j", 0.5, reason=share_reason("x", bad="y", empty="Nothing asked.",
                                                              failed="The requests could not be extracted."))
    extraction = JudgeErrorInfo(where="conversation", step="m/extract", message="bad output")
    failed = policy.result("c", policy.tally([], [extraction]), usage=Usage(calls=2))
    assert (failed.status, failed.score, failed.reason, failed.usage.calls) == (
        "error", None, "The requests could not be extracted.", 2)
    assert failed.errors == [extraction]
    empty = policy.result("c", [])
    assert (empty.status, empty.reason) == ("not_applicable", "Nothing asked.")


def test_strict_mode_reports_and_gates_the_strict_score():
    policy = ScoringPolicy("m", "j", 0.3, strict_mode=True, reason=lambda t: f"{t.score}/{t.threshold}/{t.raw}")
    res = policy.result("c", [V("yes"), V("no")])
    assert (res.score, res.threshold, res.status, res.reason) == (0.0, 1.0, "failed", "0.0/1.0/0.5")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_metric_says_how_many_verdicts_were_judged_and_min_judged_turns_too_few_into_an_error(case):
    """A score from a few verdicts while the others are judge errors says so ("Judged 2 of 3 verdicts; 1 judge
    errors."), and ``min_judged`` above the judged share makes the result an error, never passed or failed."""
    from judgegraph import ScriptedChatModel

    def reply(request):  # every request showing the last exchange is answered with nothing valid: a judge error
        return {} if "ship to Lyon" in request.text else answer("yes")(request)

    got = {m: case.build(ScriptedChatModel(default=reply), min_judged=m).invoke({"conversation": CONVERSATION})
           ["results"][case.name] for m in (None, 0.5, 0.9)}
    failed = sum(v.verdict is None for v in got[None].verdicts)
    judged = sum(v.verdict is not None for v in got[None].verdicts)
    if case.windowed:
        assert judged and failed  # the exchanges before the last one were judged
    if judged and failed:
        note = f"Judged {judged} of {judged + failed} verdicts; {failed} judge errors."
        assert note in got[None].reason and note in got[0.5].reason
        assert got[None].status in ("passed", "failed") and got[0.5].status == got[None].status
        assert got[0.9].status == "error" and got[0.9].score is None and "Below min_judged 0.9" in got[0.9].reason
    else:  # all or nothing judged: min_judged changes nothing
        assert got[0.9].status == got[0.5].status == got[None].status
