"""promptfoo tests: ``vars._conversation`` (or a single prompt/output) and the ``conversation-relevance``
assertion's options; and promptfoo's rule for a result, applied after the metric has run: a ``not-`` assertion, marked
``negate: True`` by the loader (plain data, picklable), inverts it (:func:`result_transform`)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from judgegraph.core.scoring import check_threshold, check_whole
from judgegraph.data.conversation import Conversation
from judgegraph.data.results import MetricResult

from ..base import Ctx, Path_, RecordErrors, check_keys, fail, metadata, validate
from ..limits import FileTooLarge, NotARegularFile, read_small_file

PROMPTFOO_TEST_KEYS = ("vars", "assert", "description", "output", "options", "provider", "threshold")
ASSERTION_TYPE = "conversation-relevance"
_TEMPLATE_VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80]


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def _render_prompt(template: str, variables: dict[str, Any]) -> str:
    """``{{name}}`` / ``{{ name }}`` replaced by the variable's value in one pass (a value is never rendered again);
    unknown names left as they are."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return _as_text(variables[name]) if name in variables else match.group(0)

    return _TEMPLATE_VAR.sub(sub, template)


def _provider_id(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("id"), str):
            return value["id"]
        if "text" in value:
            return _provider_id(value["text"])
    return None


NEGATED_TYPE = "not-" + ASSERTION_TYPE
_ANY_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)


def _read_rubric(value: Any, path: Path_, ctx: Ctx, variables: dict[str, Any]) -> str:
    """A ``rubricPrompt`` (``file://`` read from the config file's folder), the test's vars filled in one pass; a
    placeholder that cannot be filled (``{{ messages }}``) is refused, never sent with its braces."""
    text = _as_text(value)
    if text.startswith("file://"):
        if ctx.folder is None:
            raise fail(path, "a file:// rubricPrompt needs the config file's folder")
        text = _read_file(text[len("file://"):], path, ctx)
    unfilled = _TEMPLATE_VAR.sub(lambda m: "" if m.group(1) in variables else m.group(0), text)
    left = _ANY_TEMPLATE.search(unfilled)  # looked for in the template, never in the values filled in
    if left:
        raise fail(path, (
            f"rubricPrompt uses the template {left.group(0)!r}, which judgegraph does not fill: the rubric is the "
            "judging criteria only (the conversation window is given to the judge separately, so drop "
            "{{ messages }} / {{ output }}); test vars such as {{ topic }} are filled in one pass"
        ))
    return _render_prompt(text, variables)


