"""Where a judge prompt is cut for Anthropic's ``cache_control`` (judgegraph.judges.cache_hints,
docs/cost_cache.md): at the start of the template's last section, found on the template (conversation content
cannot move it), the two parts giving back the rendered prompt exactly; only ChatAnthropic gets the blocks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from judgegraph.data.prompts import PLACEHOLDER, Prompt, load_prompt, parse_prompt
from judgegraph.judges.cache_hints import SeenPrefixes, prompt_message, split_rendered, stable_boundary
from tests.unit.metric_cases import model as scripted_model
from tests.unit.test_prompt_layout import NOT_REQUESTS, _steps


def values_for(prompt: Prompt) -> dict[str, str]:
    return {name: f"value of {name}" for name in prompt.placeholders}


def test_turn_relevancy_is_cut_before_the_reply_to_judge():
    prompt = load_prompt("turn_relevancy/judge_turn")
    values = values_for(prompt) | {"context": "[user]\nHi\n<reply_to_judge>\nnot the real section\n</reply_to_judge>"}
    rendered = prompt.render(values)
    parts = split_rendered(prompt, values, rendered)
    assert parts is not None
    stable, changing = parts
    assert changing == "<reply_to_judge>\nvalue of reply\n</reply_to_judge>\n"
    assert "value of user_message" in stable and "not the real section" in stable  # the data's tag moves nothing
    assert stable + changing == rendered


@pytest.mark.parametrize("step", [s for s in _steps() if s not in NOT_REQUESTS])
def test_every_judge_prompt_has_a_stable_part_and_splits_back_to_itself(step):
    prompt = load_prompt(step)
    values = values_for(prompt)
    rendered = prompt.render(values)
    parts = split_rendered(prompt, values, rendered)
    assert parts is not None, step
    stable, changing = parts
    assert stable + changing == rendered and stable.strip() and changing.strip()
    last = list(PLACEHOLDER.finditer(prompt.template))[-1].group(1)
    assert f"value of {last}" in changing and f"value of {last}" not in stable  # what changes is in the last block


def test_templates_without_a_stable_part_are_not_cut():
    assert stable_boundary("no placeholder at all\n") is None
    assert stable_boundary("<data>\n{{ x }}\n</data>\n") is None  # nothing precedes the last section
    assert stable_boundary("Judge this.\n\nThe value: {{ x }}\n") == len("Judge this.\n\n")  # no section: its line


def test_a_part_that_would_be_only_whitespace_is_not_cut():
    """Anthropic refuses a text block holding only whitespace: such a prompt goes as one string."""
    prompt = parse_prompt("t", "Instructions.\n\n{{ x }}\n")
    assert split_rendered(prompt, {"x": ""}, prompt.render({"x": ""})) is None
    assert split_rendered(prompt, {"x": "y"}, prompt.render({"x": "y"})) == ("Instructions.\n\n", "y\n")


def test_other_models_get_the_prompt_as_one_string():
    prompt = parse_prompt("t", "Instructions.\n\n<data>\n{{ x }}\n</data>\n")
    rendered = prompt.render({"x": "y"})
    message = prompt_message(scripted_model(), prompt, {"x": "y"}, rendered)
    assert message.content == rendered


def test_anthropic_gets_the_stable_block_marked():
    anthropic = pytest.importorskip("langchain_anthropic")
    prompt = parse_prompt("t", "Instructions.\n\n<data>\n{{ x }}\n</data>\n")
    rendered = prompt.render({"x": "y"})
    claude = anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="dummy", base_url="http://127.0.0.1:9")
    message = prompt_message(claude, prompt, {"x": "y"}, rendered)
    assert message.content == [{"type": "text", "text": "Instructions.\n\n", "cache_control": {"type": "ephemeral"}},
                               {"type": "text", "text": "<data>\ny\n</data>\n"}]
    assert message.text == rendered


def test_a_stable_part_is_marked_from_its_second_sending():
    """No cache write (billed at 1.25 x the input price) for a prefix no other call has sent."""
    anthropic = pytest.importorskip("langchain_anthropic")
    prompt = parse_prompt("t", "Instructions.\n\n<data>\n{{ x }}\n</data>\n")
    claude = anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="dummy", base_url="http://127.0.0.1:9")
    seen = SeenPrefixes()
    marks = [prompt_message(claude, prompt, {"x": x}, prompt.render({"x": x}), seen).content[0].get("cache_control")
             for x in ("a", "b", "c")]
    assert marks == [None, {"type": "ephemeral"}, {"type": "ephemeral"}]
    other = parse_prompt("u", "Other instructions.\n\n<data>\n{{ x }}\n</data>\n")
    assert "cache_control" not in prompt_message(claude, other, {"x": "a"}, other.render({"x": "a"}), seen).content[0]
    small = SeenPrefixes(limit=1)
    assert [small.sent_before(t) for t in ("p", "p", "q", "p")] == [False, True, False, False]  # forgets when full


def test_the_judge_does_not_import_langchain_anthropic():
    code = "import sys, judgegraph.judges.llm, judgegraph.judges.cache_hints; print('langchain_anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"
