"""judgegraph's own format: ``{id, turns, expected_outcome, chatbot_role, metadata}``.
Unknown keys are errors (with a "did you mean" hint): a typo must not pass."""

from __future__ import annotations

from typing import Any

from judgegraph.data.conversation import Conversation

from ..base import Ctx, RecordErrors, check_keys, clean_id, pick, validate

JUDGEGRAPH_KEYS = ("id", "turns", "expected_outcome", "chatbot_role", "metadata")
JUDGEGRAPH_TURN_KEYS = ("role", "content", "retrieval_context", "tool_calls", "metadata")


def from_judgegraph(rec: dict[str, Any], ctx: Ctx) -> tuple[Conversation, dict[str, Any]]:
    # unknown keys first, with a "did you mean" hint (pydantic only says "extra")
    problems = check_keys(rec, [*JUDGEGRAPH_KEYS, "conversation_id"], ())
    data = {k: v for k, v in rec.items() if k in JUDGEGRAPH_KEYS}
    id_key, id_value = pick(rec, (), "id", "conversation_id")
    data["id"] = clean_id(id_value, ctx, (id_key or "id",))
    if isinstance(turns := rec.get("turns"), list):
        data["turns"] = [{k: v for k, v in t.items() if k in JUDGEGRAPH_TURN_KEYS} if isinstance(t, dict) else t
                         for t in turns]
        problems += [p for i, t in enumerate(turns) if isinstance(t, dict)
                     for p in check_keys(t, JUDGEGRAPH_TURN_KEYS, ("turns", i))]
    try:
        conv = validate(data, [(("id",), (id_key or "id",))])
    except RecordErrors as exc:
        raise RecordErrors(problems + exc.problems) from None
    if problems:
        raise RecordErrors(problems)
    return conv, {}
