"""Canned judge answers for the demo (``canned_answers.json``), so the policy
judge runs end to end with no model and no key, as a scripted chat model
(``run.py`` and the tests). Extraction answers are keyed by the reply, checks
by the claim."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NO_ANSWER = "no canned answer for this prompt: pass --model to judge your own data"


@lru_cache(maxsize=1)
def answers() -> dict[str, Any]:
    return json.loads((HERE / "canned_answers.json").read_text(encoding="utf-8"))


def scripted_model(**overrides: Any):
    """A ``ScriptedChatModel`` answering from the canned file; ``overrides``
    maps a prompt substring to replies that win over the canned answers."""
    from judgegraph import ScriptedChatModel

    rules: list[tuple[Any, list[Any]]] = [(key, list(replies)) for key, replies in overrides.items()]
    for reply, claims in answers()["claims"].items():
        rules.append((f"<reply>\n{reply}\n</reply>", [{"claims": claims}]))
    for claim, check in answers()["checks"].items():
        rules.append((f"<claim>\n{claim}\n</claim>", [check]))
    return ScriptedChatModel(rules=rules, default=NO_ANSWER)
