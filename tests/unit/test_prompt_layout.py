"""Judge prompts are laid out for provider prefix caches (docs/cost_cache.md): the instructions first, the
data last, so the calls of one conversation share the longest possible byte-identical prefix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from judgegraph.data.prompts import PLACEHOLDER, load_prompt, prompt_dirs

#: Prompts that are not one judge request: the aligned judge's preamble (the request follows it), the rubric
#: (a value), and the custom judge's template (the author's instructions; the data is appended to it).
NOT_REQUESTS = {"align/preamble", "turn_relevancy/rubric", "custom_judge/judge_conversation"}


def _steps() -> list[str]:
    root = next(d for d in prompt_dirs() if d.is_dir())
    return sorted(str(p.relative_to(root).with_suffix("")) for p in Path(root).glob("*/*.md"))


@pytest.mark.parametrize("step", [s for s in _steps() if s not in NOT_REQUESTS])
def test_a_prompt_ends_with_its_data(step):
    """Nothing but a closing tag (or the rest of the line holding the last value) follows the data: no
    instruction is sent after it."""
    template = load_prompt(step).template
    last = list(PLACEHOLDER.finditer(template))[-1]
    after = template[last.end():]
    assert re.fullmatch(r"[^\n<]*\s*(</[a-z_]+>\s*)?", after), f"{step}: text after the data: {after!r}"


def test_the_changing_value_comes_after_the_shared_ones():
    """The guideline (changes per call) after the conversation (shared by every guideline); the criterion after
    the two conversations; the window's own messages after the rubric and the system instructions."""
    order = {
        "conversational_guidelines/judge_guideline": ("conversation", "guideline"),
        "pairwise/judge_pair": ("conversation_b", "criterion"),
        "turn_relevancy/judge_turn": ("system", "context", "user_message", "reply"),
        "simulated_user/simulate_user": ("conversation", "turns_left"),
    }
    for step, names in order.items():
        found = [m.group(1) for m in PLACEHOLDER.finditer(load_prompt(step).template)]
        positions = [len(found) - 1 - found[::-1].index(n) for n in names]
        assert positions == sorted(positions), (step, found)
