"""Canned judge answers for the demo (``canned_answers.json``), so the policy
judge runs end to end with no model and no key: as a loopback OpenAI-compatible
server's responder (``run.py``) or as a scripted chat model (the tests).
Extraction answers are keyed by the reply, checks by the claim."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NO_ANSWER = "no canned answer for this prompt: pass --model to judge your own data"


@lru_cache(maxsize=1)
def answers() -> dict[str, Any]:
    return json.loads((HERE / "canned_answers.json").read_text(encoding="utf-8"))


def _section(text: str, tag: str) -> str | None:
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    return m.group(1) if m else None


def canned_answer(prompt: str) -> dict[str, Any] | None:
    """The structured answer for a policy-judge prompt, or None."""
    claim = _section(prompt, "claim")
    if claim is not None:
        return answers()["checks"].get(claim)
    reply = _section(prompt, "reply")
    if reply is not None and reply in answers()["claims"]:
        return {"claims": answers()["claims"][reply]}
    return None


def responder():
    """A ``ScriptedResponder`` for ``FakeOpenAIServer`` answering from the canned file."""
    from judgegraph.testing.openai_server import ScriptedResponder, structured, text

    def respond(request):
        answer = canned_answer(request.text)
        return text(NO_ANSWER) if answer is None else structured(answer)

    return ScriptedResponder(default=respond)


def scripted_model(**overrides: Any):
    """A ``ScriptedChatModel`` answering from the canned file; ``overrides``
    maps a prompt substring to replies that win over the canned answers."""
    from judgegraph.testing.fake_chat import ScriptedChatModel

    rules: list[tuple[Any, list[Any]]] = [(key, list(replies)) for key, replies in overrides.items()]
    for reply, claims in answers()["claims"].items():
        rules.append((f"<reply>\n{reply}\n</reply>", [{"claims": claims}]))
    for claim, check in answers()["checks"].items():
        rules.append((f"<claim>\n{claim}\n</claim>", [check]))
    return ScriptedChatModel(rules=rules, default=NO_ANSWER)
