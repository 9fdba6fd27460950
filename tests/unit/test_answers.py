"""Verdict fields read what real servers send (judgegraph.answers)."""

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, BeforeValidator, ValidationError

from judgegraph.answers import YesNo, read_choice
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
