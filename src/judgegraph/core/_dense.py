"""Dense judge calls: one request returns the verdicts of several windows of one conversation (``dense=N``,
``--dense N``): a *block* of N consecutive windows is sent as the exchanges they span, once, and one *item* per
window; each item is read and validated alone, a failed one asked again with the block's other failed items.
How it works, and which metrics have it and why: docs/cost.md, "Dense mode".

    START → window_turns ─Send per block→ judge_dense → reduce_score → END
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from typing_extensions import TypedDict

from ..data.results import Usage, Verdict
from ..data.windows import Window
from ..judges.base import Judge, JudgeOutcome, JudgeRequest
from ..judges.schema_example import example_from_schema
from .nodes import NodeLambda, StateUpdate, WindowTask, judge_step, router
from .replay import probe, steer_of, verdicts_of


class BlockTask(TypedDict, total=False):
    """One dense request's windows (consecutive, of one conversation); ``reask``: its follow-up round (0: the first)."""

    block: list[Window]
    reask: int


@dataclass(frozen=True)
class DensePlan:
    """How a metric's per-window verdict step is made dense.

    ``size``: windows per call (>= 2); ``step``: the dense prompt (``prompts/<metric>/judge_dense.md``, placeholders
    ``exchanges``, ``items`` and those of ``shared``); ``task``: the request's task; ``item_schema``: the per-window
    answer schema (each item is validated against it); ``shared``: the values every window of the conversation has
    alike (rubric, system instructions); ``reasks``: follow-up requests for items missing or invalid (default 1)."""

    size: int
    step: str
    task: str
    item_schema: type[BaseModel]
    shared: Callable[[Window], dict[str, str]]
    reasks: int = 1


def check_dense(dense: int | None) -> int | None:
    """``dense`` as given (None or 1: off), or a ``ValueError`` naming the option."""
    if dense is None:
        return None
    if isinstance(dense, bool) or not isinstance(dense, int) or dense < 1:
        raise ValueError(f"dense must be a whole number >= 1 (windows per judge call; 1 or None: off), got {dense!r}")
    return dense if dense > 1 else None


@lru_cache(maxsize=256)
def answer_schema(item_schema: type[BaseModel], items: int) -> type[BaseModel]:
    """The schema of a dense answer of ``items`` items: ``{"items": [{"item": k, <item_schema's fields>}]}``.

    The JSON schema sent is exact (``item`` one of 1..items, each field as the metric's own), but the
    answer is read leniently (a list of anything), so one bad item fails alone and is asked again."""
    fields: dict[str, Any] = {"item": (int, Field(description="The number of the item this verdict is for."))}
    fields.update({name: (f.annotation, f) for name, f in item_schema.model_fields.items()})
    item_model = create_model(f"{item_schema.__name__}Item", **fields)
    item_js = item_model.model_json_schema()
    defs = item_js.pop("$defs", {})
    item_js["properties"]["item"]["enum"] = list(range(1, items + 1))

    def extra(schema: dict[str, Any]) -> None:
        schema["properties"]["items"] = {"type": "array", "items": item_js,
                                         "description": "One verdict per item, each naming its item number."}
        if defs:
            schema.setdefault("$defs", {}).update(defs)

    def placeholder(cls: type[BaseModel]) -> dict[str, Any]:
        """A schema-conforming answer holding every item (the dry run's, so it counts no re-ask)."""
        one = example_from_schema({**item_js, "$defs": defs} if defs else item_js)
        base = one if isinstance(one, dict) else {}
        return {"items": [{**base, "item": k} for k in range(1, items + 1)]}

    model = create_model(
        f"Dense{item_schema.__name__}{items}",
        __config__=ConfigDict(json_schema_extra=extra),
        items=(list[Any], Field(default_factory=list)),
    )
    model.placeholder = classmethod(placeholder)  # type: ignore[attr-defined]
    model.dense = True  # type: ignore[attr-defined]  # the dry run counts its output per item
    return model


#: ``json.dumps(..., ensure_ascii=False)`` without a new encoder per call (json.dumps makes one per call when given
#: an option): the same text.
_dumps = json.JSONEncoder(ensure_ascii=False).encode


def render_exchanges(block: Sequence[Window]) -> str:
    """The exchanges the block's windows hold, each once, in order, as data: one JSON object per line,
    ``{exchange, turn, role, content}`` (1-based)."""
    span = {ex.index: ex for w in block for ex in w.exchanges}
    rows = [_dumps({"exchange": i + 1, "turn": it.index + 1, "role": it.turn.role, "content": it.turn.content})
            for i in sorted(span) for it in span[i].turns]
    return "\n".join(rows)


