"""Verdict fields read what real servers send (judgegraph.data.answers)."""

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, BeforeValidator, ValidationError

from judgegraph.data.answers import YesNo, leading_choice, read_choice
from judgegraph.metrics.relevancy import TurnVerdict


class Guideline(BaseModel):
    verdict: Annotated[Literal["yes", "no", "not_applicable"],
                       BeforeValidator(read_choice(("yes", "no", "not_applicable"), {"n/a": "not_applicable"}))]


class Frustration(BaseModel):
    verdict: Annotated[Literal["none", "resolved", "unresolved"],
                       BeforeValidator(read_choice(("none", "resolved", "unresolved")))]


@pytest.mark.parametrize("raw,read", [
    ("yes", "yes"), (" Yes ", "yes"), ("YES.", "yes"), ("No, this is off-topic.", "no"), ("no - it ignores it", "no"),
])
def test_yes_no_as_servers_send_it(raw, read):
    assert TurnVerdict(reason="r", verdict=raw).verdict == read


@pytest.mark.parametrize("raw", ["nope", "Note: relevant", "maybe", "", "y"])
def test_anything_else_is_still_invalid_and_re_asked(raw):
    class M(BaseModel):
        verdict: YesNo

    with pytest.raises(ValidationError):
        M(verdict=raw)


@pytest.mark.parametrize("raw,read", [
    ("not applicable", "not_applicable"), ("Not-Applicable", "not_applicable"), ("N/A", "not_applicable"),
    ("No, turn 4 breaks it.", "no"),
])
def test_multi_word_choices_and_aliases(raw, read):
    assert Guideline(verdict=raw).verdict == read


def test_a_longer_choice_wins_over_its_prefix():
    assert Frustration(verdict="None. The user stays calm.").verdict == "none"
    assert Frustration(verdict="Unresolved: they leave angry").verdict == "unresolved"


ANSWER_WORDS = [  # (text, the answer read)
    ("no", "no"), ("No.", "no"), ("No,", "no"), ("No, this is off-topic.", "no"), ("No - it ignores the question", "no"),
    ("No -- off-topic", "no"), ("No: it talks about Paris.", "no"), ("No!", "no"), ("No; the reply is off-topic", "no"),
    ("No—it talks about Paris.", "no"), ("**No** - about Paris", "no"), ('"no", it is off-topic', "no"),
    ("No\nThe reply is about Paris.", "no"), ("NO.", "no"), ("Yes.", "yes"), ("yes", "yes"), ("Yes, it answers.", "yes"),
]
IDIOMS = [  # a leading word that is not the answer: never read, the judge is re-asked
    "No doubt, the reply is fully relevant.", "No problem here: the reply is relevant.", "No question: it answers.",
    "No doubt", "Not only relevant but helpful.", "No-brainer: it is relevant.", "No/yes", "No? It is relevant.",
    "Yes and no.", "Nothing wrong here.", "Yes it answers",
]


@pytest.mark.parametrize("text, read", ANSWER_WORDS)
def test_a_leading_answer_word_is_read(text, read):
    assert leading_choice(text, ("yes", "no")) == read
    assert TurnVerdict(reason="r", verdict=text).verdict == read


@pytest.mark.parametrize("text", IDIOMS)
def test_an_idiom_that_starts_with_the_word_is_no_verdict(text):
    assert leading_choice(text, ("yes", "no")) is None
    with pytest.raises(ValidationError):
        TurnVerdict(reason="r", verdict=text)


def test_none_of_is_no_frustration_verdict_but_none_is():
    assert Frustration(verdict="None, the user stays calm.").verdict == "none"
    with pytest.raises(ValidationError):
        Frustration(verdict="None of the turns is resolved")
