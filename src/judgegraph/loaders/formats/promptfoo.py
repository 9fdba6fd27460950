"""promptfoo tests: ``vars._conversation`` (or a single prompt/output) and the
``conversation-relevance`` assertion's options."""

from __future__ import annotations

import json
import re
from typing import Any

from judgegraph.conversation import Conversation

from ..base import Ctx, Path_, RecordErrors, check_keys, fail, merge_meta, validate

PROMPTFOO_TEST_KEYS = ("vars", "assert", "description", "output", "options", "provider", "threshold")
# ---- promptfoo

ASSERTION_TYPE = "conversation-relevance"
_TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def _render_prompt(template: str, variables: dict[str, Any]) -> str:
    """Replace ``{{name}}`` / ``{{ name }}`` with the variable's value, in one pass.

    Substituted values are never rendered again, so ``{{ env.SECRET }}`` inside a
    value stays literal; placeholders naming unknown variables are left as-is.
    """

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return _as_text(variables[name]) if name in variables else match.group(0)

    return _TEMPLATE_VAR.sub(sub, template)


def _provider_id(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("id"), str):
            return value["id"]
        if "text" in value:
            return _provider_id(value["text"])
    return None


def _assertion_options(asserts: Any, path: Path_) -> dict[str, Any] | None:
    """Options of the first conversation-relevance assertion in a list (None: no such assertion)."""
    if not isinstance(asserts, list):
        return None
    for j, a in enumerate(asserts):
        if not (isinstance(a, dict) and a.get("type") == ASSERTION_TYPE):
            continue
        p = path + (j,)
        opts: dict[str, Any] = {"metric": "conversation_relevance"}
        if "threshold" in a and a["threshold"] is not None:
            t = a["threshold"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 1:
                raise fail(p + ("threshold",), f"threshold must be a number between 0 and 1 (got {t!r})")
            opts["threshold"] = float(t)
        config = a.get("config")
        if config is not None and not isinstance(config, dict):
            raise fail(p + ("config",), "must be an object")
        window = (config or {}).get("windowSize")
        if window is not None:
            if isinstance(window, bool) or not isinstance(window, int) or window < 1:
                raise fail(p + ("config", "windowSize"), f"windowSize must be a positive integer (got {window!r})")
            opts["window_size"] = window
        if a.get("rubricPrompt") is not None:
            opts["rubric"] = _as_text(a["rubricPrompt"])
        model = _provider_id(a.get("provider"))
        if model:
            opts["model"] = model
        return opts
    return None


def level_options(level: dict[str, Any], path: Path_) -> dict[str, Any]:
    """Options a test (or defaultTest) gives: its assertion plus options.provider/rubricPrompt."""
    opts = _assertion_options(level.get("assert"), path + ("assert",)) or {}
    extra = level.get("options")
    if isinstance(extra, dict):
        model = _provider_id(extra.get("provider"))
        if model:
            opts.setdefault("model", model)
        if extra.get("rubricPrompt") is not None:
            opts.setdefault("rubric", _as_text(extra["rubricPrompt"]))
    return opts


def _first_prompt(doc: dict[str, Any] | None) -> str | None:
    if not doc:
        return None
    prompts = doc.get("prompts")
    if isinstance(prompts, (str, dict)):
        prompts = [prompts]
    if not isinstance(prompts, list) or not prompts:
        return None
    first = prompts[0]
    if isinstance(first, dict):
        first = first.get("raw")
    if not isinstance(first, str) or first.startswith("file://"):
        return None
    return first


def from_promptfoo(rec: dict[str, Any], ctx: Ctx) -> tuple[Conversation, dict[str, Any]]:
    doc = ctx.doc or {}
    default = doc.get("defaultTest") if isinstance(doc.get("defaultTest"), dict) else {}
    test_vars = rec.get("vars", {})
    if test_vars is None:
        test_vars = {}
    if not isinstance(test_vars, dict):
        raise fail(("vars",), f"vars must be an object (got {type(test_vars).__name__})")
    dvars = default.get("vars") if isinstance(default.get("vars"), dict) else {}
    variables = {**dvars, **test_vars}
    index = ctx.prefix[-1] if ctx.prefix else ctx.record

    turns: list[dict[str, Any]] = []
    renames: list[tuple[Path_, Path_]] = []
    if "_conversation" in variables:
        conv = variables["_conversation"]
        cpath: Path_ = ("vars", "_conversation")
        if not isinstance(conv, list):
            raise fail(cpath, f"_conversation must be a list of {{input, output}} (got {type(conv).__name__})")
        if not conv:
            raise fail(cpath, "a conversation needs at least one exchange")
        problems: list[tuple[Path_, str]] = []
        for k, ex in enumerate(conv):
            if not isinstance(ex, dict):
                problems.append((cpath + (k,), f"an exchange must be an object with input and output (got {type(ex).__name__})"))
                continue
            for side, role in (("input", "user"), ("output", "assistant")):
                if side not in ex:
                    problems.append((cpath + (k, side), "Field required"))
                elif not isinstance(ex[side], str):
                    problems.append((cpath + (k, side), f"Input should be a valid string (got {type(ex[side]).__name__})"))
                else:
                    renames.append((("turns", len(turns)), cpath + (k, side)))
                    turns.append({"role": role, "content": ex[side]})
            problems.extend(check_keys(ex, ("input", "output", "metadata"), cpath + (k,)))
        if problems:
            raise RecordErrors(problems)
    else:
        if "output" in test_vars:
            out_path, output = ("vars", "output"), test_vars["output"]
        elif "output" in rec:
            out_path, output = ("output",), rec["output"]
        else:
            raise fail(("vars", "output"), (
                f"test {index} has no conversation and no output: give vars._conversation "
                "(a list of {input, output}) or an output (vars.output) with a prompt"
            ))
        if not isinstance(output, str):
            raise fail(out_path, f"output must be a string (got {type(output).__name__})")
        prompt_key = next((k for k in ("prompt", "input", "query") if k in variables), None)
        if prompt_key is not None:
            prompt, prompt_path = variables[prompt_key], ("vars", prompt_key)
            if not isinstance(prompt, str):
                raise fail(prompt_path, f"{prompt_key} must be a string (got {type(prompt).__name__})")
        else:
            template = _first_prompt(ctx.doc)
            if template is None:
                raise fail(("vars", "prompt"), (
                    f"test {index} has an output but no prompt: give vars.prompt "
                    "(or vars.input / vars.query) or a prompts entry in the file"
                ))
            prompt, prompt_path = _render_prompt(template, variables), ("vars",)
        turns = [{"role": "user", "content": prompt}, {"role": "assistant", "content": output}]
        renames = [(("turns", 0), prompt_path), (("turns", 1), out_path)]

    # options: test assertion > defaultTest assertion, field by field
    options = level_options(default, ("defaultTest",)) if default else {}
    for key, value in level_options(rec, ()).items():
        options[key] = value

    meta: dict[str, Any] = {}
    merge_meta(meta, rec.get("metadata"), ("metadata",))
    description = rec.get("description")
    if description is not None:
        meta["description"] = description
    other_vars = {k: v for k, v in variables.items() if k not in ("_conversation", "output")}
    if other_vars:
        meta["vars"] = other_vars
    conv_id = ctx.fallback_id
    if isinstance(description, str) and _slug(description):
        conv_id = _slug(description)
    data = {"id": conv_id, "turns": turns, "metadata": meta}
    return validate(data, renames), options