class DenseItem(TypedDict):
    """One item of a dense request (1-based numbers, as the judge reads them)."""

    item: int
    exchange: int
    reply_turns: list[int]
    context_exchanges: str  # "F to L" or "none"


class Verdicts(TypedDict):
    verdicts: list[Verdict]


def item_rows(block: Sequence[Window]) -> list[DenseItem]:
    """One item per window: the exchange whose reply is judged and its context exchanges (its window's own)."""
    rows: list[DenseItem] = []
    for k, w in enumerate(block, start=1):
        first, last = w.exchanges[0].index + 1, w.target.index + 1
        rows.append({"item": k, "exchange": last, "reply_turns": [t + 1 for t in w.target.reply_turn_indices],
                     "context_exchanges": f"{first} to {last - 1}" if first < last else "none"})
    return rows


def dense_request(plan: DensePlan, block: Sequence[Window]) -> JudgeRequest:
    """The one request for ``block``: the shared values, the exchanges once, the items."""
    items = item_rows(block)
    return JudgeRequest(
        task=plan.task,
        step=plan.step,
        schema=answer_schema(plan.item_schema, len(block)),
        values={**plan.shared(block[0]), "exchanges": render_exchanges(block),
                "items": "\n".join(map(_dumps, items))},
        inputs={"dense_items": items},
    )


#: The start of the error a window gets while its item can still be asked again.
MISSING = "dense answer: "


def read_items(plan: DensePlan, n: int, value: BaseModel | None) -> tuple[dict[int, BaseModel], dict[int, str]]:
    """The valid items by number (1..n), and why each other number has none (``item k ...``)."""
    good: dict[int, BaseModel] = {}
    bad: dict[int, str] = {}
    for raw in getattr(value, "items", None) or []:
        k = raw.get("item") if isinstance(raw, Mapping) else None
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n or k in good:
            continue  # an item naming no item of this request, or one answered already: ignored
        try:
            good[k] = plan.item_schema.model_validate({f: x for f, x in raw.items() if f != "item"})
            bad.pop(k, None)
        except ValidationError as exc:
            errors = exc.errors()
            where = ".".join(map(str, errors[0]["loc"])) if errors else ""
            bad[k] = f"item {k} invalid: {where or 'value'}: {errors[0]['msg'] if errors else exc}"
    for k in range(1, n + 1):
        if k not in good and k not in bad:
            bad[k] = f"item {k} missing"
    return good, bad


def unpack(plan: DensePlan, task: BlockTask, outcome: JudgeOutcome,
           finish: Callable[[WindowTask, JudgeOutcome], StateUpdate]) -> Verdicts:
    """The block's per-window updates, merged: each window's verdict from its item, made by the
    metric's own ``finish``; the request's usage on the first verdict only."""
    block = task["block"]
    transcript = [a.model_copy(update={"shared": True}) for a in outcome.transcript]
    final = task.get("reask", 0) >= plan.reasks
    good, bad = read_items(plan, len(block), outcome.value if outcome.ok else None)
    verdicts: list[Verdict] = []
    for k, window in enumerate(block, start=1):
        value, error = good.get(k), outcome.error
        if outcome.ok and value is None:
            why = f"the dense answer's {bad[k]} (exchange {window.target.index + 1})"
            error = why if final else MISSING + why
        first = k == 1  # one outcome per window, made at once (dataclasses.replace costs as much as the rest)
        each = JudgeOutcome(value=value, error=error, attempts=outcome.attempts if first else 0,
                            usage=outcome.usage if first else Usage(), score=outcome.score, cached=outcome.cached,
                            transcript=transcript, jurors=[])
        verdicts.extend(verdicts_of(finish({"window": window}, each)))
    return {"verdicts": verdicts}


def _missing(v: Any) -> bool:
    """Whether a verdict's item failed and may still be asked again."""
    return isinstance(v, Verdict) and (v.error or "").startswith(MISSING)


def _to_reask(plan: DensePlan, task: BlockTask, update: Any) -> list[Window]:
    """The windows of ``task`` whose item is to be asked again (none once ``plan.reasks`` rounds are done)."""
    if task.get("reask", 0) >= plan.reasks or not isinstance(update, dict):
        return []
    failed = {getattr(v, "window", None) for v in update.get("verdicts") or [] if _missing(v)}
    return [w for w in task["block"] if w.index in failed]