def _read_file(ref: str, path: Path_, ctx: Ctx) -> str:
    assert ctx.folder is not None
    folder = ctx.folder.resolve()
    target = (folder / ref).resolve()
    if not ctx.allow_outside_files and not target.is_relative_to(folder):
        raise fail(path, (
            f"file://{ref} leaves the folder of {ctx.file} ({folder}): refused; pass --allow-outside-files "
            "(or set JUDGEGRAPH_ALLOW_OUTSIDE_FILES=1) to allow it"
        ))
    try:  # never blocks (a FIFO), never holds more than the limit (a huge file)
        data = read_small_file(target, ctx.limits.max_record_chars)
    except NotARegularFile as exc:
        raise fail(path, f"file://{ref} {exc}: refused") from None
    except FileTooLarge as exc:
        size = f" ({exc.size:,} bytes)" if exc.size is not None else ""
        raise fail(path, f"file://{ref} is larger than {ctx.limits.max_record_chars:,} bytes{size}: refused") from None
    except OSError as exc:
        raise fail(path, f"cannot read file://{ref}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise fail(path, f"file://{ref} is not valid UTF-8") from None


def _option(check: Callable[[Any, str], float], value: object, path: Path_) -> float:
    """``value`` checked as a metric checks its options (one message), the error at its file, line and field."""
    try:
        return check(value, str(path[-1]))
    except ValueError as exc:
        raise fail(path, str(exc)) from None


def _assertions(asserts: object, path: Path_, ctx: Ctx,
                variables: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (not-)conversation-relevance assertion of a list, in order, as options."""
    if not isinstance(asserts, list):
        return []
    out: list[dict[str, Any]] = []
    for j, a in enumerate(asserts):
        if not (isinstance(a, dict) and a.get("type") in (ASSERTION_TYPE, NEGATED_TYPE)):
            continue
        p = path + (j,)
        opts: dict[str, Any] = {"metric": "conversation_relevance"}
        if a["type"] == NEGATED_TYPE:
            opts["negate"] = True
        if a.get("threshold") is not None:
            opts["threshold"] = _option(check_threshold, a["threshold"], p + ("threshold",))
        config = a.get("config")
        if config is not None and not isinstance(config, dict):
            raise fail(p + ("config",), "must be an object")
        window = (config or {}).get("windowSize")
        if window is not None:
            opts["window_size"] = _option(check_whole, window, p + ("config", "windowSize"))
        out.append({**opts, **_judge_options(a, p, ctx, variables)})
    return out


def _judge_options(obj: object, path: Path_, ctx: Ctx, variables: dict[str, Any]) -> dict[str, Any]:
    """The ``provider`` / ``rubricPrompt`` of an assertion or of a level's ``options``, as ``model`` / ``rubric``."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        if model := _provider_id(obj.get("provider")):
            out["model"] = model
        if obj.get("rubricPrompt") is not None:
            out["rubric"] = _read_rubric(obj["rubricPrompt"], path + ("rubricPrompt",), ctx, variables)
    return out


def test_assertions(rec: dict[str, Any], default: dict[str, Any], ctx: Ctx,
                    variables: dict[str, Any]) -> list[dict[str, Any]]:
    """The assertions a test runs, as promptfoo 0.121.20 runs them: ``defaultTest``'s then the test's own
    (``prepareTestCaseForEval``) unless ``options.disableDefaultAsserts``; ``options`` merged key by key, the test's
    winning, an assertion's own ``provider`` / ``rubricPrompt`` over both (``getFinalTest``). Result keys: the metric's
    name, ``not-conversation-relevance`` when negated, ``#2``, ``#3`` ... after repeats."""
    own_options = rec.get("options")
    skip_default = isinstance(own_options, dict) and own_options.get("disableDefaultAsserts") is True
    found = [] if skip_default else _assertions(default.get("assert"), ("defaultTest", "assert"), ctx, variables)
    found += _assertions(rec.get("assert"), ("assert",), ctx, variables)
    extra = {**_judge_options(default.get("options"), ("defaultTest", "options"), ctx, variables),
             **_judge_options(rec.get("options"), ("options",), ctx, variables)}
    chosen = [{**extra, **a} for a in found or [{}]]
    seen: dict[str, int] = {}
    for opts in chosen:
        kind = NEGATED_TYPE if opts.get("negate") else ASSERTION_TYPE
        seen[kind] = seen.get(kind, 0) + 1
        if opts.get("negate") or seen[kind] > 1:
            opts["key"] = kind if seen[kind] == 1 else f"{kind}#{seen[kind]}"
    return chosen


def _first_prompt(doc: dict[str, Any] | None) -> str | None:
    prompts = (doc or {}).get("prompts")
    if isinstance(prompts, (str, dict)):
        prompts = [prompts]
    first = prompts[0] if isinstance(prompts, list) and prompts else None
    if isinstance(first, dict):
        first = first.get("raw")
    return first if isinstance(first, str) and not first.startswith("file://") else None


def from_promptfoo(rec: dict[str, Any], ctx: Ctx) -> tuple[Conversation, dict[str, Any]]:
    doc = ctx.doc or {}
    default: dict[str, Any] = doc["defaultTest"] if isinstance(doc.get("defaultTest"), dict) else {}
    test_vars = {} if rec.get("vars") is None else rec["vars"]
    if not isinstance(test_vars, dict):
        raise fail(("vars",), f"vars must be an object (got {type(test_vars).__name__})")
    dvars: dict[str, Any] = default["vars"] if isinstance(default.get("vars"), dict) else {}
    variables = {**dvars, **test_vars}
    index = ctx.prefix[-1] if ctx.prefix else ctx.record

    turns: list[dict[str, Any]] = []
    renames: list[tuple[Path_, Path_]] = []
    conv = variables.get("_conversation")
    if conv is not None and conv != []:  # promptfoo: an empty (or absent) conversation means the single turn
        cpath: Path_ = ("vars", "_conversation")
        if not isinstance(conv, list):
            raise fail(cpath, f"_conversation must be a list of {{input, output}} (got {type(conv).__name__})")
        problems: list[tuple[Path_, str]] = []
        for k, ex in enumerate(conv):
            if not isinstance(ex, dict):
                problems.append((cpath + (k,), (
                    f"an exchange must be an object with input and output (got {type(ex).__name__})")))
                continue
            problems.extend(check_keys(ex, ("input", "prompt", "output", "metadata"), cpath + (k,)))
            # promptfoo's own items carry the rendered `prompt`; `input` (when given) is the user's message
            side_in = "input" if "input" in ex else "prompt" if "prompt" in ex else None
            for side, role in ((side_in, "user"), ("output", "assistant")):
                if side is None or side not in ex:
                    problems.append((cpath + (k, side or "input"), "Field required (input, or promptfoo's prompt)"
                                     if role == "user" else "Field required"))
                    continue
                value = ex[side]
                if isinstance(value, (dict, list)):  # an object output (or chat prompt) as promptfoo shows it
                    value = json.dumps(value, ensure_ascii=False)
                if not isinstance(value, str):
                    problems.append((cpath + (k, side), f"Input should be a valid string (got {type(value).__name__})"))
                    continue
                renames.append((("turns", len(turns)), cpath + (k, side)))
                turns.append({"role": role, "content": value})
        if problems:
            raise RecordErrors(problems)
    else:
        if "output" in test_vars:
            out_path: Path_ = ("vars", "output")
            output = test_vars["output"]
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
            prompt: Any = variables[prompt_key]
            prompt_path: Path_ = ("vars", prompt_key)
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

    # defaultTest's assertions, then the test's own: every one runs, as in promptfoo
    assertions = test_assertions(rec, default, ctx, variables)
    options = {**assertions[0], "assertions": assertions}

    meta = metadata(rec.get("metadata"), ("metadata",))
    description = rec.get("description")
    if description is not None:
        meta["description"] = description
    other_vars = {k: v for k, v in variables.items() if k not in ("_conversation", "output")}
    if other_vars:
        meta["vars"] = other_vars
    conv_id = (_slug(description) if isinstance(description, str) else "") or ctx.fallback_id
    data = {"id": conv_id, "turns": turns, "metadata": meta}
    return validate(data, renames), options


#: A function applied to a metric's result before it is written (e.g. promptfoo's negation).
ResultTransform = Callable[[MetricResult], MetricResult]


def negate_result(result: MetricResult) -> MetricResult:
    """A negated assertion's result: passes only when the score is strictly below the threshold (promptfoo 0.121.20:
    ``pass = (score >= threshold - EPSILON) !== inverse``), the score becoming ``1 - score``. A result not judged
    (error, not applicable, no score) is never flipped into a pass: returned as is, its reason saying so."""
    note = f"negated assertion {result.key!r}"
    if result.status in ("error", "not_applicable") or result.score is None or result.threshold is None:
        return result.model_copy(update={"reason": f"{note}: not flipped ({result.status}); {result.reason}",
                                         "details": {**result.details, "negated": True}})
    passed = not result.score >= result.threshold - sys.float_info.epsilon  # promptfoo's Number.EPSILON
    return result.model_copy(update={
        "score": 1.0 - result.score,
        "passed": passed,
        "status": "passed" if passed else "failed",
        "reason": (f"{note}: passes when the metric's score {result.score:.2f} is below the threshold "
                   f"{result.threshold:g} — {'it is' if passed else 'it is not'}; the metric said: {result.reason}"),
        "details": {**result.details, "negated": True, "metric_score": result.score, "metric_passed": result.passed},
    })


def result_transform(assertion: Mapping[str, Any]) -> ResultTransform | None:
    """What to apply to the result of an input file's assertion
    (:attr:`~judgegraph.loaders.LoadedConversation.assertions`): :func:`negate_result` for a ``not-`` one, else None."""
    return negate_result if assertion.get("negate") else None
