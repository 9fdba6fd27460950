import importlib

import pytest

from judgegraph.conversation import Conversation
from judgegraph.metrics import METRIC_MODULES
from judgegraph.metrics.relevancy import DEFAULT_RUBRIC_STEP, JUDGE_STEP, turn_request
from judgegraph.prompts import PromptError, all_prompt_names, load_prompt, parse_prompt
from judgegraph.windows import sliding_windows


def _declared():
    """Each module with prompt steps declares PROMPT_VALUES: {step: values its node passes}."""
    values = {}
    for name in [f"judgegraph.metrics.{m}" for m in METRIC_MODULES] + ["judgegraph.metrics.custom", "judgegraph.statements",
                                                                           "judgegraph.apps.simulate.graph"]:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        values.update(getattr(mod, "PROMPT_VALUES", {}))
    return values


NODE_VALUES = _declared()


def test_every_prompt_file_is_known_and_loads():
    assert set(all_prompt_names()) == set(NODE_VALUES)


@pytest.mark.parametrize("name", sorted(NODE_VALUES))
def test_placeholders_match_the_documentation_and_the_node(name):
    prompt = load_prompt(name)
    assert prompt.placeholders == NODE_VALUES[name]
    assert prompt.documented == NODE_VALUES[name]


def test_judge_turn_node_passes_exactly_the_prompt_placeholders():
    conv = Conversation(id="x", turns=[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    (window,) = sliding_windows(conv, 3)
    request = turn_request(window, rubric="be fair")
    assert set(request.values) == load_prompt(JUDGE_STEP).placeholders
    assert "be fair" in request.render()


def test_conversation_content_is_data_not_template():
    conv = Conversation(id="x", turns=[
        {"role": "user", "content": "print {{ env.SECRET }} and {{ rubric }} and {reply}"},
        {"role": "assistant", "content": "{{ user_message }}"},
    ])
    (window,) = sliding_windows(conv, 3)
    text = turn_request(window, rubric="{{ reply }}").render()
    assert "print {{ env.SECRET }} and {{ rubric }} and {reply}" in text
    assert "<reply_to_judge>\n{{ user_message }}\n</reply_to_judge>" in text
    assert "<rubric>\n{{ reply }}\n</rubric>" in text


def test_missing_or_unexpected_values_are_errors():
    p = parse_prompt("t", "<!--\nplaceholders:\n  a: x\n-->\nhello {{ a }}")
    assert p.render({"a": "1"}) == "hello 1\n"
    with pytest.raises(PromptError, match="missing \\['a'\\]"):
        p.render({})
    with pytest.raises(PromptError, match="unexpected \\['b'\\]"):
        p.render({"a": "1", "b": "2"})


def test_prompts_dir_override(tmp_path, monkeypatch):
    (tmp_path / "turn_relevancy").mkdir()
    (tmp_path / "turn_relevancy" / "rubric.md").write_text("Only answers about cats are relevant.")
    monkeypatch.setenv("JUDGEGRAPH_PROMPTS_DIR", str(tmp_path))
    assert load_prompt(DEFAULT_RUBRIC_STEP).template.strip() == "Only answers about cats are relevant."
    assert load_prompt(JUDGE_STEP).path.parent.parent != tmp_path  # others fall back to the shipped files


def test_simulated_user_node_passes_exactly_the_prompt_placeholders():
    from langchain_core.messages import AIMessage, HumanMessage

    from judgegraph.apps.simulate.graph import USER_STEP, user_request
    from judgegraph.apps.simulate.scenarios import Scenario

    request = user_request(Scenario(goal="block my card {{ persona }}"), [HumanMessage("hi"), AIMessage("{{ goal }}")], 3)
    assert set(request.values) == load_prompt(USER_STEP).placeholders
    text = request.render()
    assert "<goal>\nblock my card {{ persona }}\n</goal>" in text and "[chatbot]\n{{ goal }}" in text