def _merge(update: Any, again: Any) -> Any:
    """``update`` with the re-ask's verdicts in place of the failed ones (same ids)."""
    if not isinstance(update, dict) or not isinstance(again, dict):
        return again if isinstance(again, dict) else update
    newer = {v.id: v for v in again.get("verdicts") or []}

    def take(old: Any) -> Any:
        new = newer.pop(old.id, None)
        if new is None:
            return old
        # both requests are behind it: the first one's usage stays counted (it may be its block's first verdict)
        return new.model_copy(update={"transcript": [*old.transcript, *new.transcript], "usage": old.usage + new.usage,
                                      "attempts": old.attempts + new.attempts})

    verdicts = [take(v) for v in update.get("verdicts") or []] + list(newer.values())
    return {**update, **{k: x for k, x in again.items() if k != "verdicts"}, "verdicts": verdicts}


def _final(update: Any, kept: list[Any]) -> Any:
    """The ``kept`` verdicts, then the update's, errors still marked for a re-ask made plain judge errors."""
    if not isinstance(update, dict):
        return update
    fixed = [v.model_copy(update={"error": v.error[len(MISSING):]}) if _missing(v) else v
             for v in update.get("verdicts") or []]
    return {**update, "verdicts": [*kept, *fixed]}


def dense_step(name: str, judge: Judge, plan: DensePlan,
               finish: Callable[[WindowTask, JudgeOutcome], StateUpdate]) -> RunnableLambda:
    """A node taking a :class:`BlockTask`: one :func:`~judgegraph.core.nodes.judge_step` request for the
    block, each window's verdict made by ``finish`` (the metric's per-window one) from its item, then
    one follow-up request per round for the items missing or invalid."""
    def build(task: BlockTask) -> JudgeRequest:
        return dense_request(plan, task["block"])

    step = judge_step(name, judge, build, partial(unpack, plan, finish=finish))

    def steered(task: BlockTask, config: RunnableConfig) -> tuple[BlockTask, list[Any]]:
        """Under a re-judge (:class:`~judgegraph.core.replay.Steer` with chosen verdicts): the windows to ask
        and the verdicts kept as they are, so re-judging one verdict asks for its window alone."""
        steer = steer_of(config)
        if steer is None or steer.chosen is None:
            return task, []
        ask: list[Window] = []
        kept: list[Any] = []
        for window in task["block"]:
            held = steer.kept(verdicts_of(probe(finish, {"window": window})))
            if held is None:
                ask.append(window)
            else:
                kept.extend(held)
        return {**task, "block": ask}, kept

    def run(task: BlockTask, config: RunnableConfig) -> Any:
        task, kept = steered(task, config)
        if not task["block"]:
            return {"verdicts": kept}
        update = step.invoke(task, config)
        while again := _to_reask(plan, task, update):
            task = {"block": again, "reask": task.get("reask", 0) + 1}
            update = _merge(update, step.invoke(task, config))
        return _final(update, kept)

    async def arun(task: BlockTask, config: RunnableConfig) -> Any:
        task, kept = steered(task, config)
        if not task["block"]:
            return {"verdicts": kept}
        update = await step.ainvoke(task, config)
        while again := _to_reask(plan, task, update):
            task = {"block": again, "reask": task.get("reask", 0) + 1}
            update = _merge(update, await step.ainvoke(task, config))
        return _final(update, kept)

    return NodeLambda(run, afunc=arun, name=name)


def blocks(windows: Sequence[Window], size: int) -> list[list[Window]]:
    """Consecutive windows, ``size`` at a time (the last block may be shorter)."""
    return [list(windows[i : i + size]) for i in range(0, len(windows), size)]


def fan_out_blocks(target: str, size: int, *, empty: str) -> Callable[[Mapping[str, Any]], list[Send] | str]:
    """A router: one ``Send(target, {"block": ...})`` per block of ``state["windows"]``, or ``empty``."""

    def route(state: Mapping[str, Any]) -> list[Send] | str:
        found = blocks(state.get("windows") or [], size)
        return [Send(target, BlockTask(block=b)) for b in found] if found else empty

    return router(route, "fan_out_blocks")


#: The placeholders every dense prompt takes besides its plan's shared values.
PROMPT_VALUES = frozenset({"exchanges", "items"})

__all__ = ["BlockTask", "DensePlan", "answer_schema", "blocks", "check_dense", "dense_request", "dense_step",
           "fan_out_blocks", "read_items"]
