"""ragas samples: ``SingleTurnSample`` (``user_input``/``response``/``retrieved_contexts``,
or the older ``question``/``answer``/``contexts``) and ``MultiTurnSample``."""

from __future__ import annotations

from typing import Any

from judgegraph.data.conversation import Conversation

from ..base import Ctx, Path_, RecordErrors, check_keys, clean_id, fail, metadata, pick, validate

# ragas SingleTurnSample / MultiTurnSample keys (and the older 0.1 names), mapped to
# the metadata key they are kept under (None: converted, not kept as metadata).
RAGAS_KEYS: dict[str, str | None] = {
    "user_input": None, "question": None,
    "response": None, "answer": None,
    "retrieved_contexts": None, "contexts": None,
    "id": None, "metadata": None,
    "reference": "reference", "ground_truth": "ground_truth", "ground_truths": "ground_truths",
    "reference_contexts": "reference_contexts", "retrieved_context_ids": "retrieved_context_ids",
    "reference_context_ids": "reference_context_ids", "multi_responses": "multi_responses",
    "rubrics": "rubrics", "persona_name": "persona_name", "query_style": "query_style",
    "query_length": "query_length", "reference_tool_calls": "reference_tool_calls",
    "reference_topics": "reference_topics",
}
#: A record is a ragas sample when it has one of these (and no turns, messages or promptfoo key).
RAGAS_DETECT_KEYS = ("user_input", "response", "retrieved_contexts", "question", "answer", "contexts")
RAGAS_MESSAGE_KEYS = ("type", "content", "metadata", "tool_calls")
RAGAS_TYPES = {"human": "user", "ai": "assistant", "tool": "tool"}


def _ragas_messages(messages: list[Any], path: Path_) -> tuple[list[dict[str, Any]], list[tuple[Path_, Path_]]]:
    """A MultiTurnSample's ``user_input``: ragas messages ``{type: human|ai|tool, content, ...}``."""
    problems: list[tuple[Path_, str]] = []
    turns: list[dict[str, Any]] = []
    renames: list[tuple[Path_, Path_]] = []
    for i, msg in enumerate(messages):
        mpath = path + (i,)
        if not isinstance(msg, dict):
            problems.append((mpath, f"a message must be an object (got {type(msg).__name__})"))
            continue
        problems.extend(check_keys(msg, RAGAS_MESSAGE_KEYS, mpath))
        kind = msg.get("type")
        if kind not in RAGAS_TYPES:
            problems.append((mpath + ("type",), "Field required" if "type" not in msg else
                             f"unknown message type {kind!r}; expected one of " + ", ".join(RAGAS_TYPES)))
            continue
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
            problems.append((mpath + ("tool_calls",), "must be a list of {name, args}"))
            continue
        tool_calls = [{"name": c["name"], "arguments": c.get("args", c.get("arguments"))} for c in calls]
        renames.append((("turns", len(turns)), mpath))
        turns.append({"role": RAGAS_TYPES[kind], "content": msg.get("content"), "tool_calls": tool_calls,
                      "metadata": msg.get("metadata") or {}})
    if problems:
        raise RecordErrors(problems)
    return turns, renames


def from_ragas(rec: dict[str, Any], ctx: Ctx) -> tuple[Conversation, dict[str, Any]]:
    """A ragas sample: single-turn (a user turn, an assistant turn holding ``retrieved_contexts``) or multi-turn (a turn
    per message of ``user_input``); its other fields (``reference``, ...) kept in the metadata."""
    problems = check_keys(rec, RAGAS_KEYS, ())
    if problems:
        raise RecordErrors(problems)
    meta = metadata(rec.get("metadata"), ("metadata",))
    for key, meta_key in RAGAS_KEYS.items():
        if meta_key and rec.get(key) is not None:
            meta[meta_key] = rec[key]
    ukey, user = pick(rec, (), "user_input", "question")
    rkey, response = pick(rec, (), "response", "answer")
    ckey, contexts = pick(rec, (), "retrieved_contexts", "contexts")
    if ukey is None:
        raise fail(("user_input",), "Field required (the user's message; 'question' in older ragas)")
    if isinstance(user, list):
        problems += [((unused,), "not used with a multi-turn user_input (a list of messages): the replies are its 'ai'"
                      " messages") for unused in (rkey, ckey) if unused is not None]
        if problems:
            raise RecordErrors(problems)
        if not user:
            raise fail((ukey,), "a conversation needs at least one message")
        turns, renames = _ragas_messages(user, (ukey,))
    else:
        if not isinstance(user, str):
            problems.append(((ukey,), f"Input should be a valid string or a list of messages (got {type(user).__name__})"))
        if rkey is None:
            problems.append((("response",), "Field required (the assistant's reply; 'answer' in older ragas)"))
        elif not isinstance(response, str):
            problems.append(((rkey,), f"Input should be a valid string (got {type(response).__name__})"))
        if ckey is not None and contexts is not None:
            if not isinstance(contexts, list):
                problems.append(((ckey,), f"must be a list of strings (got {type(contexts).__name__})"))
            else:
                problems.extend(((ckey, j), f"must be a non-empty string (got {type(c).__name__ if not isinstance(c, str) else 'an empty string'})")
                                for j, c in enumerate(contexts) if not isinstance(c, str) or not c.strip())
        if problems:
            raise RecordErrors(problems)
        turns = [{"role": "user", "content": user},
                 {"role": "assistant", "content": response, "retrieval_context": list(contexts or [])}]
        renames = [(("turns", 0, "content"), (ukey,))]
        if rkey is not None:  # always: a missing reply is reported above
            renames.append((("turns", 1, "content"), (rkey,)))
        if ckey:
            renames.append((("turns", 1, "retrieval_context"), (ckey,)))
    data = {"id": clean_id(rec.get("id"), ctx, ("id",)), "turns": turns, "metadata": meta}
    return validate(data, renames), {}
