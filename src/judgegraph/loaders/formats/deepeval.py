"""deepeval ``ConversationalTestCase`` dicts (snake_case and camelCase keys)."""

from __future__ import annotations

import re
from typing import Any

from judgegraph.data.conversation import Conversation

from ..base import Ctx, Path_, RecordErrors, check_keys, clean_id, metadata, pick, validate
from .judgegraph import JUDGEGRAPH_KEYS, JUDGEGRAPH_TURN_KEYS


def _both_spellings(*keys: str) -> dict[str, str | None]:
    """deepeval keys kept in the metadata, in snake_case and camelCase, each mapped to its metadata key."""
    def camel(key: str) -> str:
        return key if key.startswith("_") else re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)

    return {spelling: key.lstrip("_") for key in keys for spelling in (key, camel(key))}


# deepeval keys that judgegraph's own format does not have, mapped to the metadata key they are kept under
# (None: converted, not kept as metadata); deepeval 4's model_dump() writes the flags, kept only when set.
DEEPEVAL_CASE_KEYS: dict[str, str | None] = {
    **dict.fromkeys(("name", "expectedOutcome", "chatbotRole", "additional_metadata", "additionalMetadata")),
    **_both_spellings("scenario", "user_description", "context", "comments", "tags", "mcp_servers", "multimodal",
                      "voice", "flaky", "expected_labels", "_dataset_rank", "_dataset_alias", "_dataset_id"),
}
DEEPEVAL_TURN_KEYS: dict[str, str | None] = {
    **dict.fromkeys(("retrievalContext", "tools_called", "toolsCalled", "additional_metadata", "additionalMetadata")),
    **_both_spellings("user_id", "mcp_tools_called", "mcp_resources_called", "mcp_prompts_called", "audio",
                      "latency_ms", "interrupted"),
}


def _deepeval_tool(raw: object, path: Path_) -> object:  # a non-object is left for validation to report
    if not isinstance(raw, dict):
        return raw
    names = ("input_parameters", "inputParameters", "arguments")
    _, args = pick(raw, path, *names)
    out = {k: v for k, v in raw.items() if k not in names}
    return out if args is None else {**out, "arguments": args}


def _metadata(obj: dict[str, Any], path: Path_, fields: dict[str, str | None]) -> dict[str, Any]:
    """``metadata`` and ``additional_metadata`` merged, plus the deepeval-only ``fields`` that are set."""
    meta = metadata(obj.get("metadata"), path + ("metadata",))
    _, extra = pick(obj, path, "additional_metadata", "additionalMetadata")
    meta.update(metadata(extra, path + ("additional_metadata",)))
    meta.update((key, obj[name]) for name, key in fields.items()
                if key and obj.get(name) is not None and obj[name] is not False)
    return meta


def from_deepeval(rec: dict[str, Any], ctx: Ctx) -> tuple[Conversation, dict[str, Any]]:
    problems = check_keys(rec, [*JUDGEGRAPH_KEYS, "conversation_id", *DEEPEVAL_CASE_KEYS], ())
    if problems:
        raise RecordErrors(problems)
    meta = _metadata(rec, (), DEEPEVAL_CASE_KEYS)
    id_key, id_value = pick(rec, (), "id", "conversation_id")
    if id_value in (None, "") and rec.get("name") not in (None, ""):
        id_key, id_value = "name", rec["name"]
    elif rec.get("name") not in (None, ""):
        meta["name"] = rec["name"]
    data: dict[str, Any] = {"id": clean_id(id_value, ctx, (id_key or "id",))}
    renames: list[tuple[Path_, Path_]] = [(("id",), (id_key or "id",))]
    for name, camel in (("expected_outcome", "expectedOutcome"), ("chatbot_role", "chatbotRole")):
        key, value = pick(rec, (), name, camel)
        if key:
            data[name] = value
            renames.append(((name,), (key,)))
    data["metadata"] = meta

    turns = rec.get("turns")
    if isinstance(turns, list):
        allowed = [*JUDGEGRAPH_TURN_KEYS, *DEEPEVAL_TURN_KEYS]
        out_turns: list[Any] = []
        for i, turn in enumerate(turns):
            if not isinstance(turn, dict):
                out_turns.append(turn)
                continue
            path = ("turns", i)
            problems.extend(check_keys(turn, allowed, path))
            t: dict[str, Any] = {k: turn[k] for k in ("role", "content") if k in turn}
            t["metadata"] = _metadata(turn, path, DEEPEVAL_TURN_KEYS)
            key, value = pick(turn, path, "retrieval_context", "retrievalContext")
            if key:
                t["retrieval_context"] = value
                renames.append((path + ("retrieval_context",), path + (key,)))
            key, value = pick(turn, path, "tool_calls", "tools_called", "toolsCalled")
            if key:
                renames.append((path + ("tool_calls",), path + (key,)))
                if isinstance(value, list):
                    value = [_deepeval_tool(v, path + (key, j)) for j, v in enumerate(value)]
                t["tool_calls"] = value
            out_turns.append(t)
        data["turns"] = out_turns
    elif "turns" in rec:
        data["turns"] = turns
    if problems:
        raise RecordErrors(problems)
    return validate(data, renames), {}
